import assert from "node:assert/strict";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernHttpTransport } from "@modelcontextprotocol/client";

/** The 7 names Roomcomm's clients call, kept exactly. */
export const ROOMCOMM_TOOLS = ["create_room", "get_room", "list_rooms", "read_messages", "send_message", "get_context", "verify_integrity"];
/** Every tool tools/list names. */
export const TOOL_NAMES = [...ROOMCOMM_TOOLS, "revise_thread", "handshake", "create_task", "list_tasks", "join_board", "claim_task", "update_task", "review_task", "my_turn", "reply_turn"];
/** What a whole tools/list answer may weigh (SPEC 8): every connection reads it, and agents pay for it in context. */
export const TOOLS_LIST_BUDGET = 16 * 1024;

/** What callTool gives back: a text copy, plus structuredContent on success. */
export type ToolResult = { isError?: boolean; structuredContent?: any; content: { type: string; text: string }[] };

/** The error body of an isError result, the same {detail, code, retry_after?} as REST. */
export type ToolError = { detail: string; code: string; retry_after?: number };

/** Either official client (SDK 1.x on the 2025 protocol, SDK 2.x on 2026-07-28): both call tools alike. */
export interface ToolCaller {
  callTool(params: { name: string; arguments?: Record<string, unknown> }): Promise<unknown>;
}

/** Sizes of the answers a client received, by JSON-RPC method (a fetch the SDK transports accept). */
export class WireLog {
  readonly methods: string[] = [];
  readonly bytes = new Map<string, number>();
  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await fetch(input, init);
    let method: string | undefined;
    try {
      method = typeof init?.body === "string" ? (JSON.parse(init.body) as { method?: string }).method : undefined;
    } catch {
      method = undefined;
    }
    if (!method) return res;
    this.methods.push(method);
    if (res.headers.get("content-type")?.startsWith("application/json")) this.bytes.set(method, (await res.clone().arrayBuffer()).byteLength);
    return res;
  };
}

/** Records the protocol version a 2025 client settles on at initialize (the SDK hands it to its transport). */
function recordVersion<T extends object>(transport: T, into: { version?: string }): T {
  const t = transport as { setProtocolVersion?: (v: string) => void };
  const original = t.setProtocolVersion?.bind(transport);
  t.setProtocolVersion = (v: string) => {
    into.version = v;
    original?.(v);
  };
  return transport;
}

/** A 2025-protocol client with the version it negotiated. */
export type LegacyClient = Client & { negotiated: { version?: string } };

/**
 * The official SDK 1.x client (2025 protocol: initialize) connected to `${serverUrl}/mcp`. It
 * lists the tools before returning: the SDK only checks a structuredContent against the tool's
 * outputSchema once it has seen the list, so without this a result that breaks its schema would
 * pass unnoticed.
 */
export async function connectMcp(serverUrl: string, name = "parley-tests", wire?: WireLog): Promise<LegacyClient> {
  const negotiated: { version?: string } = {};
  const mcp = Object.assign(new Client({ name, version: "1.0.0" }), { negotiated });
  await mcp.connect(recordVersion(new StreamableHTTPClientTransport(new URL(`${serverUrl}/mcp`), wire ? { fetch: wire.fetch } : {}), negotiated));
  await mcp.listTools();
  return mcp;
}

/** The official SDK 2.x client, negotiating (server/discover, no initialize) with `${serverUrl}/mcp`; it lists the tools too. */
export async function connectModern(serverUrl: string, name = "parley-tests-2026", wire?: WireLog): Promise<ModernClient> {
  const mcp = new ModernClient({ name, version: "2.0.0" }, { versionNegotiation: { mode: "auto" } });
  await mcp.connect(new ModernHttpTransport(new URL(`${serverUrl}/mcp`), wire ? { fetch: wire.fetch } : {}));
  await mcp.listTools();
  return mcp;
}

/**
 * The SDK 1.x client over stdio, through mcp-remote (the bridge stdio-only MCP hosts use) to
 * `${serverUrl}/mcp`. `protocol` is mcp-remote's own mode towards the server: "legacy" forwards
 * the 2025 initialize, "auto" negotiates 2026-07-28 and translates. Its config (OAuth state,
 * which it never needs here) goes to `configDir`; what it logs (stderr) is `bridgeLog()`.
 */
export async function connectThroughMcpRemote(serverUrl: string, configDir: string, protocol: "legacy" | "auto" = "legacy"): Promise<LegacyClient & { bridgeLog: () => string }> {
  const negotiated: { version?: string } = {};
  let log = "";
  const mcp = Object.assign(new Client({ name: "parley-tests-stdio", version: "1.0.0" }), { negotiated, bridgeLog: () => log });
  const proxy = path.join(process.cwd(), "node_modules", "mcp-remote", "dist", "proxy.js");
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [proxy, `${serverUrl}/mcp`, "--transport", "http-only", "--protocol", protocol],
    env: { PATH: process.env.PATH ?? "", HOME: configDir, MCP_REMOTE_CONFIG_DIR: configDir },
    stderr: "pipe",
  });
  transport.stderr?.on("data", (chunk: Buffer) => void (log += chunk.toString()));
  await mcp.connect(recordVersion(transport, negotiated));
  await mcp.listTools();
  return mcp;
}

export async function call(mcp: ToolCaller, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await mcp.callTool({ name, arguments: args })) as ToolResult;
}

/** The structuredContent of a successful call, after checking that its text copy says the same. */
export async function ok(mcp: ToolCaller, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const r = await call(mcp, name, args);
  assert.ok(!r.isError, `${name} failed: ${r.content[0]?.text}`);
  assert.deepEqual(JSON.parse(r.content[0]!.text), r.structuredContent, `${name}: the text copy is the structured content`);
  return r.structuredContent;
}

/**
 * The error body ({detail, code, retry_after?}) of a call that must be an isError result;
 * with `code`, it must also be that code.
 */
export async function fails(mcp: ToolCaller, name: string, args: Record<string, unknown> = {}, code?: string): Promise<ToolError> {
  const r = await call(mcp, name, args);
  assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r.structuredContent)}`);
  assert.equal(r.structuredContent, undefined, `${name}: an error has no structuredContent`);
  const body: ToolError = JSON.parse(r.content[0]!.text);
  if (code !== undefined) assert.equal(body.code, code, `${name}: ${body.detail}`);
  return body;
}

/**
 * Polls `check` until it holds, e.g. until a long-poll is parked on the server
 * (`server.svc.notifier.streamCount` above its idle value). Fails after `ms`.
 */
export async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) assert.fail(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
