import crypto from "node:crypto";
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Duplex } from "node:stream";
import { getRequestListener, RequestError } from "@hono/node-server";
import { createApiApp } from "./api/app";
import { API_SECURITY_HEADERS, clientAddress } from "./api/http";
import { arbiterOf } from "./lib/arbiter";
import { ConfigError, loadConfig, type Config } from "./lib/config";
import { originWarning } from "./lib/config/origin";
import { ROOM_PATH, wantsMarkdown } from "./lib/instructions/negotiate";
import { ParleyError, type ErrorCode } from "./lib/errors";
import { StallWatch } from "./lib/realtime/stalls";
import { setServices } from "./lib/runtime";
import { createServices, limitRequest } from "./lib/services";
import type { Clock, Services } from "./lib/services/context";
import { roomIsExpired } from "./lib/services/access";
import { sweepExpiredRooms } from "./lib/services/rooms";
import { sweepBoards } from "./lib/services/tasks";
import { sweepTurns } from "./lib/services/turns";
import { loadOrCreateServerKey } from "./lib/services/server-key";
import { openPgStore } from "./lib/store/pg";
import { openSqliteStore } from "./lib/store/sqlite";
import { PROJECT_ROOT } from "./lib/paths";
import { listenForCommits } from "./lib/realtime/pg-listen";
import { webhookAppendHook } from "./lib/webhooks/outbox";
import { deliverDue, pruneDeliveries, sweepNearExpiry } from "./lib/webhooks/worker";
import * as pageContexts from "./lib/page-contexts";

const API_PATHS = /^\/(api(\/|$)|admin(\/|$)|mcp(\/|$)|a2a(\/|$)|skill(\/|$)|parley-skill\.tar\.gz$|health$|metrics$|openapi\.json$|docs$|agents\.md$|llms\.txt$|\.well-known\/)/;

export interface StartOptions {
  config?: Config;
  /** Serve the Next.js pages too (needs a build); API-only when false. */
  pages?: boolean;
  clock?: Clock;
  quiet?: boolean;
}

export interface RunningServer {
  url: string;
  port: number;
  svc: Services;
  server: http.Server;
  /** Streamed responses whose client stopped reading are dropped here (PARLEY_STALLED_STREAM_TIMEOUT). */
  stalls: StallWatch;
  close(): Promise<void>;
}

/** Read by app/_lib/context.ts: the page's client address, set here for every page request. */
const CLIENT_IP_HEADER = "x-parley-client-ip";
/** Next's content-hashed build assets: a page load fetches several, they take no request budget. */
const STATIC_ASSETS = /^\/_next\/static\//;

function pageSecurityHeaders(nonce: string): Record<string, string> {
  return {
    "Content-Security-Policy": [
      "default-src 'self'",
      `script-src 'self' 'nonce-${nonce}' 'strict-dynamic'`,
      "style-src 'self' 'unsafe-inline'",
      "img-src 'self' data:",
      "connect-src 'self'",
      "font-src 'self'",
      "object-src 'none'",
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ].join("; "),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
  };
}

