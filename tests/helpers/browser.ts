import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import type { Clock } from "../../lib/services/context";
import type { RunningServer } from "../../server";
import { client, startApi } from "./server";

/** Real headless Chromium: $CHROMIUM_PATH, Debian's /usr/bin/chromium, or @sparticuz/chromium. */
export async function launchChromium(): Promise<Browser> {
  const executablePath =
    process.env.CHROMIUM_PATH ||
    (fs.existsSync("/usr/bin/chromium") ? "/usr/bin/chromium" : await (await import("@sparticuz/chromium")).default.executablePath());
  return chromium.launch({
    executablePath,
    headless: true,
    // This machine has no network but loopback: keep Chromium from reaching out at start.
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

const ROOT = path.resolve(import.meta.dirname, "../..");

/** Builds the pages first when there is no build at all (ensure-build also rebuilds stale ones). */
function ensurePages(): void {
  if (fs.existsSync(path.join(ROOT, ".next", "BUILD_ID"))) return;
  const build = spawnSync("npx", ["next", "build"], { cwd: ROOT, stdio: ["ignore", process.stderr, process.stderr] });
  if (build.status !== 0) throw new Error("next build failed");
}

/**
 * A JSON call to the server that must succeed: it throws (failing the test) unless the answer is
 * 2xx, and returns the parsed body. Without a body it is a GET, with one a POST.
 */
export type JsonApi = <T = any>(pathname: string, body?: unknown, opts?: { token?: string; method?: "GET" | "POST" | "DELETE" }) => Promise<T>;

/** A JsonApi for the server at `baseUrl`, on top of tests/helpers/server.ts client(). */
export function jsonApi(baseUrl: string): JsonApi {
  const http = client(baseUrl);
  return async <T = any>(pathname: string, body?: unknown, opts: { token?: string; method?: "GET" | "POST" | "DELETE" } = {}): Promise<T> => {
    const method = opts.method ?? (body === undefined ? "GET" : "POST");
    const headers: Record<string, string> = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
    const res = method === "GET" ? await http.get<T>(pathname, headers) : method === "DELETE" ? await http.del<T>(pathname, headers) : await http.post<T>(pathname, body, headers);
    if (res.status < 200 || res.status > 299) throw new Error(`${method} ${pathname} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body;
  };
}

export interface BrowserFixture {
  /** The pages server, with a fresh data directory. */
  running: RunningServer;
  browser: Browser;
  /** JSON calls to `running` that must answer 2xx. */
  api: JsonApi;
  /** Closes the browser and the server and removes the data directory. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * A real server with the pages (built first if there is no build) on a free port, with a fresh
 * data directory, and a Chromium, for one test file. A plain factory, not a hook registrar: each
 * file calls it from its own before() (with a long timeout: it may build the pages) and calls
 * close() from its after(). Whatever started is stopped again if a later step fails.
 */
export async function startBrowserFixture(opts: { clock?: Clock; env?: Record<string, string> } = {}): Promise<BrowserFixture> {
  ensurePages();
  const server = await startApi(opts.env ?? {}, { pages: true, clock: opts.clock });
  let browser: Browser | undefined;
  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= (async () => {
      try {
        await browser?.close();
      } finally {
        await server.close();
      }
    })());
  try {
    browser = await launchChromium();
  } catch (err) {
    await close();
    throw err;
  }
  return { running: server.server, browser, api: jsonApi(server.url), close };
}

/** Console lines that mean the page broke its own rules: CSP refusals, eval, WebAssembly. */
const PROBLEM_CONSOLE = /Content Security Policy|Refused to|EvalError|WebAssembly/i;

/**
 * A new page (in its own context, so page.context() can go offline alone) whose relative URLs
 * resolve against `baseUrl`. `problems` collects uncaught page errors and CSP violations: tests
 * end with `assert.deepEqual(problems, [])`.
 */
export async function openPage(browser: Browser, baseUrl: string, opts: { viewport?: { width: number; height: number } } = {}): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage({ baseURL: baseUrl, viewport: opts.viewport ?? { width: 1200, height: 900 } });
  const problems: string[] = [];
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("console", (msg) => {
    if (PROBLEM_CONSOLE.test(msg.text())) problems.push(`console: ${msg.text()}`);
  });
  return { page, problems };
}
