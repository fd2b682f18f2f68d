import { z } from "zod";
import type { Services } from "../../lib/services/context";
import { getContextJson, getThread, handshake, listHandshakes, listThreadRevisions, openThread, resolveDiscrepancy, reviseThread } from "../../lib/services/ledger";
import { context, discrepancy, handshake as handshakeSchema, handshakeBody, openThreadBody, resolveBody, revision, reviseThreadBody, seal, threadWithRevisions } from "../../lib/schemas/ledger";
import { receipt } from "../../lib/schemas/messages";
import { bearer, doc, jsonBody, type App } from "../http";

/** The negotiation ledger (SPEC 5); threads keep their compat path `/claims`. */
export function ledgerRoutes(app: App, svc: Services): void {
  doc({ method: "post", path: "/api/rooms/:id/claims", tag: "ledger", summary: "Open a thread (propose a value for a subject)", body: openThreadBody, response: threadWithRevisions, status: 201 });
  app.post("/api/rooms/:id/claims", async (c) => c.json(await openThread(svc, c.req.param("id"), await jsonBody(c, openThreadBody)), 201));

  doc({ method: "get", path: "/api/rooms/:id/claims/:tid", tag: "ledger", summary: "A thread with its revisions", response: threadWithRevisions });
  app.get("/api/rooms/:id/claims/:tid", async (c) => c.json(await getThread(svc, c.req.param("id"), c.req.param("tid"))));

  doc({ method: "get", path: "/api/rooms/:id/claims/:tid/revisions", tag: "ledger", summary: "A thread's revisions, oldest first", response: z.array(revision) });
  app.get("/api/rooms/:id/claims/:tid/revisions", async (c) => c.json(await listThreadRevisions(svc, c.req.param("id"), c.req.param("tid"))));

  doc({ method: "post", path: "/api/rooms/:id/claims/:tid/revisions", tag: "ledger", summary: "Revise a thread: update | confirm | contradict | retract", body: reviseThreadBody, response: threadWithRevisions, status: 201 });
  app.post("/api/rooms/:id/claims/:tid/revisions", async (c) =>
    c.json(await reviseThread(svc, c.req.param("id"), c.req.param("tid"), await jsonBody(c, reviseThreadBody)), 201),
  );

  doc({ method: "get", path: "/api/rooms/:id/context", tag: "ledger", summary: "The ledger: threads, discrepancies, context_hash and seal", response: context });
  app.get("/api/rooms/:id/context", async (c) => c.body(await getContextJson(svc, c.req.param("id")), 200, { "Content-Type": "application/json" }));

  doc({ method: "post", path: "/api/rooms/:id/discrepancies/:did/resolve", tag: "ledger", summary: "Resolve a discrepancy: the related thread's owner (agent_id) or the room owner (token)", body: resolveBody, response: discrepancy.extend({ receipt: receipt.nullable() }), owner: true });
  app.post("/api/rooms/:id/discrepancies/:did/resolve", async (c) =>
    c.json(await resolveDiscrepancy(svc, c.req.param("id"), c.req.param("did"), await jsonBody(c, resolveBody), bearer(c))),
  );

  const handshakeResult = z.object({ handshake: handshakeSchema, context_hash: z.string(), sealed: seal, receipt });
  doc({ method: "post", path: "/api/rooms/:id/handshake", tag: "ledger", summary: "Acknowledge the current ledger (409 stale_context_hash when it changed)", body: handshakeBody, response: handshakeResult, status: 201 });
  app.post("/api/rooms/:id/handshake", async (c) => c.json(await handshake(svc, c.req.param("id"), await jsonBody(c, handshakeBody)), 201));

  doc({ method: "get", path: "/api/rooms/:id/handshakes", tag: "ledger", summary: "Handshakes with signature_valid computed", response: z.array(handshakeSchema) });
  app.get("/api/rooms/:id/handshakes", async (c) => c.json(await listHandshakes(svc, c.req.param("id"))));
}
