import { OutgoingMessage, type IncomingMessage, type ServerResponse } from "node:http";
import type { Context, Hono } from "hono";
import type { z } from "zod";
import { requestOrigin } from "../lib/config/origin";
import { ParleyError, validationError } from "../lib/errors";
import type { Cancel } from "../lib/realtime/notifier";
import type { Caller, Services } from "../lib/services/context";

export type Env = { Variables: { caller: Caller } };
export type App = Hono<Env>;

/** What the OpenAPI document needs to know about a route; the same schemas validate the requests. */
export interface RouteDoc {
  method: "get" | "post" | "delete";
  path: string;
  summary: string;
  tag: string;
  body?: z.ZodType;
  query?: z.ZodType;
  response?: z.ZodType;
  status?: number;
  owner?: boolean;
  produces?: string;
}
export const routeDocs: RouteDoc[] = [];

/** Registers a route's documentation once (the registry is shared by every app built in a process). */
export function doc(d: RouteDoc): void {
  if (!routeDocs.some((r) => r.method === d.method && r.path === d.path)) routeDocs.push(d);
}

/** Reads the body as JSON and validates it; 400 invalid_json or validation_error naming the field. */
export async function jsonBody<T extends z.ZodType>(c: Context, schema: T): Promise<z.output<T>> {
  const raw = await c.req.text();
  let value: unknown;
  if (raw.trim() === "") value = {};
  else {
    try {
      value = JSON.parse(raw);
    } catch {
      throw new ParleyError("invalid_json", "The request body is not valid JSON. Send a JSON object with Content-Type: application/json.");
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ParleyError("validation_error", "body: must be a JSON object.");
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw validationError(parsed.error, "body");
  return parsed.data;
}

/**
 * The query string validated by `schema`. Pollers send the same query again and again (an idle
 * poll at the head: `since=<head>`), so each schema keeps its last 1,000 valid parses by query
 * string; a kept parse is frozen, since every request with that string shares it.
 */
export function queryOf<T extends z.ZodType>(c: Context, schema: T): z.output<T> {
  const url = c.req.url;
  const q = url.indexOf("?");
  const key = q < 0 ? "" : url.slice(q + 1);
  let parses = PARSES.get(schema);
  if (!parses) PARSES.set(schema, (parses = new Map()));
  const kept = parses.get(key);
  if (kept !== undefined) return kept as z.output<T>;
  const parsed = schema.safeParse(c.req.query());
  if (!parsed.success) throw validationError(parsed.error, "query");
  if (parses.size >= 1_000) parses.clear();
  parses.set(key, typeof parsed.data === "object" && parsed.data !== null ? Object.freeze(parsed.data) : parsed.data);
  return parsed.data;
}
const PARSES = new WeakMap<z.ZodType, Map<string, unknown>>();

export function bearer(c: Context): string | undefined {
  const header = c.req.header("authorization");
  const m = header ? /^Bearer\s+(.+)$/i.exec(header.trim()) : null;
  return m?.[1]?.trim();
}

/** The Node request under a Hono context (undefined outside a Node socket: in-process fetch). */
export const nodeRequest = (c: Context) => (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;

/**
 * The request body as text (UTF-8, a leading BOM dropped, as Request.text() reads it), or
 * undefined when it is larger than `max` bytes (by its Content-Length, or once that many arrived;
 * the rest is not kept). Rejects with ECONNRESET when the client goes away before the end.
 */
export function readBody(req: IncomingMessage, max: number): Promise<string | undefined> {
  const declared = Number(req.headers["content-length"]);
  if (declared > max) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (then: () => void) => {
      if (settled) return;
      settled = true;
      req.off("data", onData);
      then();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) settle(() => resolve(undefined));
      else chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => settle(() => resolve(UTF8.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)))));
    req.once("error", (err) => settle(() => reject(err)));
    req.once("close", () => settle(() => reject(Object.assign(new Error("The client went away before the request body arrived."), { code: "ECONNRESET" }))));
  });
}
const UTF8 = new TextDecoder();

export function socketPeer(c: Context): string {
  return nodeRequest(c)?.socket?.remoteAddress ?? "unknown";
}

/**
 * The client address is the socket peer unless PARLEY_TRUST_PROXY names proxy hops to trust. With
 * fewer X-Forwarded-For entries than trusted hops the request did not come through them all, and
 * every header it carries may be the client's own: the peer is then the only address we know.
 */
