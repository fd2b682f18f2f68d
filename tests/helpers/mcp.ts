import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/** What callTool gives back: a text copy, plus structuredContent on success. */
export type ToolResult = { isError?: boolean; structuredContent?: any; content: { type: string; text: string }[] };

/** The error body of an isError result, the same {detail, code, retry_after?} as REST. */
export type ToolError = { detail: string; code: string; retry_after?: number };

/**
 * The official SDK client connected to `${serverUrl}/mcp`. It lists the tools before returning:
 * the SDK only checks a structuredContent against the tool's outputSchema once it has seen the
 * list, so without this a result that breaks its schema would pass unnoticed.
 */
export async function connectMcp(serverUrl: string, name = "parley-tests"): Promise<Client> {
  const mcp = new Client({ name, version: "1.0.0" });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${serverUrl}/mcp`)));
  await mcp.listTools();
  return mcp;
}

export async function call(mcp: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await mcp.callTool({ name, arguments: args })) as ToolResult;
}

/** The structuredContent of a successful call, after checking that its text copy says the same. */
export async function ok(mcp: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const r = await call(mcp, name, args);
  assert.ok(!r.isError, `${name} failed: ${r.content[0]?.text}`);
  assert.deepEqual(JSON.parse(r.content[0]!.text), r.structuredContent, `${name}: the text copy is the structured content`);
  return r.structuredContent;
}

/**
 * The error body ({detail, code, retry_after?}) of a call that must be an isError result;
 * with `code`, it must also be that code.
 */
export async function fails(mcp: Client, name: string, args: Record<string, unknown> = {}, code?: string): Promise<ToolError> {
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
