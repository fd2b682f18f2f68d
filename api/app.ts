import type { IncomingMessage } from "node:http";
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { routePath } from "hono/route";
import { ParleyError } from "../lib/errors";
import type { Services } from "../lib/services/context";
import { limitRequest } from "../lib/services";
import { requestMetrics } from "../lib/services/metrics";
import { holdStream } from "../lib/services/rate-limit";
import { API_SECURITY_HEADERS, callerFor, errorResponse, holdUntilClosed, type Env } from "./http";
import { a2aRoutes } from "./routes/a2a";
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
import { webhookRoutes } from "./routes/webhooks";
import { adminRoutes } from "./routes/admin";
import { reportRoutes } from "./routes/reports";

const MAX_BODY_BYTES = 64 * 1024;

/**
 * Requests with their own, tighter budgets in the services: room creation, and the two ways of
 * posting a message (a post, a turn reply), which take the post budgets and nothing else
 * (POST /mcp and the A2A endpoints /a2a[/{uuid}]: per method, in api/routes/mcp.ts and a2a.ts).
 */
const OWN_BUDGET = /^\/(api\/rooms(\/[^/]+\/(messages|turns\/[^/]+\/reply))?|mcp|a2a(\/[^/]+)?\/?)$/;

/** The GET routes that hold their response open: the SSE stream always, the long-polls while they wait. */
const EVENT_STREAM = /^\/api\/rooms\/[^/]+\/events$/;
const LONG_POLL = /^\/api\/rooms\/[^/]+\/(messages|turns\/mine)$/;
const holdsOpen = (c: Context<Env>) =>
  c.req.method === "GET" && (EVENT_STREAM.test(c.req.path) || (LONG_POLL.test(c.req.path) && Number(c.req.query("wait")) > 0));

/** Errors of a request whose client went away while its body was read (aborted, reset, timed out). */
const GONE = new Set(["ECONNRESET", "ECONNABORTED", "EPIPE", "ERR_STREAM_PREMATURE_CLOSE", "ABORT_ERR"]);
function clientWentAway(c: Context<Env>, err: Error): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  return (GONE.has(code ?? "") || err.name === "AbortError") && incoming?.socket?.destroyed !== false;
}

/** The Hono app: /api/*, /health, /openapi.json, /agents.md, /llms.txt and markdown room URLs. */
export function createApiApp(svc: Services): Hono<Env> {
  const app = new Hono<Env>();

  // The server's own latency per route pattern (the last matched route), for GET /metrics.
  const metrics = requestMetrics(svc);
  app.use(async (c, next) => {
    const t0 = performance.now();
    await next();
    metrics.record(c.req.method, routePath(c, -1), c.res.status, (performance.now() - t0) / 1000, holdsOpen(c));
  });
  app.use(async (c, next) => {
    c.set("caller", callerFor(svc, c));
    await next();
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Referrer-Policy", "no-referrer");
    if (!c.res.headers.has("Content-Security-Policy")) c.header("Content-Security-Policy", API_SECURITY_HEADERS["Content-Security-Policy"]);
  });
  app.use(async (c, next) => {
    if (!(c.req.method === "POST" && OWN_BUDGET.test(c.req.path))) await limitRequest(svc, c.var.caller.ip);
    await next();
  });
  // Open streams and waiting long-polls count against their client's cap until the response closes
  // (MCP's waiting tools and A2A's streams: api/routes/mcp.ts, a2a.ts).
  app.use((c, next) => (holdsOpen(c) ? holdUntilClosed(c, holdStream(svc, c.var.caller.ip), next) : next()));
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
  webhookRoutes(app, svc);
  reportRoutes(app, svc);
  adminRoutes(app, svc);
  arbiterRoutes(app, svc);
  mcpRoutes(app, svc);
  a2aRoutes(app, svc);
  skillRoutes(app);
  metaRoutes(app, svc);

  app.notFound((c) => c.json({ detail: `Nothing at ${c.req.method} ${c.req.path}. See /openapi.json for the API.`, code: "not_found" }, 404));
  app.onError((err, c) => {
    if (err instanceof ParleyError) return errorResponse(c, err);
    if (clientWentAway(c, err)) {
      // Nobody reads this answer; one line for each, not a stack.
      console.warn(`${c.req.method} ${c.req.path}: the client went away before its request was read (${(err as NodeJS.ErrnoException).code ?? err.name}).`);
      return c.json({ detail: "The request was not received completely.", code: "invalid_json" }, 400);
    }
    console.error(err);
    return c.json({ detail: "Something went wrong on the server; try again later.", code: "internal_error" }, 500);
  });
  return app;
}
