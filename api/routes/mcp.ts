import { createMcpHandler, isLegacyRequest, WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/server";
import type { Context } from "hono";
import { limitRequest } from "../../lib/services";
import type { Services } from "../../lib/services/context";
import { holdExport, holdStream } from "../../lib/services/rate-limit";
import { listenedUris, watchRooms } from "../../mcp/listen";
import { createMcpServer, errorBody } from "../../mcp/server";
import { TOOLS_BY_NAME } from "../../mcp/tools";
import { holdUntilClosed, type App, type Env } from "../http";

const rpcError = (code: number, message: string, id: unknown = null, data?: unknown) =>
  ({ jsonrpc: "2.0" as const, error: { code, message, ...(data === undefined ? {} : { data }) }, id });

/** The tool a tools/call message calls (undefined for any other message or an unknown tool). */
function toolCalled(m: unknown) {
  if (typeof m !== "object" || m === null) return undefined;
  const { method, params } = m as { method?: unknown; params?: { name?: unknown } };
  return method === "tools/call" && typeof params?.name === "string" ? TOOLS_BY_NAME.get(params.name) : undefined;
}

/** What a message holds while it runs: a stream slot of its client, an export slot, or nothing. */
function holdFor(svc: Services, ip: string, m: unknown): (() => void) | undefined {
  // A subscriptions/listen stream is an event stream, as GET /events.
  if (listenedUris(m) !== undefined) return holdStream(svc, ip);
  const tool = toolCalled(m);
  if (tool?.waits) {
    const args = (m as { params?: { arguments?: { wait?: unknown; my_next?: { wait?: unknown } } } }).params?.arguments;
    const wait = args?.wait ?? args?.my_next?.wait;
    if (typeof wait === "number" && wait > 0) return holdStream(svc, ip);
  }
  if (tool?.wholeRoom) return holdExport(svc);
  return undefined;
}

/** Quality of a media type in an Accept header (-1 when absent). */
function quality(accept: string, type: string): number {
  for (const part of accept.split(",")) {
    const [media, ...params] = part.split(";").map((s) => s.trim().toLowerCase());
    if (media !== type) continue;
    const q = params.find((p) => p.startsWith("q="));
    return q ? Number(q.slice(2)) || 0 : 1;
  }
  return -1;
}

/** JSON responses unless the client ranks text/event-stream above application/json. */
const prefersEventStream = (accept: string | undefined) =>
  quality(accept ?? "", "text/event-stream") > quality(accept ?? "", "application/json");

const isEventStream = (r: Response) => r.headers.get("content-type")?.startsWith("text/event-stream") ?? false;

/** A 2025-protocol message (initialize, or any request without the 2026 `_meta` envelope): a stateless server over the 2025 transport. */
async function answerLegacy(c: Context<Env>, svc: Services, body: unknown): Promise<Response> {
  const request = c.req.raw;
  const server = createMcpServer(svc, c.get("caller"), "legacy", request.signal);
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !prefersEventStream(c.req.header("accept")) });
  await server.connect(transport);
  const close = () => void server.close().catch(() => {});
  const response = await transport.handleRequest(request, { parsedBody: body });
  // A JSON answer is complete here; an event stream ends by itself, or when the client goes away.
  if (isEventStream(response)) request.signal.addEventListener("abort", close, { once: true });
  else close();
  return response;
}

/**
 * A 2026-07-28 message (server/discover, or a request with the per-request `_meta` envelope): the
 * SDK's handler, strict (`legacy: "reject"`: 2025 traffic never reaches it), with a fresh server.
 * A subscriptions/listen for rooms also gets their new messages pushed onto its stream.
 */
async function answerModern(c: Context<Env>, svc: Services, body: unknown): Promise<Response> {
  const request = c.req.raw;
  const caller = c.get("caller");
  const handler = createMcpHandler(() => createMcpServer(svc, caller, "modern", request.signal), {
    legacy: "reject",
    responseMode: prefersEventStream(c.req.header("accept")) ? "sse" : "auto",
  });
  const uris = listenedUris(body);
  if (!uris?.length) return handler.fetch(request, { parsedBody: body });

  const id = (body as { id?: unknown }).id ?? null;
  let watch;
  try {
    watch = await watchRooms(svc, caller, uris, (uri) => handler.notify.resourceUpdated(uri), () => void handler.close());
  } catch (err) {
    const data = errorBody(err);
    return c.json(rpcError(-32602, String(data.detail), id, data), 200);
  }
  const response = await handler.fetch(request, { parsedBody: body });
  if (!isEventStream(response)) {
    watch.stop();
    return response;
  }
  watch.start();
  return holdUntilClosed(c, watch.stop, async () => response);
}

/** POST /mcp: MCP Streamable HTTP, stateless (a new server per request), both protocol lines on one URL (SPEC 8). */
export function mcpRoutes(app: App, svc: Services): void {
  app.post("/mcp", async (c) => {
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text());
    } catch {
      await limitRequest(svc, c.get("caller").ip);
      return c.json(rpcError(-32700, "Parse error: the body is not JSON. POST one JSON-RPC message with Content-Type: application/json."), 400);
    }
    // Protocols since 2025-06-18 have no batches: one message, one price (a batch of 100 tools/list
    // would cost one request token and answer megabytes).
    if (Array.isArray(body)) {
      await limitRequest(svc, c.get("caller").ip);
      return c.json(rpcError(-32600, "Invalid Request: JSON-RPC batches are not supported (MCP 2025-06-18 and later have none). POST one JSON-RPC message per request."), 400);
    }
    // A tools/call takes from the same budgets as the REST route it stands for (mcp/tools.ts);
    // anything else (initialize, server/discover, tools/list, notifications) from the general request budget.
    if (!toolCalled(body)) await limitRequest(svc, c.get("caller").ip);
    const answer = async () => ((await isLegacyRequest(c.req.raw, body)) ? answerLegacy(c, svc, body) : answerModern(c, svc, body));
    const release = holdFor(svc, c.get("caller").ip, body);
    return release ? holdUntilClosed(c, release, answer) : answer();
  });

  // Stateless: no server-initiated stream to GET and no session to DELETE. Clients (Claude Code
  // among them) expect 405 with Allow: POST here, not a 404.
  app.on(["GET", "DELETE", "PUT", "PATCH"], "/mcp", (c) =>
    c.json(rpcError(-32000, `Method not allowed: this MCP server is stateless; send JSON-RPC messages with POST ${c.get("caller").origin}/mcp.`), 405, { Allow: "POST" }),
  );
}
