import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ParleyError } from "../lib/errors";
import type { Services } from "../lib/services/context";
import { limitRequest } from "../lib/services";
import { callerFor, errorResponse, type Env } from "./http";
import { arbiterRoutes } from "./routes/arbiter";
import { integrityRoutes } from "./routes/integrity";
import { ledgerRoutes } from "./routes/ledger";
import { mcpRoutes } from "./routes/mcp";
import { messageRoutes } from "./routes/messages";
import { metaRoutes } from "./routes/meta";
import { roomRoutes } from "./routes/rooms";
import { skillRoutes } from "./routes/skill";
import { taskRoutes } from "./routes/tasks";
import { turnRoutes } from "./routes/turns";

const MAX_BODY_BYTES = 64 * 1024;

/** Requests with their own, tighter budgets in the services (POST /mcp: per message, in api/routes/mcp.ts). */
const OWN_BUDGET = /^\/(api\/rooms(\/[^/]+\/messages)?|mcp)$/;

/** The Hono app: /api/*, /health, /openapi.json, /agents.md, /llms.txt and markdown room URLs. */
export function createApiApp(svc: Services): Hono<Env> {
  const app = new Hono<Env>();

  app.use(async (c, next) => {
    c.set("caller", callerFor(svc, c));
    await next();
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Referrer-Policy", "no-referrer");
    if (!c.res.headers.has("Content-Security-Policy")) c.header("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
  });
  app.use(async (c, next) => {
    if (!(c.req.method === "POST" && OWN_BUDGET.test(c.req.path))) limitRequest(svc, c.var.caller.ip);
    await next();
  });
  // Only requests with a body: the check reads the raw Request, which costs a full Request object.
  const limitBody = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => errorResponse(c, new ParleyError("payload_too_large", "The request body is larger than 64 KiB. Send less text per request.")),
  });
  app.use((c, next) => (c.req.method === "GET" || c.req.method === "HEAD" ? next() : limitBody(c, next)));

  roomRoutes(app, svc);
  messageRoutes(app, svc);
  integrityRoutes(app, svc);
  ledgerRoutes(app, svc);
  taskRoutes(app, svc);
  turnRoutes(app, svc);
  arbiterRoutes(app, svc);
  mcpRoutes(app, svc);
  skillRoutes(app);
  metaRoutes(app, svc);

  app.notFound((c) => c.json({ detail: `Nothing at ${c.req.method} ${c.req.path}. See /openapi.json for the API.`, code: "not_found" }, 404));
  app.onError((err, c) => {
    if (err instanceof ParleyError) return errorResponse(c, err);
    console.error(err);
    return c.json({ detail: "Something went wrong on the server; try again later.", code: "internal_error" }, 500);
  });
  return app;
}