/** An error answer as the API gives it: {detail, code} with the API's security headers. */
function errorBody(code: ErrorCode, detail: string): { body: string; headers: Record<string, string | number> } {
  const body = JSON.stringify({ detail, code });
  return { body, headers: { ...API_SECURITY_HEADERS, "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), Connection: "close" } };
}

function answerError(res: http.ServerResponse, status: number, code: ErrorCode, detail: string): void {
  const { body, headers } = errorBody(code, detail);
  res.writeHead(status, headers);
  res.end(body);
}

/**
 * Errors node's HTTP layer meets before a request reaches us (malformed request, headers too
 * large, headers or body not in within PARLEY_REQUEST_READ_TIMEOUT): answered as every other
 * error, when nothing of a response was written yet, and the connection closed.
 */
function onClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const res = (socket as { _httpMessage?: http.ServerResponse })._httpMessage;
  if (socket.writable && !res?.headersSent && err.code !== "ECONNRESET") {
    const [status, code, detail]: [number, ErrorCode, string] =
      err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? [408, "request_timeout", "The request's headers and body did not arrive in time. Send the whole request at once."]
        : err.code === "HPE_HEADER_OVERFLOW"
          ? [431, "headers_too_large", "The request headers are too large. Send fewer or shorter headers."]
          : [400, "bad_request", "The request is not valid HTTP/1.1."];
    const { body, headers } = errorBody(code, detail);
    const head = [`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
    socket.write(`${head.join("\r\n")}\r\n\r\n${body}`);
  }
  socket.destroy();
}

/** A Host header the URL parser keeps as it is: a name or address and a port, nothing else. */
function validHost(host: string): boolean {
  try {
    const parsed = new URL(`http://${host}`).host;
    const lower = host.toLowerCase();
    return parsed === lower || parsed === lower.replace(/:80$/, "");
  } catch {
    return false;
  }
}

/** Hosts already found valid: a server sees a handful, and parsing one as a URL on every request costs. */
const validHosts = new Set<string>();
function knownValidHost(host: string): boolean {
  if (validHosts.has(host)) return true;
  if (!validHost(host)) return false;
  if (validHosts.size >= 256) validHosts.clear();
  validHosts.add(host);
  return true;
}

/** A request target's path, and its query string without the "?". */
interface Target {
  pathname: string;
  query: string;
}

/**
 * An origin-form target the URL parser would keep as it is: segments of plain characters, none of
 * them "." or "..", then an optional query. Most requests are this, and skip the parser.
 */
const PLAIN_TARGET = /^(?:\/(?!\.\.?(?:[/?]|$))[\w.~:@!$&'()*+,;=-]*)+(?:\?[^#\s]*)?$/;

/** The path of a request target (origin form, or absolute form through a proxy); undefined when it is neither. */
function targetPath(target: string): Target | undefined {
  if (PLAIN_TARGET.test(target)) {
    const q = target.indexOf("?");
    return q < 0 ? { pathname: target, query: "" } : { pathname: target.slice(0, q), query: target.slice(q + 1) };
  }
  try {
    // Appended to a fixed origin, not resolved against it: "//x:99999/" is a path here, as in Hono.
    const url = target.startsWith("/") ? new URL(`http://localhost${target}`) : new URL(target);
    return url.protocol === "http:" || url.protocol === "https:" ? { pathname: url.pathname, query: url.search.slice(1) } : undefined;
  } catch {
    return undefined;
  }
}

/** 429 for a page: a short HTML page (a person reads it) with Retry-After. */
function answerPageLimited(res: http.ServerResponse, err: ParleyError): void {
  const escaped = err.detail.replace(/[&<>"]/g, (ch) => `&#${ch.charCodeAt(0)};`);
  const body = `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Too many requests</title></head><body><h1>Too many requests</h1><p>${escaped}</p></body></html>\n`;
  res.writeHead(429, {
    ...pageSecurityHeaders(crypto.randomBytes(16).toString("base64")),
    "Content-Type": "text/html; charset=utf-8",
    "Content-Length": Buffer.byteLength(body),
    "Cache-Control": "no-store",
    "Retry-After": String(err.extra.retryAfter ?? 60),
  });
  res.end(body);
}

/** Makes the page's 200 answer go out with another status (the body is Next's page). */
function answerWithStatus(res: http.ServerResponse, status: number): void {
  const writeHead = res.writeHead.bind(res) as (code: number, ...rest: unknown[]) => http.ServerResponse;
  res.writeHead = ((code: number, ...rest: unknown[]) => writeHead(code === 200 ? status : code, ...rest)) as typeof res.writeHead;
}

/**
 * Background work on a timer: one run at a time in this process and, while it holds the job's lease,
 * on one instance of the fleet (a crashed holder's lease runs out after three intervals and another
 * instance takes over). Each piece of work is also safe to run twice: it re-checks under the room's
 * lock, so a lease that changes hands mid-run costs a wasted query, never a double event.
 */
function every(svc: Services, name: string, intervalMs: number, work: () => Promise<unknown>): () => Promise<void> {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (running) return;
    running = (async () => {
      if (!(await svc.store.jobs.leaseJob(name, svc.instanceId, intervalMs * 3, Date.now()))) return;
      await work();
    })()
      .catch((err: unknown) => console.error(`${name}:`, err instanceof ParleyError ? err.detail : err))
      .finally(() => (running = undefined));
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}

/** One process, one port: Hono for the API and agent surface, Next.js for the pages. */
export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const config = options.config ?? loadConfig();
  const pgStore = config.databaseUrl ? await openPgStore(config.databaseUrl, { maxConnections: config.dbPoolSize }) : undefined;
  const store = pgStore ?? openSqliteStore(config.dataDir);
  const key = loadOrCreateServerKey(config.keyFile, config.keyName, config.keySeedHex);
  const svc = createServices(config, store, key, options.clock);
  // The webhook outbox: every append writes its deliveries in its own transaction.
  svc.appendHooks.push(webhookAppendHook(svc));
  setServices(svc);
  // Other instances' commits wake this one's readers (PostgreSQL only: SQLite is one process).
  const commits = pgStore
    ? await listenForCommits(pgStore.url, pgStore.origin, svc.notifier, async (room) => (await svc.store.getRoom(room))?.headSize, options.quiet ? () => {} : undefined)
    : undefined;
  const api = getRequestListener(createApiApp(svc).fetch, {
    // HTTP/1.0 may come without a Host (HTTP/1.1 without one is answered below).
    hostname: "localhost",
    // A request Hono cannot make a URL of (an odd Host or target): the API's answer, not a bare 400.
    errorHandler: (err) => {
      const bad = err instanceof RequestError;
      if (!bad) console.error(err);
      const { body, headers } = bad
        ? errorBody("bad_request", "The request's Host header or target is not valid. Send Host: <name>[:port] and a path starting with /.")
        : errorBody("internal_error", "Something went wrong on the server; try again later.");
      return new Response(body, { status: bad ? 400 : 500, headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, String(v)])) });
    },
  });

  let pages: ((req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>) | undefined;
  if (options.pages !== false) {
    // Before Next.js loads: its AsyncLocalStorage instances are then tracked (lib/page-contexts.ts).
    pageContexts.install();
    const { default: next } = await import("next");
    const nextApp = next({ dev: false, dir: PROJECT_ROOT, quiet: options.quiet });
    await nextApp.prepare();
    pages = nextApp.getRequestHandler();
  }

  const readTimeout = config.requestReadTimeoutMs;
  const stalls = new StallWatch(config.stalledStreamTimeoutMs);
  const server = http.createServer(
    {
      // Headers and body must be in within the read timeout (408 and closed otherwise). Node stops
      // counting once the request is received: long-polls and SSE streams answer for as long as
      // they like. Expired requests are found on a sweep of the connections, every quarter of it.
      headersTimeout: readTimeout,
      requestTimeout: readTimeout,
      connectionsCheckingInterval: Math.min(5_000, Math.max(100, Math.round(readTimeout / 4))),
      // A missing Host gets the API's JSON answer below rather than node's bare 400.
      requireHostHeader: false,
    },
    (req, res) => {
      stalls.watch(res);
      const host = req.headers.host;
      if (host === undefined ? req.httpVersionMajor === 1 && req.httpVersionMinor >= 1 : !knownValidHost(host)) {
        return answerError(res, 400, "bad_request", "The request's Host header is missing or not valid. Send Host: <name>[:port].");
      }
      const url = targetPath(req.url ?? "/");
      if (!url) return answerError(res, 400, "bad_request", "The request target is not a valid path. Send a path starting with /.");
      const toApi =
        API_PATHS.test(url.pathname) ||
        (ROOM_PATH.test(url.pathname) && wantsMarkdown(new URLSearchParams(url.query).get("format"), req.headers.accept)) ||
        !pages;
      if (toApi) {
        // Set on the Node response, where they cost nothing per answer (a route's own, e.g. the
        // docs page's CSP, replace them); see api/app.ts.
        for (const name in API_SECURITY_HEADERS) res.setHeader(name, API_SECURITY_HEADERS[name]!);
        return void api(req, res);
      }
      servePage(req, res, url).catch((err: unknown) => {
        console.error("page:", err);
        if (!res.headersSent) answerError(res, 500, "internal_error", "Something went wrong on the server; try again later.");
      });
    },
  );
  server.on("clientError", onClientError);
  server.keepAliveTimeout = 65_000;

  /** A page: the general request budget of its client, then Next.js with the pages' headers. */
  async function servePage(req: http.IncomingMessage, res: http.ServerResponse, url: Target): Promise<void> {
    const ip = clientAddress(req.socket.remoteAddress ?? "unknown", [req.headers["x-forwarded-for"] ?? []].flat().join(","), config.trustProxy);
    if (!STATIC_ASSETS.test(url.pathname)) {
      try {
        await limitRequest(svc, ip);
      } catch (err) {
        if (err instanceof ParleyError && err.code === "rate_limited") return answerPageLimited(res, err);
        if (err instanceof ParleyError) return answerError(res, err.status, err.code, err.detail);
        throw err;
      }
    }
    req.headers[CLIENT_IP_HEADER] = ip;
    const roomPath = ROOM_PATH.exec(url.pathname);
    if (roomPath) {
      res.setHeader("Vary", "Accept");
      // Next.js cannot answer 410 from a page; the watcher's "expired" page gets it here.
      if (await roomIsExpired(svc, roomPath[1]!).catch(() => false)) answerWithStatus(res, 410);
    }
    const nonce = crypto.randomBytes(16).toString("base64");
    const headers = pageSecurityHeaders(nonce);
    // Next reads the nonce from the request's CSP header and puts it on its own scripts.
    req.headers["content-security-policy"] = headers["Content-Security-Policy"];
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    pageContexts.answeringPage(res);
    void pages!(req, res);
  }

  const stopSweeper = every(svc, "sweeper", config.sweepIntervalMs, async () => {
    await sweepExpiredRooms(svc);
    await sweepBoards(svc); // task board: lost agents and leases that ran out
    await sweepNearExpiry(svc); // owners' alerts webhooks: rooms about to expire
    await pruneDeliveries(svc);
    await svc.limiter.prune();
  });
  // Webhook deliveries: due rows are claimed with a lease, so a run that outlives this job's lease
  // on another instance still sends each delivery once; a restart resumes whatever was pending.
  const stopWebhooks = every(svc, "webhooks", config.webhooks.intervalMs, () => deliverDue(svc));
  // Turn timeouts are seconds apart, so their timer is finer (an indexed query for due turns).
  const stopTurnTimer = every(svc, "turn-timer", config.turnSweepIntervalMs, () => sweepTurns(svc));
  // Premium rooms extract in the background (SPEC 5.3).
  const arbiter = arbiterOf(svc);
  arbiter.start();

  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
  const port = (server.address() as { port: number }).port;
  const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  return {
    url: `http://${host}:${port}`,
    port,
    svc,
    server,
    stalls,
    async close() {
      await Promise.all([stopSweeper(), stopTurnTimer(), stopWebhooks()]);
      stalls.stop();
      await arbiter.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await commits?.close();
      await store.close();
      key.close();
    },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  try {
    const running = await startServer();
    const { config } = running.svc;
    const data = config.databaseUrl ? `PostgreSQL at ${new URL(config.databaseUrl).host}` : `data in ${config.dataDir}`;
    console.log(`Parley listening on ${config.publicUrl ?? running.url} (${data})`);
    const originNote = originWarning(running.svc.config);
    if (originNote) console.warn(originNote);
    if (config.webhooks.allowPrivate) {
      console.warn("PARLEY_WEBHOOK_ALLOW_PRIVATE=1: webhooks may be delivered to loopback and private addresses. Use it for tests and local development only.");
    }
    const stop = () => void running.close().then(() => process.exit(0));
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
}