export function clientAddress(peer: string, forwardedFor: string | undefined, trustProxy: number): string {
  if (trustProxy <= 0) return peer;
  const forwarded = (forwardedFor ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  // Each trusted hop appended the address it saw; the client is the one the outermost trusted hop saw.
  if (forwarded.length >= trustProxy) return forwarded[forwarded.length - trustProxy]!;
  return peer;
}

// X-Forwarded-For is read only when a proxy is trusted.
const clientIp = (c: Context, trustProxy: number) => (trustProxy > 0 ? clientAddress(socketPeer(c), c.req.header("x-forwarded-for"), trustProxy) : socketPeer(c));

/** The Node response under a Hono context (undefined outside a Node socket: in-process fetch). */
export const nodeResponse = (c: Context) => (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;

/**
 * What a long-poll waits with to hear that its caller went away: the answer's connection closing
 * before the answer was sent. That is when @hono/node-server aborts the request's AbortSignal, and
 * this says the same without one: an AbortController made for a request and the EventTarget
 * listeners on its signal cost about 12 µs of a long-poll's 125 (`--cpu-prof`, the bench's 100
 * long-pollers; 9 µs less server CPU a long-poll in seven A/B pairs). Outside a Node socket, the
 * request's own signal. tests/unit/cancel-of.test.ts holds it to that.
 */
export function cancelOf(c: Context): Cancel {
  const res = nodeResponse(c);
  return res ? new ClosedBeforeAnswer(res) : c.req.raw.signal;
}

class ClosedBeforeAnswer implements Cancel {
  #listeners: Set<() => void> | undefined;

  constructor(private readonly res: ServerResponse) {}

  get aborted(): boolean {
    return this.res.closed && !this.res.writableFinished;
  }

  /** Every listener hears it once (as with `once`), if the connection closes before the answer is sent. */
  addEventListener(_type: "abort", listener: () => void): void {
    if (!this.#listeners) {
      const listeners = (this.#listeners = new Set());
      this.res.once("close", () => {
        if (this.res.writableFinished) return;
        for (const heard of listeners) heard();
      });
    }
    this.#listeners.add(listener);
  }

  removeEventListener(_type: "abort", listener: () => void): void {
    this.#listeners?.delete(listener);
  }
}

/**
 * Makes `res`'s end wait for the end of this turn of the event loop's poll phase, with every other
 * answer ended meanwhile: the answers to the requests of the sockets read in one turn then leave
 * back to back. A client that sleeps until its next answer is woken once for the lot instead of
 * once an answer, and waking a process on the other core is dear: a wake-up round trip across the
 * two cores here takes about 50 µs and 20 µs of each side's CPU (npm run bench, the wake-up
 * ceiling). For quick answers only: one ended later, by a commit or a timer, would wait for a
 * turn of the loop more.
 */
export function endAfterReads(res: ServerResponse): void {
  res.end = endLater as ServerResponse["end"];
}

const ended: [ServerResponse, unknown[]][] = [];

function endLater(this: ServerResponse, ...args: unknown[]): ServerResponse {
  if (ended.length === 0) setImmediate(endNow);
  ended.push([this, args]);
  return this;
}

function endNow(): void {
  for (const [res, args] of ended.splice(0)) {
    try {
      (OUTGOING_END as (...a: unknown[]) => void).apply(res, args);
    } catch (err) {
      // One answer's failure must not keep the others back.
      console.error(err);
    }
  }
}
const OUTGOING_END = OutgoingMessage.prototype.end;

/**
 * Calls `release` once the response has closed, however it ends (sent, aborted, dropped, failed);
 * outside a Node socket, once `done` settles.
 */
export async function holdUntilClosed<T>(c: Context, release: () => void, done: () => Promise<T>): Promise<T> {
  const res = nodeResponse(c);
  if (!res) {
    try {
      return await done();
    } finally {
      release();
    }
  }
  if (res.closed) release();
  else res.once("close", release);
  try {
    return await done();
  } catch (err) {
    release(); // the error answer may be sent on a response that closes later, the hold ends now
    throw err;
  }
}

/** The port the request arrived on (undefined outside a Node socket). */
const localPort = (c: Context) => nodeRequest(c)?.socket?.localPort;

/** A request's caller; its origin is worked out when a route first asks (most never do). */
class RequestCaller implements Caller {
  #origin: string | undefined;

  constructor(
    readonly ip: string,
    private readonly svc: Services,
    private readonly c: Context,
  ) {}

  get origin(): string {
    const { svc, c } = this;
    return (this.#origin ??= requestOrigin(svc.config, { host: new URL(c.req.url).host, forwardedProto: c.req.header("x-forwarded-proto"), localPort: localPort(c) }));
  }
}

export function callerFor(svc: Services, c: Context): Caller {
  return new RequestCaller(clientIp(c, svc.config.trustProxy), svc, c);
}

/** The headers every API answer carries (the pages have their own CSP, server.ts). */
export const API_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
};

export function errorResponse(c: Context, err: ParleyError): Response {
  if (err.extra.retryAfter !== undefined) c.header("Retry-After", String(err.extra.retryAfter));
  return c.json(err.toJSON(), err.status as 400);
}
