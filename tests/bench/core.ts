/**
 * The core figures of one backend (SQLite, or PostgreSQL with PARLEY_DATABASE_URL), on one server
 * child with the pages, as production runs it: the HTTP loads (autocannon, then wrk, each between
 * two readings of the server's histogram), delivery to 1,000 SSE watchers and 100 long-pollers (read
 * by a separate client process), the watcher page and its trivial-page ceiling, verification
 * online, offline and in Chromium, resident memory, and the in-process append limit.
 */
import { fork } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { signAgentWrite } from "../../lib/log/event";
import { serverKeyFromSeed } from "../../lib/services/server-key";
import { postMessage } from "../../lib/services/messages";
import { createRoom } from "../../lib/services/rooms";
import { launchChromium } from "../helpers/browser";
import { inProcessPgServices, inProcessServices, rssMb, startServerChild, type ServerChild } from "./common";
import { forkClient } from "./ipc";
import { countFromEnv, DURATION, describe, inPair, measure, median, medianRatio, num, rateText, WARMUP, type LoadResult, type Req } from "./load";

export type Report = (name: string, value: string) => void;
export type Backend = "sqlite" | "postgres";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const clock = () => performance.timeOrigin + performance.now();

export async function json(base: string, method: string, url: string, body?: unknown): Promise<any> {
  const res = await fetch(base + url, { method, headers: { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

export const newRoom = async (base: string, body: unknown = {}) => (await json(base, "POST", "/api/rooms", body)).uuid as string;
export const headOf = async (base: string, room: string) => (await json(base, "GET", `/api/rooms/${room}`)).head.size as number;

const POST_ROUTE = "POST /api/rooms/:id/messages";
const READ_ROUTE = "GET /api/rooms/:id/messages";

/**
 * The author of the `i`th post cycling over `rooms` rooms: each room hears its seven agents in turn,
 * so the loop guard (on, as by default) never finds a streak or a pair alone.
 */
const author = (i: number, rooms: number) => Math.floor(i / rooms) % 7;

/** Message posts cycling over `rooms` (plain JSON, no signature). */
export function postRequests(rooms: string[], count = 5_000, text = (i: number) => `benchmark message ${i} with a little text in it`): Req[] {
  return Array.from({ length: count }, (_, i) => ({ method: "POST", path: `/api/rooms/${rooms[i % rooms.length]}/messages`, body: JSON.stringify({ agent_id: `agent-${author(i, rooms.length)}`, text: text(i) }) }));
}

/**
 * Posts `count` messages into `room` through autocannon (64 connections): how the bench fills a
 * room quickly, not a figure. Throws unless every one was accepted.
 */
export async function fillRoom(base: string, room: string, count: number, text?: (i: number) => string): Promise<void> {
  if (count <= 0) return;
  const r = await measure({ base, connections: Math.min(64, count), amount: count, requests: postRequests([room], Math.min(count, 5_000), text), noWrk: true });
  if (r.ac.errors) throw new Error(`filling a room: ${r.ac.errors} of ${count} posts failed`);
}

/** Pre-signed message bodies (one key per agent, fresh nonces), so the load generators do no crypto. */
export function signedRequests(rooms: string[], count: number, from = 0): Req[] {
  const keys = Array.from({ length: 7 }, (_, i) => serverKeyFromSeed(crypto.createHash("sha256").update(`bench-agent-${i}`).digest(), "agent"));
  return Array.from({ length: count }, (_, k) => {
    const i = from + k;
    const room = rooms[i % rooms.length]!;
    const agent = author(i, rooms.length);
    const text = `signed benchmark message ${i}`;
    const sig = signAgentWrite(keys[agent]!, { room, type: "message.posted", actor: `signer-${agent}`, payload: { text }, ts: new Date().toISOString(), nonce: crypto.randomBytes(12).toString("hex") });
    return { method: "POST" as const, path: `/api/rooms/${room}/messages`, body: JSON.stringify({ agent_id: `signer-${agent}`, text, sig }) };
  });
}

type LocalServices = { svc: ReturnType<typeof inProcessServices>["svc"]; close(): Promise<void> };

/**
 * The same append path (validation, transaction, hash, frontier, checkpoint signature) without
 * HTTP, `inFlight` posts outstanding over 50 rooms for `seconds`: the local limit the POST row is
 * compared with. A fresh store each time (a fresh database on PostgreSQL). Warmed up first, as
 * every HTTP load is: the bench process has not run this path before, and its first second is
 * spent half compiling.
 */
export async function inProcessAppendRate(inFlight: number, open: () => Promise<LocalServices>, seconds = DURATION): Promise<number> {
  const local = await open();
  try {
    const { svc } = local;
    const caller = { ip: "local", origin: "http://localhost" };
    const rooms: string[] = [];
    for (let i = 0; i < 50; i++) rooms.push((await createRoom(svc, caller, { description: "", is_public: false, protocol_mode: "standard", mode: "open" })).uuid);
    let next = 0;
    const appendsPerSecond = async (during: number) => {
      let done = 0;
      const t0 = performance.now();
      const end = t0 + during * 1000;
      const worker = async () => {
        while (performance.now() < end) {
          const i = next++;
          await postMessage(svc, caller, rooms[i % 50]!, { agent_id: `agent-${author(i, 50)}`, text: `benchmark message ${i} with a little text in it` });
          done++;
        }
      };
      await Promise.all(Array.from({ length: inFlight }, worker));
      return done / ((performance.now() - t0) / 1000);
    };
    if (WARMUP > 0) await appendsPerSecond(WARMUP);
    return await appendsPerSecond(seconds);
  } finally {
    await local.close();
  }
}

export interface Delivery {
  p50: number;
  p99: number;
  delivered: number;
  expected: number;
  /** Expected deliveries that never arrived (a reader × round pair not seen). */
  lost: number;
}

export const fmtDelivery = (d: Delivery) => `p50 ${d.p50.toFixed(1)} ms, p99 ${d.p99.toFixed(1)} ms (${num(d.delivered)}/${num(d.expected)} delivered, ${d.lost} lost)`;

function nearestRank(sorted: number[], q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]! : NaN;
}

function deliveryOf(arrivals: [number, number, number][], sentAt: number[], readers: number): Delivery {
  const seen = new Set<number>();
  const xs: number[] = [];
  for (const [reader, round, at] of arrivals) {
    if (sentAt[round] === undefined) continue;
    const key = reader * 100_000 + round;
    if (seen.has(key)) continue; // a long-poll page may repeat nothing, but be safe
    seen.add(key);
    xs.push(at - sentAt[round]!);
  }
  xs.sort((a, b) => a - b);
  const expected = readers * sentAt.length;
  return { p50: nearestRank(xs, 0.5), p99: nearestRank(xs, 0.99), delivered: xs.length, expected, lost: expected - xs.length };
}

/**
 * `sse` SSE watchers and `pollers` long-pollers on one room of `watchBase`, read by a client process
 * of their own; `rounds` posts on `postBase`, one every `gapMs`, after DELIVERY_WARMUP_ROUNDS unmeasured ones. Delivery time: from just before a
 * post is sent (this process) to the message arriving at a reader (the client process), on the
 * same machine clock. `whenOpen` runs once every stream is open (the resident-memory reading).
 */
const DELIVERY_WARMUP_ROUNDS = 30;

export async function delivery(opts: { postBase: string; watchBase: string; sse: number; pollers: number; rounds?: number; gapMs?: number; whenOpen?: () => void }): Promise<{ sse: Delivery; polls: Delivery }> {
  const rounds = opts.rounds ?? 30;
  const room = await newRoom(opts.postBase);
  const since = await headOf(opts.postBase, room);
  const child = forkClient(path.join(import.meta.dirname, "delivery-client.ts"));
  const messages: any[] = [];
  let wake = () => {};
  child.on("message", (m) => {
    messages.push(m);
    wake();
  });
  const next = async () => {
    while (messages.length === 0) {
      if (child.exitCode !== null) throw new Error("the delivery client exited");
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, 1000);
      });
    }
    const m = messages.shift();
    if (m.error) throw new Error(`delivery client: ${m.error}`);
    return m;
  };
  try {
    child.send({ base: opts.watchBase, room, sse: opts.sse, pollers: opts.pollers, since });
    await next(); // ready
    opts.whenOpen?.();
    // Unmeasured rounds first, as every HTTP load here warms up first: the first two posts to
    // 1,000 freshly opened streams take two to four times a later one (fresh sockets, and the
    // reader's and the writer's code not yet compiled). As many as are measured: after 3, the
    // server's V8 still made about 120 optimised compilations (--trace-opt) in the 30 measured
    // rounds of the long-polls, on the threads that share the two cores with it and the readers,
    // and the measured long-polls' p50 and p99 were 1.4-1.8 times those on a server warmed by 30
    // (about 20 compilations left). The readers only count "delivery N".
    for (let i = 0; i < DELIVERY_WARMUP_ROUNDS; i++) {
      await json(opts.postBase, "POST", `/api/rooms/${room}/messages`, { agent_id: `speaker-${i % 3}`, text: `warm-up ${i}` });
      await sleep(opts.gapMs ?? 150);
    }
    const sentAt: number[] = [];
    for (let i = 0; i < rounds; i++) {
      sentAt[i] = clock();
      await json(opts.postBase, "POST", `/api/rooms/${room}/messages`, { agent_id: `speaker-${i % 3}`, text: `delivery ${i}` });
      await sleep(opts.gapMs ?? 150);
    }
    child.send({ stop: true, rounds });
    const result = (await next()) as { sse: [number, number, number][]; polls: [number, number, number][] };
    return { sse: deliveryOf(result.sse, sentAt, opts.sse), polls: deliveryOf(result.polls, sentAt, opts.pollers) };
  } finally {
    if (child.exitCode === null) child.kill();
  }
}

