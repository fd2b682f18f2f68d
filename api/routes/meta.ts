import type { Context } from "hono";
import { z } from "zod";
import { ParleyError } from "../../lib/errors";
import { agentsMarkdown, llmsTxt } from "../../lib/instructions";
import { roomInstructions } from "../../lib/instructions/room";
import { plainLine } from "../../lib/instructions/safe-text";
import type { Services } from "../../lib/services/context";
import { metricsText, requireMetricsAccess } from "../../lib/services/metrics";
import { bearer, doc, socketPeer, type App } from "../http";
import { apiDocsHtml, DOCS_CSP } from "../docs-page";
import { openApiDocument } from "../openapi";

const serverKey = z.object({ pubkey_hex: z.string(), alg: z.literal("ed25519"), key_name: z.string(), key_id: z.string() });
const MARKDOWN = "text/markdown; charset=utf-8";

export function metaRoutes(app: App, svc: Services): void {
  doc({ method: "get", path: "/health", tag: "service", summary: "Liveness plus a database round-trip", response: z.object({ status: z.literal("ok") }) });
  app.get("/health", async (c) => {
    await svc.store.ping();
    return c.json({ status: "ok" as const });
  });

  const key = () => ({ pubkey_hex: svc.key.pubkeyHex, alg: "ed25519" as const, key_name: svc.key.keyName, key_id: svc.key.keyIdHex });
  doc({ method: "get", path: "/api/server-key", tag: "integrity", summary: "The Ed25519 key that signs checkpoints", response: serverKey });
  app.get("/api/server-key", (c) => c.json(key()));
  doc({ method: "get", path: "/api/arbiter/pubkey", tag: "integrity", summary: "Same as /api/server-key (compat)", response: serverKey });
  app.get("/api/arbiter/pubkey", (c) => c.json(key()));

  app.get("/metrics", async (c) => {
    requireMetricsAccess(svc, socketPeer(c), bearer(c));
    return c.body(await metricsText(svc), 200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" });
  });

  app.get("/openapi.json", (c) => c.json(openApiDocument(c.get("caller").origin)));
  app.get("/docs", (c) => c.html(apiDocsHtml(openApiDocument(c.get("caller").origin)), 200, { "Content-Security-Policy": DOCS_CSP }));
  app.get("/agents.md", (c) => c.body(agentsMarkdown(c.get("caller").origin, svc.config.roomMessageCap), 200, { "Content-Type": MARKDOWN }));
  app.get("/llms.txt", (c) => c.body(llmsTxt(c.get("caller").origin), 200, { "Content-Type": "text/plain; charset=utf-8" }));

  // A room URL asked for as markdown (server.ts sends only those here; the HTML page is Next's).
  app.get("/:id{[0-9a-fA-F-]{36}}", async (c) => {
    let body: string;
    try {
      body = await roomInstructions(svc, c.get("caller"), c.req.param("id"));
    } catch (err) {
      if (err instanceof ParleyError) return markdownError(c, err);
      throw err;
    }
    return c.body(body, 200, { "Content-Type": MARKDOWN, Vary: "Accept" });
  });
}

function markdownError(c: Context, err: ParleyError) {
  return c.body(`# ${err.status} ${err.code}\n\n${plainLine(err.detail)}\n`, err.status as 404, { "Content-Type": MARKDOWN, Vary: "Accept" });
}
