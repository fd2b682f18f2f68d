import crypto from "node:crypto";
import http from "node:http";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { getRequestListener } from "@hono/node-server";
import { createApiApp } from "./api/app";
import { arbiterOf } from "./lib/arbiter";
import { ConfigError, loadConfig, type Config } from "./lib/config";
import { originWarning } from "./lib/config/origin";
import { ROOM_PATH, wantsMarkdown } from "./lib/instructions/negotiate";
import { setServices } from "./lib/runtime";
import { createServices } from "./lib/services";
import type { Clock, Services } from "./lib/services/context";
import { roomIsExpired, sweepExpiredRooms } from "./lib/services/rooms";
import { sweepBoards } from "./lib/services/tasks";
import { sweepTurns } from "./lib/services/turns";
import { loadOrCreateServerKey } from "./lib/services/server-key";
import { openSqliteStore } from "./lib/store/sqlite";

const ROOT = path.dirname(fileURLToPath(import.meta.url));
const API_PATHS = /^\/(api(\/|$)|mcp(\/|$)|skill(\/|$)|parley-skill\.tar\.gz$|health$|metrics$|openapi\.json$|docs$|agents\.md$|llms\.txt$|\.well-known\/)/;

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
  close(): Promise<void>;
}

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

/** Makes the page's 200 answer go out with another status (the body is Next's page). */
function answerWithStatus(res: http.ServerResponse, status: number): void {
  const writeHead = res.writeHead.bind(res) as (code: number, ...rest: unknown[]) => http.ServerResponse;
  res.writeHead = ((code: number, ...rest: unknown[]) => writeHead(code === 200 ? status : code, ...rest)) as typeof res.writeHead;
}

/** One process, one port: Hono for the API and agent surface, Next.js for the pages. */
export async function startServer(options: StartOptions = {}): Promise<RunningServer> {
  const config = options.config ?? loadConfig();
  const store = openSqliteStore(config.dataDir);
  const key = loadOrCreateServerKey(config.keyFile, config.keyName);
  const svc = createServices(config, store, key, options.clock);
  setServices(svc);
  const api = getRequestListener(createApiApp(svc).fetch);

  let pages: ((req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>) | undefined;
  if (options.pages !== false) {
    const { default: next } = await import("next");
    const nextApp = next({ dev: false, dir: ROOT, quiet: options.quiet });
    await nextApp.prepare();
    pages = nextApp.getRequestHandler();
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const toApi =
      API_PATHS.test(url.pathname) ||
      (ROOM_PATH.test(url.pathname) && wantsMarkdown(url.searchParams.get("format"), req.headers.accept)) ||
      !pages;
    if (toApi) return void api(req, res);
    const roomPath = ROOM_PATH.exec(url.pathname);
    if (roomPath) {
      res.setHeader("Vary", "Accept");
      // Next.js cannot answer 410 from a page; the watcher's "expired" page gets it here.
      if (roomIsExpired(svc, roomPath[1]!)) answerWithStatus(res, 410);
    }
    const nonce = crypto.randomBytes(16).toString("base64");
    const headers = pageSecurityHeaders(nonce);
    // Next reads the nonce from the request's CSP header and puts it on its own scripts.
    req.headers["content-security-policy"] = headers["Content-Security-Policy"];
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    void pages!(req, res);
  });
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0; // long-polls and SSE streams live longer than the default

  const sweeper = setInterval(() => {
    try {
      sweepExpiredRooms(svc);
      sweepBoards(svc); // task board: lost agents and leases that ran out
      svc.limiter.prune();
    } catch (err) {
      console.error("sweeper:", err);
    }
  }, config.sweepIntervalMs);
  sweeper.unref();
  // Turn timeouts are seconds apart, so their timer is finer (an indexed query for due turns).
  const turnTimer = setInterval(() => {
    try {
      sweepTurns(svc);
    } catch (err) {
      console.error("turn timer:", err);
    }
  }, config.turnSweepIntervalMs);
  turnTimer.unref();
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
    async close() {
      clearInterval(sweeper);
      clearInterval(turnTimer);
      await arbiter.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      store.close();
    },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  try {
    const running = await startServer();
    console.log(`Parley listening on ${running.svc.config.publicUrl ?? running.url} (data in ${running.svc.config.dataDir})`);
    const originNote = originWarning(running.svc.config);
    if (originNote) console.warn(originNote);
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