/** Samples a process's resident memory every 50 ms while `fn` runs; the peak, in MB. */
export async function peakRss<T>(pid: number, fn: () => Promise<T>): Promise<{ value: T; peakMb: number }> {
  let peak = rssMb(pid);
  const timer = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 50);
  try {
    const value = await fn();
    return { value, peakMb: Math.max(peak, rssMb(pid)) };
  } finally {
    clearInterval(timer);
  }
}

export interface VerifyFigure {
  /** Online: the median of three runs, with the first (`firstMs`: the verifier's code not compiled yet). */
  ms: number;
  firstMs?: number;
  verdict: string;
  /** Peak resident memory: the server's during an online verification, the verifier's offline. */
  rssMb: number;
  events: number;
}
/** The time of a verification, with the first run beside the median when it ran three times. */
export const verifyTime = (v: VerifyFigure) => `${num(v.ms)} ms${v.firstMs === undefined ? "" : ` (median of 3; first ${num(v.firstMs)} ms)`}`;
export const fmtVerify = (v: VerifyFigure) => `${verifyTime(v)}, ${v.verdict}, ${num(v.events)} events, peak RSS ${num(v.rssMb)} MB`;

/** POST /verify on the server, three times, as the Chromium figure (the median time, the verdicts, the server's peak memory meanwhile). */
export async function verifyOnline(server: ServerChild, room: string): Promise<VerifyFigure> {
  const events = await headOf(server.base, room);
  const runs: { ms: number; verdict: string; peakMb: number }[] = [];
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    const { value, peakMb } = await peakRss(server.child.pid!, () => json(server.base, "POST", `/api/rooms/${room}/verify`, {}));
    runs.push({ ms: performance.now() - t0, verdict: value.verdict as string, peakMb });
  }
  return { ms: median(runs.map((r) => r.ms)), firstMs: runs[0]!.ms, verdict: verdictsOf(runs), rssMb: Math.max(...runs.map((r) => r.peakMb)), events };
}

