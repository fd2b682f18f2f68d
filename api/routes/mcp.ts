import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { limitRequest } from "../../lib/services";
import type { Services } from "../../lib/services/context";
import { createMcpServer } from "../../mcp/server";
import { TOOLS_BY_NAME } from "../../mcp/tools";
import type { App } from "../http";

const rpcError = (code: number, message: string) => ({ jsonrpc: "2.0" as const, error: { code, message }, id: null });

/** A call of one of our tools: it takes from the budgets of the REST route it stands for. */
function isToolCall(m: unknown): boolean {
  if (typeof m !== "object" || m === null) return false;
  const { method, params } = m as { method?: unknown; params?: { name?: unknown } };
  return method === "tools/call" && typeof params?.name === "string" && TOOLS_BY_NAME.has(params.name);
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

/** POST /mcp: MCP Streamable HTTP, stateless (a new server and transport per request), SPEC 8. */
export function mcpRoutes(app: App, svc: Services): void {
  app.post("/mcp", async (c) => {
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text());
    } catch {
      limitRequest(svc, c.var.caller.ip);
      return c.json(rpcError(-32700, "Parse error: the body is not JSON. POST one JSON-RPC message (or a batch) with Content-Type: application/json."), 400);
    }
    // A tools/call takes from the same budgets as the REST route it stands for (mcp/tools.ts);
    // anything else (initialize, tools/list, notifications) from the general request budget.
    const messages = Array.isArray(body) ? body : [body];
    if (messages.length === 0 || !messages.every(isToolCall)) limitRequest(svc, c.var.caller.ip);

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
  });

  // Stateless: no server-initiated stream to GET and no session to DELETE. Clients (Claude Code
  // among them) expect 405 with Allow: POST here, not a 404.
  app.on(["GET", "DELETE", "PUT", "PATCH"], "/mcp", (c) =>
    c.json(rpcError(-32000, `Method not allowed: this MCP server is stateless; send JSON-RPC messages with POST ${c.var.caller.origin}/mcp.`), 405, { Allow: "POST" }),
  );
}
