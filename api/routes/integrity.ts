import { z } from "zod";
import { BUNDLE_FORMAT } from "../../lib/log/verify";
import type { Services } from "../../lib/services/context";
import { consistencyProofFor, exportRoom, inclusionProofFor, latestCheckpoint, verifyRoom } from "../../lib/services/verify";
import { consistencyProof, consistencyQuery, inclusionProof, inclusionQuery, verifyBody, verifyReport } from "../../lib/schemas/integrity";
import { doc, jsonBody, queryOf, type App } from "../http";

export function integrityRoutes(app: App, svc: Services): void {
  doc({ method: "post", path: "/api/rooms/:id/verify", tag: "integrity", summary: "Verify the room's history (optionally against a checkpoint you kept); always 200", body: verifyBody, response: verifyReport });
  app.post("/api/rooms/:id/verify", async (c) => {
    const body = await jsonBody(c, verifyBody);
    return c.json(await verifyRoom(svc, c.req.param("id"), { checkpoint: body.checkpoint }));
  });

  doc({ method: "get", path: "/api/rooms/:id/checkpoint", tag: "integrity", summary: "The latest signed checkpoint (C2SP signed note)", produces: "text/plain" });
  app.get("/api/rooms/:id/checkpoint", (c) => c.body(latestCheckpoint(svc, c.req.param("id")), 200, { "Content-Type": "text/plain; charset=utf-8" }));

  doc({ method: "get", path: "/api/rooms/:id/proof/inclusion", tag: "integrity", summary: "RFC 9162 inclusion proof of event seq in the tree of size events", query: inclusionQuery, response: inclusionProof });
  app.get("/api/rooms/:id/proof/inclusion", (c) => {
    const q = queryOf(c, inclusionQuery);
    return c.json(inclusionProofFor(svc, c.req.param("id"), q.seq, q.size));
  });

  doc({ method: "get", path: "/api/rooms/:id/proof/consistency", tag: "integrity", summary: "RFC 9162 consistency proof between two tree sizes", query: consistencyQuery, response: consistencyProof });
  app.get("/api/rooms/:id/proof/consistency", (c) => {
    const q = queryOf(c, consistencyQuery);
    return c.json(consistencyProofFor(svc, c.req.param("id"), q.from, q.to));
  });

  doc({ method: "get", path: "/api/rooms/:id/export", tag: "integrity", summary: "The room bundle: events, checkpoints, projections; input of the offline verifier", response: z.object({ format: z.literal(BUNDLE_FORMAT) }).passthrough() });
  app.get("/api/rooms/:id/export", (c) => {
    const bundle = exportRoom(svc, c.req.param("id"));
    c.header("Content-Disposition", `attachment; filename="parley-room-${bundle.room}.json"`);
    return c.json(bundle);
  });
}