/** The verdicts of several runs of one verification: one when they agree, else each, joined by "/". */
const verdictsOf = (runs: { verdict: string }[]) => [...new Set(runs.map((r) => r.verdict))].join("/");

/** One run of `parley verify`'s code on a saved bundle, in a fresh process (tests/bench/verify-offline.ts). */
async function verifyOfflineOnce(file: string): Promise<{ events: number; verifyMs: number; verdict: string; maxRssMb: number }> {
  const child = fork(path.join(import.meta.dirname, "verify-offline.ts"), [file], { execArgv: ["--import", "tsx"], stdio: ["ignore", "pipe", "inherit", "ipc"] });
  let stdout = "";
  child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  const code = await new Promise<number | null>((r) => child.on("exit", r));
  if (code !== 0) throw new Error(`verify-offline exited ${code}: ${stdout}`);
  return JSON.parse(stdout.trim().split("\n").at(-1)!);
}

/**
 * The room's export saved to a file, verified by `parley verify`'s code in a process of its own,
 * three times, each in a fresh process as a user runs it: the median time, the first beside it, and
 * the highest peak memory. One run was a single sample of a machine that slows by half for tens of
 * seconds at a time (docs/BENCHMARKS.md, thirty-second round).
 */
export async function verifyOffline(base: string, room: string): Promise<VerifyFigure> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-bench-bundle-"));
  const file = path.join(dir, "bundle.json");
  try {
    const res = await fetch(`${base}/api/rooms/${room}/export`);
    if (!res.ok || !res.body) throw new Error(`export answered ${res.status}`);
    const out = fs.createWriteStream(file);
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) if (!out.write(chunk)) await new Promise<void>((r) => out.once("drain", () => r()));
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await verifyOfflineOnce(file));
    return { ms: median(runs.map((r) => r.verifyMs)), firstMs: runs[0]!.verifyMs, verdict: verdictsOf(runs), rssMb: Math.max(...runs.map((r) => r.maxRssMb)), events: runs[0]!.events };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The watcher page's integrity panel verifies the room in the browser (a click: 10,000 events is over its automatic size) and reports its time; median of 3. */
