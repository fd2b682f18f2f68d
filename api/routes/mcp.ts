import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { Context } from "hono";
import { limitRequest } from "../../lib/services";
import type { Services } from "../../lib/services/context";
import { holdExport, holdStream } from "../../lib/services/rate-limit";
import { createMcpServer } from "../../mcp/server";
import { TOOLS_BY_NAME } from "../../mcp/tools";
import { holdUntilClosed, type App, type Env } from "../http";

const rpcError = (code: number, message: string) => ({ jsonrpc: "2.0" as const, error: { code, message }, id: null });

/** The name of the tool a tools/call message calls (undefined for any other message). */
function toolCalled(m: unknown): string | undefined {
  if (typeof m !== "object" || m === null) return undefined;
  const { method, params } = m as { method?: unknown; params?: { name?: unknown } };
  return method === "tools/call" && typeof params?.name === "string" ? params.name : undefined;
}

/** The tools that park on the notifier when given a wait, as the REST long-polls do. */
const WAITING_TOOLS = new Set(["read_messages", "my_turn"]);
/** The tools that read a whole room, as the REST export and verify do. */
const WHOLE_ROOM_TOOLS = new Set(["verify_integrity"]);

/** What a message holds while it runs: a stream slot of its client, an export slot, or nothing. */
function holdFor(svc: Services, ip: string, m: unknown): (() => void) | undefined {
  const name = toolCalled(m);
  if (name && WAITING_TOOLS.has(name)) {
    const wait = (m as { params?: { arguments?: { wait?: unknown } } }).params?.arguments?.wait;
    if (typeof wait === "number" && wait > 0) return holdStream(svc, ip);
  }
  if (name && WHOLE_ROOM_TOOLS.has(name)) return holdExport(svc);
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

/** One JSON-RPC message through a fresh MCP server and transport. */
async function answer(c: Context<Env>, svc: Services, body: unknown): Promise<Response> {
  const request = c.req.raw;
  const server = createMcpServer(svc, c.var.caller, request.signal);
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: !prefersEventStream(c.req.header("accept")),
  });
  await server.connect(transport);
  const close = () => void server.close().catch(() => {});
  const response = await transport.handleRequest(request, { parsedBody: body });
  // A JSON answer is complete here; an event stream ends by itself, or when the client goes away.
  if (response.headers.get("content-type")?.startsWith("text/event-stream")) request.signal.addEventListener("abort", close, { once: true });
  else close();
  return response;
}

/** POST /mcp: MCP Streamable HTTP, stateless (a new server and transport per request), SPEC 8. */
export function mcpRoutes(app: App, svc: Services): void {
  app.post("/mcp", async (c) => {
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text());
    } catch {
      await limitRequest(svc, c.var.caller.ip);
      return c.json(rpcError(-32700, "Parse error: the body is not JSON. POST one JSON-RPC message with Content-Type: application/json."), 400);
    }
    // Protocols since 2025-06-18 have no batches: one message, one price (a batch of 100 tools/list
    // would cost one request token and answer megabytes).
    if (Array.isArray(body)) {
      await limitRequest(svc, c.var.caller.ip);
      return c.json(rpcError(-32600, "Invalid Request: JSON-RPC batches are not supported (MCP 2025-06-18 and later have none). POST one JSON-RPC message per request."), 400);
    }
    // A tools/call takes from the same budgets as the REST route it stands for (mcp/tools.ts);
    // anything else (initialize, tools/list, notifications) from the general request budget.
    const tool = toolCalled(body);
    if (!(tool && TOOLS_BY_NAME.has(tool))) await limitRequest(svc, c.var.caller.ip);
    const release = holdFor(svc, c.var.caller.ip, body);
    return release ? holdUntilClosed(c, release, () => answer(c, svc, body)) : answer(c, svc, body);
  });

  // Stateless: no server-initiated stream to GET and no session to DELETE. Clients (Claude Code
  // among them) expect 405 with Allow: POST here, not a 404.
  app.on(["GET", "DELETE", "PUT", "PATCH"], "/mcp", (c) =>
    c.json(rpcError(-32000, `Method not allowed: this MCP server is stateless; send JSON-RPC messages with POST ${c.var.caller.origin}/mcp.`), 405, { Allow: "POST" }),
  );
}
