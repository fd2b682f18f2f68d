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

// ---------- accessibility (axe-core) ----------

/** The WCAG 2.0 and 2.1 A and AA rules: what every page must pass. */
export const WCAG_AA_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] as const;

/** The widths a page is checked at: a desktop window and a phone held upright. */
export const A11Y_VIEWPORTS = {
  desktop: { width: 1280, height: 900 },
  phone: { width: 390, height: 844 },
} as const;

const AXE_SCRIPT = path.join(ROOT, "node_modules", "axe-core", "axe.min.js");

/** One failed axe rule and the elements that fail it: the part of axe's result a report needs. */
export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; html: string; failureSummary: string }[];
}

/**
 * Runs axe-core's rules of `tags` (by default WCAG 2.0/2.1 A and AA) on the page as it is now and
 * returns the violations. axe is injected with addScriptTag: a script element made by a script,
 * which the pages' CSP ('strict-dynamic') lets run, so the page keeps its real CSP.
 */
export async function axeViolations(page: Page, opts: { tags?: readonly string[] } = {}): Promise<AxeViolation[]> {
  if (!(await page.evaluate(() => "axe" in window))) await page.addScriptTag({ path: AXE_SCRIPT });
  return page.evaluate(async (tags) => {
    type Result = { violations: { id: string; impact?: string | null; help: string; nodes: { target: unknown[]; html: string; failureSummary?: string }[] }[] };
    const axe = (window as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<Result> } }).axe;
    const { violations } = await axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
    return violations.map((v) => ({
      id: v.id,
      impact: v.impact ?? null,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.map(String), html: n.html, failureSummary: n.failureSummary ?? "" })),
    }));
  }, [...(opts.tags ?? WCAG_AA_TAGS)]);
}

/** The colour schemes the page's own stylesheets style: light, and dark when some rule asks for it. */
export async function colorSchemes(page: Page): Promise<("light" | "dark")[]> {
  // No named functions inside: the test runner's transform would wrap them in a helper the page lacks.
  const dark = await page.evaluate(() => {
    const rules: CSSRule[] = [];
    for (const sheet of Array.from(document.styleSheets)) {
      try {
        rules.push(...Array.from(sheet.cssRules));
      } catch {
        /* a cross-origin sheet: not ours */
      }
    }
    while (rules.length > 0) {
      const rule = rules.pop()!;
      if (rule instanceof CSSMediaRule && /prefers-color-scheme:\s*dark/.test(rule.conditionText)) return true;
      if ("cssRules" in rule) rules.push(...Array.from((rule as CSSGroupingRule).cssRules));
    }
    return false;
  });
  return dark ? ["light", "dark"] : ["light"];
}

/** Waits until the page's transitions and finite animations are over: axe reads colours as they are drawn. */
async function settled(page: Page): Promise<void> {
  await page.waitForFunction(() => document.getAnimations().every((a) => a.playState !== "running" || a.effect?.getTiming().iterations === Infinity));
}

/** What one audited page state failed: where (path, state, width, scheme), axe's violations and the page's own problems. */
export interface A11yFinding {
  where: string;
  violations: AxeViolation[];
  problems: string[];
}

/**
 * Checks one page state at each width of `viewports` (default: desktop and phone) and in each
 * colour scheme its CSS has: a fresh page goes to `pathname`, `ready` brings it to the state to
 * check (wait for live data, open a panel, fill a form…), then axe runs. Returns the states that
 * failed, with their violations and any page errors or CSP refusals: `[]` when all pass.
 * `headers`: extra request headers (an admin token, say).
 */
export async function auditPage(
  browser: Browser,
  baseUrl: string,
  pathname: string,
  opts: { state?: string; ready?: (page: Page) => Promise<void>; viewports?: Record<string, { width: number; height: number }>; headers?: Record<string, string> } = {},
): Promise<A11yFinding[]> {
  const findings: A11yFinding[] = [];
  for (const [width, viewport] of Object.entries(opts.viewports ?? A11Y_VIEWPORTS)) {
    const { page, problems } = await openPage(browser, baseUrl, { viewport });
    try {
      if (opts.headers) await page.setExtraHTTPHeaders(opts.headers);
      await page.goto(pathname);
      await opts.ready?.(page);
      for (const scheme of await colorSchemes(page)) {
        await page.emulateMedia({ colorScheme: scheme });
        await settled(page);
        const violations = await axeViolations(page);
        if (violations.length > 0 || problems.length > 0) {
          findings.push({ where: `${pathname}${opts.state ? ` (${opts.state})` : ""} at ${width} ${viewport.width}px, ${scheme}`, violations, problems: [...problems] });
        }
      }
    } finally {
      await page.close();
    }
  }
  return findings;
}

/** Findings as text for a failing assertion: per page state, each rule's id and help, then its nodes (selector, markup, why). */
export function formatFindings(findings: A11yFinding[]): string {
  const nodes = (v: AxeViolation) => v.nodes.map((n) => `    ${n.target.join(" ")}\n      ${n.html.slice(0, 240)}\n      ${n.failureSummary.replace(/\n/g, "\n      ")}`);
  return findings
    .map((f) =>
      [
        `${f.where}:`,
        ...f.violations.flatMap((v) => [`  ${v.id} (${v.impact ?? "?"}): ${v.help} — ${v.nodes.length} node(s)`, ...nodes(v)]),
        ...f.problems.map((p) => `  ${p}`),
      ].join("\n"),
    )
    .join("\n");
}