export async function browserVerify(base: string, room: string): Promise<{ ms: number; verdict: string; impl: string }> {
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const times: number[] = [];
    let verdict = "";
    let impl = "";
    for (let i = 0; i < 3; i++) {
      await page.goto(`${base}/${room}`);
      // Rooms over the panel's automatic size wait for the watcher's click.
      await page.locator("#integrity .integrity-run").click();
      await page.waitForSelector("#integrity[data-verify-ms]", { timeout: 120_000 });
      const panel = page.locator("#integrity");
      times.push(Number(await panel.getAttribute("data-verify-ms")));
      verdict = (await panel.getAttribute("data-verdict")) ?? "";
      impl = (await panel.getAttribute("data-ed25519")) ?? "";
    }
    times.sort((a, b) => a - b);
    return { ms: times[1]!, verdict, impl };
  } finally {
    await browser.close();
  }
}

/** The rate figures, each measured between two runs of the trivial Hono ceiling (`beside`). */
export type RateFigure = "trivialRoute" | "idle" | "page" | "post" | "signed";

/** What one backend measured; a part not run stays undefined. */
export interface CoreFigures {
  trivialRoute?: LoadResult;
  /** The trivial Hono route measured just before and just after each rate figure. */
  beside?: Partial<Record<RateFigure, [before: LoadResult, after: LoadResult]>>;
  rssIdle?: number;
  rssSse?: number;
  /** The server's RSS just before the streams opened (after the loads before them). */
  rssBeforeSse?: number;
  post?: LoadResult;
  signed?: LoadResult;
  idle?: LoadResult;
  page?: LoadResult;
  watcher?: LoadResult;
  home?: LoadResult;
  sse?: Delivery;
  polls?: Delivery;
  oneWatcher?: Delivery;
  crossInstance?: Delivery;
  verify10kOnline?: VerifyFigure;
  verify10kOffline?: VerifyFigure;
  chromium10k?: { ms: number; verdict: string; impl: string };
  /** The HTTP POST load and the in-process append limit measured just before it: POST_PAIRS pairs. */
  postPairs?: [post: LoadResult, local: number][];
  /** The watcher page and the trivial Next page, back to back: PAGE_PAIRS pairs (the first is `watcher` and `home`). */
  watcherPairs?: [watcher: LoadResult, home: LoadResult][];
}

