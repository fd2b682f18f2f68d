import type { Context } from "hono";
import { VersionNotSupportedError, toJsonRpcError } from "@a2a-js/sdk/errors";
import { JsonRpcTransportHandler, ServerCallContext } from "@a2a-js/sdk/server";
import { RoomAgent, ServiceAgent, remembering, type AgentRequest } from "../../a2a/agents";
import { A2A_VERSION, roomCard, serviceCard } from "../../a2a/card";
import { RPC, retryAfterOf, rpcErrorOf, type JsonRpcErrorObject } from "../../a2a/errors";
import { rpcEventStream, SSE_HEADERS } from "../../a2a/sse";
import { limitRequest } from "../../lib/services";
import { requireRoom } from "../../lib/services/access";
import type { Services } from "../../lib/services/context";
import { holdStream } from "../../lib/services/rate-limit";
import { holdUntilClosed, type App, type Env } from "../http";

type RpcId = string | number | null;
type Agent = RoomAgent | ServiceAgent;

/** The methods that post (the room's) or create a room (the service's): they take those budgets instead of a request token. */
const ROOM_OWN_BUDGET = new Set(["SendMessage", "SendStreamingMessage"]);
const SERVICE_OWN_BUDGET = new Set(["SendMessage"]);
/** The methods that answer with a stream: each holds one of its client's stream slots, as an SSE stream does. */
const STREAMS = new Set(["SendStreamingMessage", "SubscribeToTask"]);

const rpcFailure = (id: RpcId, error: JsonRpcErrorObject) => ({ jsonrpc: "2.0" as const, id, error });

function idOf(body: unknown): RpcId {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === "string" || (typeof id === "number" && Number.isInteger(id)) ? id : null;
}
const methodOf = (body: unknown) => {
  const method = (body as { method?: unknown } | null)?.method;
  return typeof method === "string" ? method : "";
};

/**
 * A2A-Version is Major.Minor; a patch part is ignored (A2A 1.0 §3.6). Absent means 0.3, which this
 * server does not speak.
 */
function versionServed(header: string | undefined): boolean {
  const m = /^\s*(\d+)(?:\.(\d+))?(?:\.\d+)?\s*$/.exec(header ?? "");
  return m !== null && `${Number(m[1])}.${Number(m[2] ?? 0)}` === A2A_VERSION;
}

/** A JSON-RPC error answer: HTTP 200 as JSON-RPC over HTTP has it, Retry-After when there is a wait. */
function failureResponse(c: Context<Env>, id: RpcId, err: unknown): Response {
  const retryAfter = retryAfterOf(err);
  return c.json(rpcFailure(id, rpcErrorOf(err)), 200, retryAfter !== undefined ? { "Retry-After": String(retryAfter) } : {});
}

/** One JSON-RPC request through the SDK's transport handler, to `agent`. */
async function answer(c: Context<Env>, agent: Agent, body: Record<string, unknown>, stop: () => void): Promise<Response> {
  const id = idOf(body);
  const { handler, failure } = remembering(agent);
  const result = await new JsonRpcTransportHandler(handler).handle(body, new ServerCallContext({ requestedVersion: A2A_VERSION }));
  if (Symbol.asyncIterator in result) {
    const stream = result[Symbol.asyncIterator]();
    let first: IteratorResult<unknown>;
    try {
      first = await stream.next();
    } catch (err) {
      stop();
      return failureResponse(c, id, err);
    }
    return new Response(rpcEventStream(stream, first, id, stop), { headers: SSE_HEADERS });
  }
  stop();
  const err = failure();
  if (result.error !== undefined && err !== undefined) return failureResponse(c, id, err);
  return c.json(result);
}

/**
 * POST /a2a/{uuid} and /a2a: A2A 1.0 JSON-RPC. Requests that write take the budgets of the REST
 * route they stand for (the post budgets, the room budget), everything else one request token;
 * streams hold a stream slot until they close.
 */
async function serve(c: Context<Env>, svc: Services, room: string | undefined): Promise<Response> {
  const ip = c.get("caller").ip;
  let body: unknown;
  try {
    body = JSON.parse(await c.req.text());
  } catch {
    body = undefined;
  }
  const id = idOf(body);
  try {
    if (body === undefined || typeof body !== "object" || body === null) {
      await limitRequest(svc, ip);
      return c.json(rpcFailure(null, { code: RPC.PARSE_ERROR, message: "Parse error: the body is not JSON. POST one JSON-RPC 2.0 request object with Content-Type: application/json." }));
    }
    if (Array.isArray(body)) {
      await limitRequest(svc, ip);
      return c.json(rpcFailure(null, { code: RPC.INVALID_REQUEST, message: "Invalid Request: JSON-RPC batches are not supported. POST one request per HTTP request." }));
    }
    const method = methodOf(body);
    if (!versionServed(c.req.header("a2a-version"))) {
      await limitRequest(svc, ip);
      const asked = c.req.header("a2a-version");
      return c.json(
        rpcFailure(id, toJsonRpcError(new VersionNotSupportedError(`This agent speaks A2A ${A2A_VERSION}; ${asked ? `"${asked.slice(0, 20)}" is` : "a request without an A2A-Version header is 0.3, which is"} not served. Send the header A2A-Version: ${A2A_VERSION}.`))),
      );
    }
    if (!(room === undefined ? SERVICE_OWN_BUDGET : ROOM_OWN_BUDGET).has(method)) await limitRequest(svc, ip);
    const listening = new AbortController();
    const stop = () => listening.abort();
    const signal = AbortSignal.any([c.req.raw.signal, listening.signal]);
    const req: AgentRequest = { svc, caller: c.get("caller"), signal };
    const agent = room === undefined ? new ServiceAgent(req) : new RoomAgent(req, room);
    const run = () => answer(c, agent, body as Record<string, unknown>, stop);
    return room !== undefined && STREAMS.has(method) ? await holdUntilClosed(c, holdStream(svc, ip), run) : await run();
  } catch (err) {
    return failureResponse(c, id, err);
  }
}

export function a2aRoutes(app: App, svc: Services): void {
  const card = (c: Context<Env>) => c.json(serviceCard(c.get("caller").origin), 200, { "Cache-Control": "public, max-age=3600" });
  app.get("/.well-known/agent-card.json", card);
  app.get("/a2a/.well-known/agent-card.json", card);
  // 404 room_not_found, 410 room_expired, 400 invalid_uuid as JSON, as every room route answers.
  app.get("/a2a/:id/.well-known/agent-card.json", async (c) => c.json(roomCard(c.get("caller").origin, await requireRoom(svc, c.req.param("id")))));

  for (const path of ["/a2a", "/a2a/"]) app.post(path, (c) => serve(c, svc, undefined));
  for (const path of ["/a2a/:id", "/a2a/:id/"]) app.post(path, (c) => serve(c, svc, c.req.param("id")));

  // JSON-RPC takes POST only; a GET here is usually someone looking for the card.
  app.on(["GET", "PUT", "PATCH", "DELETE"], ["/a2a", "/a2a/", "/a2a/:id", "/a2a/:id/"], (c) => {
    const base = c.req.path.replace(/\/$/, "");
    return c.json(
      rpcFailure(null, { code: RPC.INVALID_REQUEST, message: `This is an A2A JSON-RPC endpoint: POST requests to ${c.get("caller").origin}${base}; its Agent Card is at ${c.get("caller").origin}${base}/.well-known/agent-card.json.` }),
      405,
      { Allow: "POST" },
    );
  });
}
