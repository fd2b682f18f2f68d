import type { IncomingMessage } from "node:http";
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { routePath } from "hono/route";
import { ParleyError } from "../lib/errors";
import type { Services } from "../lib/services/context";
import { limitRequest } from "../lib/services";
import { requestMetrics } from "../lib/services/metrics";
import { holdStream } from "../lib/services/rate-limit";
import { callerFor, endAfterReads, errorResponse, holdUntilClosed, nodeRequest, nodeResponse, readBody, type Env } from "./http";
import { KeptMatchRouter } from "./router";
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
const holdsOpen = (method: string, path: string, c: Context<Env>) =>
  method === "GET" && (EVENT_STREAM.test(path) || (LONG_POLL.test(path) && Number(c.req.query("wait")) > 0));

const tooLarge = () => new ParleyError("payload_too_large", "The request body is larger than 64 KiB. Send less text per request.");

/** Form posts (the admin console) keep Hono's reader; every other body on a Node socket is read directly. */
const FORM_BODY = /^\s*(multipart\/form-data|application\/x-www-form-urlencoded)/i;
const readsDirectly = (c: Context<Env>) => nodeRequest(c) !== undefined && !FORM_BODY.test(nodeRequest(c)!.headers["content-type"] ?? "");

/** Errors of a request whose client went away while its body was read (aborted, reset, timed out). */
const GONE = new Set(["ECONNRESET", "ECONNABORTED", "EPIPE", "ERR_STREAM_PREMATURE_CLOSE", "ABORT_ERR"]);
function clientWentAway(c: Context<Env>, err: Error): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  return (GONE.has(code ?? "") || err.name === "AbortError") && incoming?.socket?.destroyed !== false;
}

/** The answer to an error a route or the request frame threw. */
function onError(err: Error, c: Context<Env>): Response {
  if (err instanceof ParleyError) return errorResponse(c, err);
  if (clientWentAway(c, err)) {
    // Nobody reads this answer; one line for each, not a stack.
    console.warn(`${c.req.method} ${c.req.path}: the client went away before its request was read (${(err as NodeJS.ErrnoException).code ?? err.name}).`);
    return c.json({ detail: "The request was not received completely.", code: "invalid_json" }, 400);
  }
  console.error(err);
  return c.json({ detail: "Something went wrong on the server; try again later.", code: "internal_error" }, 500);
}

/** The Hono app: /api/*, /health, /openapi.json, /agents.md, /llms.txt and markdown room URLs. */
export function createApiApp(svc: Services): Hono<Env> {
  const app = new Hono<Env>({ router: new KeptMatchRouter() });

  // Form bodies (and in-process requests): Hono's reader, which builds a full web Request.
  const limitBody = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => errorResponse(c, tooLarge()),
  });
  /** Runs the route with the request's body read under the 64 KiB limit. */
  async function withBody(c: Context<Env>, next: () => Promise<void>): Promise<void> {
    if (readsDirectly(c)) {
      // Straight off the socket, not through a web Request and its stream; routes get it from
      // Hono's body cache (c.req.text(), .json(), .parseBody()).
      const text = await readBody(nodeRequest(c)!, MAX_BODY_BYTES);
      if (text === undefined) throw tooLarge();
      (c.req.bodyCache as Record<string, Promise<unknown>>).text = Promise.resolve(text);
      return next();
    }
    // The body limit answers an oversized body itself (else it passes on what next() gives).
    const answer: unknown = await limitBody(c, next);
    if (answer instanceof Response) c.res = answer;
  }
  const metrics = requestMetrics(svc);
  // Every request's frame, in one middleware (each level of Hono's chain costs a promise and a
  // closure on every request): the caller, the general request budget, the hold an open stream or
  // waiting long-poll keeps on its client's cap until the response closes (MCP's waiting tools and
  // A2A's streams: api/routes/mcp.ts, a2a.ts), the body limit, and the server's own latency per
  // route pattern (the last matched route) for GET /metrics. The API's security headers are set on
  // the Node response in server.ts: set here, every answer would carry a Headers object, off
  // @hono/node-server's fast path.
  app.use(async (c, next) => {
    const t0 = performance.now();
    const { method, path } = c.req;
    const caller = callerFor(svc, c);
    c.set("caller", caller);
    const open = holdsOpen(method, path, c);
    try {
      if (!(method === "POST" && OWN_BUDGET.test(path))) await limitRequest(svc, caller.ip);
      if (open) await holdUntilClosed(c, holdStream(svc, caller.ip), next);
      else if (method === "GET" || method === "HEAD") {
        // A read that does not wait is answered at once: its answer leaves with the turn's others.
        const res = nodeResponse(c);
        if (res) endAfterReads(res);
        await next();
      }
      else await withBody(c, next);
    } catch (err) {
      // Thrown here rather than in a route (Hono answers those): answered the same way.
      c.res = onError(err as Error, c);
    }
    metrics.record(method, routePath(c, -1), c.res.status, (performance.now() - t0) / 1000, open);
  });

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
  app.onError(onError);
  return app;
}