/** Pairs of the in-process append limit and the HTTP POST load (BENCH_POST_PAIRS). */
const POST_PAIRS = countFromEnv("BENCH_POST_PAIRS", 3);
/** Pairs of the watcher page's load and the trivial Next page's (BENCH_PAGE_PAIRS). */
const PAGE_PAIRS = countFromEnv("BENCH_PAGE_PAIRS", 3);

function logLoad(report: Report, name: string, r: LoadResult): void {
  const [first, ...rest] = describe(r);
  report(name, first!);
  for (const line of rest) report("", line);
}

/**
 * The core figures on one server child with the pages. `env` picks the backend (PostgreSQL: its
 * PARLEY_DATABASE_URL and a PARLEY_KEY shared with `secondInstance`, started API-only on the same
 * database for the cross-instance delivery). `wants` says which parts run.
 */
export async function coreFigures(opts: {
  backend: Backend;
  env: Record<string, string>;
  wants: (part: string) => boolean;
  report: Report;
  localServices: () => Promise<LocalServices>;
  secondInstance?: boolean;
  /** Measures the trivial Hono ceiling now: run before and after each rate figure. */
  ceiling?: () => Promise<LoadResult>;
}): Promise<CoreFigures> {
  const { wants, report, env } = opts;
  const label = opts.backend === "sqlite" ? "SQLite" : "PostgreSQL";
  const f: CoreFigures = {};
  const server = await startServerChild({ prefix: `parley-bench-${opts.backend}-`, env });
  const { base } = server;
  const pid = server.child.pid!;
  try {
    await sleep(1000);
    f.rssIdle = rssMb(server.child.pid!);
    report(`${label}: RSS idle (after start)`, `${num(f.rssIdle)} MB`);

    const rooms: string[] = [];
    for (let i = 0; i < 50; i++) rooms.push(await newRoom(base));
    // A page first, as a server in use has served: Next.js renders inside AsyncLocalStorage, whose
    // async hooks (Node 20) slow every promise of the process until lib/page-contexts.ts turns
    // them off again. Without it, the rates were those of a server nobody had opened a page on
    // (docs/BENCHMARKS.md, ninth round).
    const home = await fetch(`${base}/`, { headers: { accept: "text/html" } });
    await home.text();
    if (!home.ok) throw new Error(`GET / answered ${home.status}`);

    // The ceiling beside each rate figure, just before and just after it: on these shared machines
    // the ceiling has moved 2× within minutes, so a ratio to one measured at the start of the run
    // says as much about the drift as about the server.
    let before = opts.ceiling && (await opts.ceiling());
    const rate = async (key: RateFigure, name: string, load: () => Promise<LoadResult>) => {
      const r = await load();
      logLoad(report, name, r);
      if (opts.ceiling && before) {
        const after = await opts.ceiling();
        (f.beside ??= {})[key] = [before, after];
        report("  the trivial Hono ceiling just before and after it", `${rateText(before)} · then ${rateText(after)}`);
        before = after;
      }
      return r;
    };

    if (wants("ceiling")) {
      // The server's own floor: a route that does nothing (the server key), through everything in
      // front of the routes (server.ts, the adapter, the middleware).
      f.trivialRoute = await rate("trivialRoute", `${label}: GET /api/server-key (a route that does nothing), 64 connections`, () =>
        measure({ base, pid, connections: 64, requests: [{ method: "GET", path: "/api/server-key" }], route: "GET /api/server-key" }),
      );
    }

    // The read loads before the write loads: what the posts leave behind (PostgreSQL's checkpoint
    // and autovacuum of what they wrote) would share the two cores with the reads.
    if (wants("idle")) {
      const quiet = await newRoom(base);
      const last = (await json(base, "POST", `/api/rooms/${quiet}/messages`, { agent_id: "a", text: "only" })).id as number;
      f.idle = await rate("idle", `${label}: Idle poll (since = last), 64 connections`, () =>
        measure({ base, pid, connections: 64, requests: [{ method: "GET", path: `/api/rooms/${quiet}/messages?since=${last}` }], route: READ_ROUTE }),
      );
    }

    let pageRoom: string | undefined;
    if (wants("page") || wants("watcher") || wants("chromium")) {
      pageRoom = await newRoom(base, { description: "A room with 1,000 messages" });
      await fillRoom(base, pageRoom, 1000, (i) => `Message **${i}** with _markdown_ and a [link](https://example.com).`);
    }
    if (wants("page")) {
      // The ten pages of 100 messages of that room, in turn.
      const pages: Req[] = Array.from({ length: 10 }, (_, k) => ({ method: "GET", path: `/api/rooms/${pageRoom}/messages?since=${k * 100}&limit=100` }));
      f.page = await rate("page", `${label}: GET a page of 100 messages, 64 connections`, () => measure({ base, pid, connections: 64, requests: pages, route: READ_ROUTE }));
    }

    if (wants("post")) {
      // The local limit just before the HTTP load it is compared with: measured minutes apart, the
      // two saw different machines (a full run once had the in-process rate at half of what it was
      // beside the HTTP load). Before, not after: what a write load leaves behind (PostgreSQL's
      // checkpoint and autovacuum) then slows the HTTP load, not the limit, so the ratio errs low.
      // Even back to back, one pair is not enough here: single pairs on one day (2026-12-07, SQLite,
      // wrk) read 41 %, 44 % and 61 %. The ratio judged is the median of POST_PAIRS pairs, each the
      // limit and then the HTTP load.
      const postLoad = () => measure({ base, pid, connections: 64, requests: postRequests(rooms), route: POST_ROUTE });
      f.postPairs = [];
      for (let i = 0; i < POST_PAIRS; i++) {
        const local = await inProcessAppendRate(64, opts.localServices);
        report(`${label}: In-process append, 64 in flight (no HTTP): the local limit`, `${num(local)} appends/s`);
        let post: LoadResult;
        // The first pair's HTTP load is also the POST row's, beside the trivial Hono ceiling.
        if (i === 0) post = f.post = await rate("post", `${label}: POST message, 64 connections, 50 rooms`, postLoad);
        else logLoad(report, `${label}: POST message, 64 connections, 50 rooms (pair ${i + 1} of ${POST_PAIRS})`, (post = await postLoad()));
        f.postPairs.push([post, local]);
      }
      const ratio = medianRatio(f.postPairs);
      report(`${label}: HTTP POST / in-process append, median of ${POST_PAIRS} pairs`, `wrk ${pct(ratio.wrk, 1)}, autocannon ${pct(ratio.ac, 1)}`);
    }

    if (wants("signed")) {
      // Nonces are one-time: wrk gets bodies of its own, signed after autocannon's run for about twice its count.
      const acCount = 20_000;
      const warmup = signedRequests(rooms, 10_000, acCount);
      f.signed = await rate("signed", `${label}: POST agent-signed message, 64 connections, 50 rooms`, () =>
        measure(
          { base, pid, connections: 64, requests: signedRequests(rooms, acCount), warmup, route: POST_ROUTE },
          (ac) => ({ requests: signedRequests(rooms, Math.ceil(ac.rate * DURATION * 2.5) + 2_000, acCount + warmup.length) }),
        ),
      );
    }

    if (wants("watcher")) {
      const html = { accept: "text/html" };
      // In pairs, each A B B A per generator: one load of each, measured whole one after the other,
      // had their runs about twelve seconds apart, in and out of the machine's slow spells (a miss
      // by 0.2 % in the thirty-second round's run).
      const page = (path: string) => () => ({ base, pid, connections: 16, headers: html, requests: [{ method: "GET" as const, path }] });
      f.watcherPairs = [];
      for (let i = 0; i < PAGE_PAIRS; i++) {
        const of = i === 0 ? "" : ` (pair ${i + 1} of ${PAGE_PAIRS})`;
        const [watcher, home] = await inPair(page(`/${pageRoom}`), page("/"), i);
        logLoad(report, `${label}: Watcher page (1,000-message room), 16 connections${of}`, watcher);
        logLoad(report, `${label}: Trivial Next page (GET /), 16 connections${of}`, home);
        f.watcherPairs.push([watcher, home]);
      }
      [f.watcher, f.home] = f.watcherPairs[0]!;
      const ratio = medianRatio(f.watcherPairs);
      report(`${label}: Watcher page / trivial Next page, median of ${PAGE_PAIRS} pairs`, `wrk ${pct(ratio.wrk, 1)}, autocannon ${pct(ratio.ac, 1)}`);
    }

    if (wants("verify") || wants("chromium")) {
      const room = await newRoom(base);
      await fillRoom(base, room, 9_999, (i) => `verify benchmark ${i}`);
      if (wants("verify")) {
        f.verify10kOnline = await verifyOnline(server, room);
        report(`${label}: Verify online (POST /verify), 10,000 events`, fmtVerify(f.verify10kOnline));
        f.verify10kOffline = await verifyOffline(base, room);
        report(`${label}: Verify offline (parley verify, node:crypto), 10,000 events`, fmtVerify(f.verify10kOffline));
      }
      if (wants("chromium")) {
        f.chromium10k = await browserVerify(base, room);
        report(`${label}: Verify in the browser (Chromium), 10,000 events`, `${num(f.chromium10k.ms)} ms median of 3 (${f.chromium10k.impl}), ${f.chromium10k.verdict}`);
      }
    }
  } finally {
    await server.close();
  }

  if (wants("delivery")) await deliveryFigures(f, label, opts);
  return f;
}

/**
 * Delivery on a server of its own (fresh, with the pages), so that its resident memory with 1,000
 * streams open is the streams' cost over an idle server, not what earlier loads left; on
 * PostgreSQL a second instance (API only) on the same database posts for the cross-instance figure.
 */
async function deliveryFigures(f: CoreFigures, label: string, opts: { backend: Backend; env: Record<string, string>; report: Report; secondInstance?: boolean }): Promise<void> {
  const { report, env } = opts;
  const server = await startServerChild({ prefix: `parley-bench-${opts.backend}-d-`, env });
  const second = opts.secondInstance ? await startServerChild({ prefix: `parley-bench-${opts.backend}-b-`, apiOnly: true, env }) : undefined;
  const { base } = server;
  const pid = server.child.pid!;
  try {
    await sleep(1000);
    const rssBefore = rssMb(pid);
    // The two rows are two loads, one after the other: in one room at once, the long-polls'
    // answers would queue behind the thousand streams' writes (also on a server that does no more
    // than that I/O: the delivery ceiling).
    f.sse = (await delivery({ postBase: base, watchBase: base, sse: 1000, pollers: 0, whenOpen: () => (f.rssSse = rssMb(pid)) })).sse;
    f.polls = (await delivery({ postBase: base, watchBase: base, sse: 0, pollers: 100 })).polls;
    f.rssBeforeSse = rssBefore;
    report(`${label}: RSS with 1,000 SSE streams open (a fresh server)`, `${num(f.rssSse ?? NaN)} MB (${num(rssBefore)} MB just before they opened)`);
    report(`${label}: Delivery POST → 1,000 SSE watchers`, fmtDelivery(f.sse));
    report(`${label}: Delivery POST → 100 long-pollers`, fmtDelivery(f.polls));
    f.oneWatcher = (await delivery({ postBase: base, watchBase: base, sse: 1, pollers: 0, rounds: 100, gapMs: 50 })).sse;
    report(`${label}: Delivery POST → 1 SSE watcher`, fmtDelivery(f.oneWatcher));
    if (second) {
      f.crossInstance = (await delivery({ postBase: second.base, watchBase: base, sse: 1, pollers: 0, rounds: 100, gapMs: 50 })).sse;
      report(`${label}: Delivery POST on instance B → 1 SSE watcher on A`, fmtDelivery(f.crossInstance));
    }
  } finally {
    await Promise.all([server.close(), second?.close()]);
  }
}

export const pct = (a: number | undefined, b: number | undefined, digits = 0) => (a === undefined || b === undefined || !Number.isFinite(a / b) ? "—" : `${((a / b) * 100).toFixed(digits)} %`);

/** The local append limit's store for a backend. */
export function localServicesFor(backend: Backend, database?: () => Promise<string>): () => Promise<LocalServices> {
  return backend === "sqlite" ? async () => inProcessServices("parley-bench-local-") : async () => inProcessPgServices(await database!(), "parley-bench-pg-local-");
}
