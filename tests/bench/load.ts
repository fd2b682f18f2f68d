/**
 * The HTTP load and its three views: autocannon (in this process), wrk (a process of its own, C,
 * one thread by default) and the server's own histogram (GET /metrics before and after each load).
 * A load is a list of requests cycled through by every connection; the same list goes to both
 * generators, so they send the same thing.
 */
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";

const WRK_SCRIPT = path.join(import.meta.dirname, "requests.lua");

/**
 * A count of runs or pairs from the environment (`name`, else `fallback`): at least 1, since a
 * median of none is undefined. Not a number stops the bench with the variable's name, rather than
 * a table of NaN at the end of a 40-minute run.
 */
export function countFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  const n = raw === undefined || raw === "" ? fallback : Number(raw);
  if (!Number.isFinite(n)) throw new Error(`${name}=${raw}: expected a whole number of runs, such as ${fallback}.`);
  return Math.max(1, Math.floor(n));
}
export const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
/** wrk's threads: one by default, so that it takes no more of the two cores than autocannon does. */
const WRK_THREADS = Number(process.env.BENCH_WRK_THREADS ?? 1);
/**
 * Each wrk connection holds back its first request this long, so that the server accepts all of
 * them before the load (Node accepts one connection per event-loop turn: see runAutocannon).
 */
const WRK_STARTUP_S = 1;
/** Seconds of unmeasured load before each measured one (BENCH_WARMUP_SECONDS). */
export const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);

export interface Req {
  method: "GET" | "POST";
  path: string;
  body?: string;
}

export interface Load {
  base: string;
  requests: Req[];
  /** Headers of every request (both generators); a body's content-type is JSON. */
  headers?: Record<string, string>;
  connections: number;
  /** Seconds (DURATION unless given); or a fixed number of requests (autocannon), wrk then runs for the time autocannon took. */
  seconds?: number;
  amount?: number;
  /** The route the server's histogram is read for ("POST /api/rooms/:id/messages"); none for a page or the ceilings. */
  route?: string;
  /** Skip wrk (a part that is only measured one way, e.g. while building a room). */
  noWrk?: boolean;
  /** The server's process: its CPU time during each load is read from /proc. */
  pid?: number;
  /** Requests of the warm-up load when they must differ from the measured ones (one-time nonces); false: no warm-up. */
  warmup?: Req[] | false;
}

/** The server process's CPU during a load: cores busy on average (1 = one core all the time), and per request. */
export interface Cpu {
  share: number;
  /** Of which its main thread (the JavaScript: at 1 it is the limit, whatever else is free). */
  mainThread: number;
  /**
   * How long its main thread was ready to run but waited for a core (from schedstat; NaN where the
   * kernel keeps none): running plus waiting near 1 is a main thread held by the cores, not by its work.
   */
  mainWaiting: number;
  msPerRequest: number;
  /** Cores busy on the whole machine meanwhile (the server, the load generator, PostgreSQL, the rest). */
  machine: number;
}

/** One generator's view of a load. Latencies in ms. */
export interface ClientView {
  tool: "autocannon" | "wrk";
  /** Answers counted in the figures (autocannon: the steady part of the run). */
  requests: number;
  /** Every answer of the run (what the server's CPU time is divided by). */
  total: number;
  seconds: number;
  rate: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
  /** Connection errors, timeouts and non-2xx answers. */
  errors: number;
  /** rate × mean latency: how many requests were in flight on average (Little's law); ≈ connections when the generator keeps up. */
  inFlight: number;
  /**
   * wrk only: its figures as it prints them. wrk 4 adds to its histogram, after the run, the
   * requests a client sending at the run's mean rate would have waited for behind each slow one
   * (coordinated omission); the figures above are the requests actually sent, that correction undone.
   */
  reported?: { p50: number; p99: number; mean: number };
  /** autocannon only: the first answer of each connection (accepting the connection included). */
  startup?: { p50: number; max: number };
}

/** The server's view of the same load, from its histogram: only the route asked for. */
export interface ServerView {
  requests: number;
  p50: number;
  p99: number;
  mean: number;
  /** Answers that were not 2xx, as the server counted them. */
  errors: number;
  /** Checkpoints signed meanwhile, by the thread that made the signature. */
  signed: Signatures;
}

export interface LoadResult {
  ac: ClientView;
  acServer?: ServerView;
  acCpu?: Cpu;
  wrk?: ClientView;
  wrkServer?: ServerView;
  wrkCpu?: Cpu;
}

/** "wrk 1,234/s · autocannon 1,100/s" */
export const rateText = (r: LoadResult) => `${r.wrk ? `wrk ${num(r.wrk.rate)}/s · ` : ""}autocannon ${num(r.ac.rate)}/s`;

/** The middle value (the mean of the two middle ones for an even count). */
export const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
/** Per generator, a rate over its reference's. */
export interface Ratio {
  ac: number;
  wrk?: number;
}
/** A load and its reference, measured back to back: the reference is a load (each generator's rate against the same generator's) or one rate for both. */
export type Pair = readonly [load: LoadResult, ref: LoadResult | number];
const refRate = (ref: LoadResult | number, wrk: boolean) => (typeof ref === "number" ? ref : wrk ? ref.wrk?.rate : ref.ac.rate);
/** Per generator, each pair's load's rate over its reference's (wrk's only when every pair has both). */
export function pairRatios(pairs: readonly Pair[]): { ac: number[]; wrk?: number[] } {
  const wrk = pairs.every(([load, ref]) => load.wrk && refRate(ref, true) !== undefined) ? pairs.map(([load, ref]) => load.wrk!.rate / refRate(ref, true)!) : undefined;
  return { ac: pairs.map(([load, ref]) => load.ac.rate / refRate(ref, false)!), wrk };
}
/** Per generator, the median of the pairs' ratios (the figure judged wherever a load is measured in pairs with its reference). */
export function medianRatio(pairs: readonly Pair[]): Ratio {
  const { ac, wrk } = pairRatios(pairs);
  return { ac: median(ac), wrk: wrk && median(wrk) };
}
/** "median of 3 pairs: wrk 52 % (45 / 52 / 56) · autocannon 46 % (43 / 46 / 48)" */
export function pairsText(pairs: readonly Pair[]): string {
  const each = pairRatios(pairs);
  const { ac, wrk } = medianRatio(pairs);
  const part = (tool: string, m: number, xs: number[]) => `${tool} ${(m * 100).toFixed(0)} % (${xs.map((x) => (x * 100).toFixed(0)).join(" / ")})`;
  return `median of ${pairs.length} pairs: ${[...(wrk === undefined ? [] : [part("wrk", wrk, each.wrk!)]), part("autocannon", ac, each.ac)].join(" · ")}`;
}
export const num = (n: number, digits = 0) => (Number.isFinite(n) ? n.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits }) : "—");
const ms = (x: number) => (x >= 100 ? num(x) : x >= 10 ? num(x, 1) : num(x, 2));

export const fmtClient = (v: ClientView) =>
  `${num(v.rate)} req/s, p50 ${ms(v.p50)} ms, p99 ${ms(v.p99)} ms, errors ${v.errors}, in flight ${num(v.inFlight, 1)}` +
  (v.reported ? ` (as wrk prints it: p50 ${ms(v.reported.p50)} ms, p99 ${ms(v.reported.p99)} ms)` : "") +
  (v.startup ? ` (first answer of a connection: p50 ${ms(v.startup.p50)} ms, max ${ms(v.startup.max)} ms)` : "");
export const fmtServer = (v: ServerView) => `${num(v.requests)} answered, p50 ${ms(v.p50)} ms, p99 ${ms(v.p99)} ms, non-2xx ${v.errors}${fmtSigned(v.signed)}`;

/** ", N checkpoints signed (M % on the signer's thread)", or nothing when none were. */
export function fmtSigned(s: Signatures): string {
  const total = s.signer + s.main;
  return total > 0 ? `, ${num(total)} checkpoints signed (${Math.round((100 * s.signer) / total)} % on the signer's thread)` : "";
}

export function cannonRaw(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => autocannon({ duration: DURATION, ...opts }, (err, res) => (err ? reject(err) : resolve(res))));
}

/** Nearest-rank quantile of an ascending array. */
const rank = (sorted: number[], q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]! : NaN);

/**
 * autocannon, its figures taken from every response (not from its summary) over the steady part
 * of the run: from the moment every connection has had its first answer to the end. The first
 * request of each connection waits for the server to accept the connection, and Node 20 accepts
 * one connection per event-loop turn, so on a busy server the last of 64 new connections waited
 * over a second here: a start-up cost of new connections (reported apart as `startup`), not the
 * latency of the load.
 */
async function runAutocannon(load: Load): Promise<ClientView> {
  const list = load.requests;
  let i = 0;
  const firstAnswer = new Map<object, number>();
  let steadyFrom = Infinity;
  const samples: [at: number, ms: number][] = [];
  const t0 = performance.now();
  const instance = autocannon(
    {
      url: load.base,
      connections: load.connections,
      ...(load.amount ? { amount: load.amount, duration: 3600 } : { duration: load.seconds ?? DURATION }),
      requests: [
        {
          setupRequest: (req) => {
            const next = list[i++ % list.length]!;
            return { ...req, method: next.method, path: next.path, body: next.body, headers: { ...(next.body ? { "content-type": "application/json" } : {}), ...load.headers } };
          },
        },
      ],
    },
    () => {},
  );
  instance.on("response", (client: object, _status: number, _bytes: number, ms: number) => {
    const at = performance.now();
    if (!firstAnswer.has(client)) {
      firstAnswer.set(client, ms);
      if (firstAnswer.size === load.connections) steadyFrom = at;
      return;
    }
    samples.push([at, ms]);
  });
  const r = await new Promise<autocannon.Result>((resolve) => instance.on("done", resolve));
  const end = performance.now();
  const steady = samples.filter(([at]) => at >= steadyFrom);
  // Every connection answered at least once: the steady window; else (a stuck connection) the whole run.
  const window = steady.length && Number.isFinite(steadyFrom) ? steady : samples;
  const seconds = (end - (window === steady ? steadyFrom : t0)) / 1000;
  const lat = window.map(([, ms]) => ms).sort((a, b) => a - b);
  const mean = lat.reduce((a, b) => a + b, 0) / Math.max(1, lat.length);
  const rate = lat.length / seconds;
  const first = [...firstAnswer.values()].sort((a, b) => a - b);
  return {
    tool: "autocannon",
    requests: lat.length,
    total: r.requests.total,
    seconds,
    rate,
    p50: rank(lat, 0.5),
    p99: rank(lat, 0.99),
    max: lat.at(-1) ?? NaN,
    mean,
    errors: r.errors + r.timeouts + r.non2xx,
    inFlight: (rate * mean) / 1000,
    startup: { p50: rank(first, 0.5), max: first.at(-1) ?? NaN },
  };
}

let wrkChecked = false;

/**
 * wrk on the machine: installed here when missing and this runs as root (Debian's package), else
 * the bench says how and stops.
 */
export function ensureWrk(): void {
  if (wrkChecked) return;
  const has = () => {
    try {
      execFileSync("wrk", ["--version"], { stdio: "ignore" });
      return true;
    } catch (err) {
      // wrk --version exits 1 after printing its version.
      return (err as NodeJS.ErrnoException).code !== "ENOENT";
    }
  };
  if (!has()) {
    if (process.getuid?.() !== 0) throw new Error("wrk is not installed: run `sudo apt-get update && sudo apt-get install -y wrk` (Debian/Ubuntu), then the bench again.");
    console.log("wrk is missing: apt-get install -y wrk …");
    execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit" });
    execFileSync("apt-get", ["install", "-y", "-qq", "wrk"], { stdio: "inherit", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
    if (!has()) throw new Error("apt-get install wrk did not give a wrk command");
  }
  wrkChecked = true;
}

/** The requests as the Lua script reads them: one a line, method TAB path TAB body (JSON has no raw tabs or newlines). */
function requestFile(list: Req[]): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "parley-bench-wrk-")), "requests.tsv");
  for (const r of list) if (/[\t\n]/.test(r.path + (r.body ?? ""))) throw new Error("a wrk request must not contain tabs or newlines");
  fs.writeFileSync(file, list.map((r) => `${r.method}\t${r.path}\t${r.body ?? ""}`).join("\n") + "\n");
  return file;
}

async function runWrk(load: Load, seconds: number): Promise<ClientView> {
  ensureWrk();
  const file = requestFile(load.requests);
  const threads = Math.min(WRK_THREADS, load.connections);
  const args = ["-t", String(threads), "-c", String(load.connections), "-d", `${Math.max(1, Math.round(seconds)) + WRK_STARTUP_S}s`, "--timeout", "10s", "-s", WRK_SCRIPT];
  for (const [k, v] of Object.entries(load.headers ?? {})) args.push("-H", `${k}: ${v}`);
  args.push(load.base, "--", file, String(threads), String(Math.ceil(load.connections / threads)), String(WRK_STARTUP_S * 1000));
  try {
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn("wrk", args, { stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("error", reject);
      child.on("exit", (code) => (code === 0 ? resolve(stdout) : reject(new Error(`wrk exited ${code}: ${stderr || stdout}`))));
    });
    return wrkView(out, load.connections, WRK_STARTUP_S);
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
}

/**
 * Undoes wrk 4's correction for coordinated omission. After the run wrk takes e = runtime /
 * (requests / connections), the mean time between two requests of one connection, and for every
 * recorded latency n ≥ 2e adds one more sample at n − e, n − 2e, … while above e. So a value m > e
 * holds, after the correction, its own count plus the counts at m + e, m + 2e, …; the count sent
 * at m is corrected[m] − corrected[m + e] (and corrected[m] itself for m ≤ e). Microseconds.
 */
export function uncorrectWrk(corrected: Map<number, number>, e: number): Map<number, number> {
  const raw = new Map<number, number>();
  for (const [m, n] of corrected) {
    const own = m > e ? n - (corrected.get(m + e) ?? 0) : n;
    if (own > 0) raw.set(m, own);
  }
  return raw;
}

/** Nearest-rank quantile, mean and max of a value → count map. */
function distribution(hist: Map<number, number>): { count: number; p50: number; p99: number; mean: number; max: number } {
  const values = [...hist.keys()].sort((a, b) => a - b);
  const count = values.reduce((a, v) => a + hist.get(v)!, 0);
  const at = (q: number) => {
    const rank = Math.max(1, Math.ceil(q * count));
    let seen = 0;
    for (const v of values) if ((seen += hist.get(v)!) >= rank) return v;
    return values.at(-1) ?? NaN;
  };
  const sum = values.reduce((a, v) => a + v * hist.get(v)!, 0);
  return { count, p50: at(0.5), p99: at(0.99), mean: count ? sum / count : NaN, max: values.at(-1) ?? NaN };
}

/**
 * wrk's output (the script's WRK and WRKH lines) as a ClientView, latencies of the requests sent;
 * the first `startup` seconds, in which each connection holds back its first request so that the
 * server accepts all of them while idle, do not count in the rate.
 */
export function wrkView(out: string, connections: number, startup = 0): ClientView {
  const line = /^WRK (\{.*\})$/m.exec(out);
  if (!line) throw new Error(`wrk printed no summary: ${out}`);
  const s = JSON.parse(line[1]!) as { requests: number; duration_us: number; connect: number; read: number; write: number; status: number; timeout: number; p50: number; p99: number; max: number; mean: number };
  const seconds = s.duration_us / 1e6 - startup;
  const rate = s.requests / seconds;
  const errors = s.connect + s.read + s.write + s.status + s.timeout;
  const reported = { p50: s.p50 / 1000, p99: s.p99 / 1000, mean: s.mean / 1000 };
  const hist = /^WRKH (.*)$/m.exec(out)?.[1];
  let d = { p50: reported.p50, p99: reported.p99, mean: reported.mean, max: s.max / 1000 };
  if (hist) {
    const corrected = new Map(hist.split(",").filter(Boolean).map((pair) => pair.split(":").map(Number) as [number, number]));
    const perConnection = Math.floor(s.requests / connections);
    const raw = perConnection > 0 ? uncorrectWrk(corrected, Math.floor(s.duration_us / perConnection)) : corrected;
    const r = distribution(raw);
    // Every request sent has one latency: the undone correction must leave exactly as many.
    if (Math.abs(r.count - s.requests) > Math.max(2, s.requests * 0.005)) console.warn(`wrk: ${r.count} latencies after undoing its correction, for ${s.requests} requests`);
    d = { p50: r.p50 / 1000, p99: r.p99 / 1000, mean: r.mean / 1000, max: r.max / 1000 };
  } else console.warn("wrk gave no histogram (no LuaJIT FFI?): its figures are shown as it reports them, corrected for coordinated omission");
  return { tool: "wrk", requests: s.requests, total: s.requests, seconds, rate, ...d, errors, inFlight: (rate * d.mean) / 1000, reported };
}

// ---- The server's histogram -------------------------------------------------------------------

type Buckets = Map<number, number>; // le → cumulative count
interface RouteSnapshot {
  buckets: Buckets;
  sum: number;
  count: number;
  non2xx: number;
  signed: Signatures;
}

/** Checkpoint signatures made on the server's signer thread and on its main thread (counters). */
export interface Signatures {
  signer: number;
  main: number;
}

/** The server's checkpoint signature counters in a /metrics text. */
export function signatures(text: string): Signatures {
  const count = (thread: string) => Number(new RegExp(`^parley_checkpoint_signatures_total\\{thread="${thread}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
  return { signer: count("signer"), main: count("main") };
}

/** Parses /metrics into the request histogram of one route ("METHOD /pattern"). */
export function routeSnapshot(text: string, route: string): RouteSnapshot {
  const [method, pattern] = route.split(" ", 2) as [string, string];
  const labels = `method="${method}",route="${pattern}"`;
  const buckets: Buckets = new Map();
  let sum = 0;
  let count = 0;
  let non2xx = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`parley_http_request_duration_seconds_bucket{${labels},le="`)) {
      const m = /le="([^"]+)"\} (\S+)$/.exec(line)!;
      buckets.set(m[1] === "+Inf" ? Infinity : Number(m[1]), Number(m[2]));
    } else if (line.startsWith(`parley_http_request_duration_seconds_sum{${labels}}`)) sum = Number(line.split(" ").at(-1));
    else if (line.startsWith(`parley_http_request_duration_seconds_count{${labels}}`)) count = Number(line.split(" ").at(-1));
    else if (line.startsWith(`parley_http_responses_total{${labels},status=`) && !line.includes('status="2xx"')) non2xx += Number(line.split(" ").at(-1));
  }
  return { buckets, sum, count, non2xx, signed: signatures(text) };
}

/**
 * The q-quantile (0..1) of cumulative buckets, interpolated linearly inside the bucket it falls
 * in (as Prometheus' histogram_quantile does); in the same unit as the bounds.
 */
export function histogramQuantile(q: number, cumulative: [number, number][]): number {
  const sorted = [...cumulative].sort((a, b) => a[0] - b[0]);
  const total = sorted.at(-1)?.[1] ?? 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let prevBound = 0;
  let prevCount = 0;
  for (const [bound, count] of sorted) {
    if (count >= rank) {
      if (bound === Infinity) return prevBound; // beyond the last bound: the last bound is all we know
      return prevBound + ((bound - prevBound) * (rank - prevCount)) / Math.max(1, count - prevCount);
    }
    prevBound = bound;
    prevCount = count;
  }
  return prevBound;
}

/** What the server saw between two snapshots of a route. */
export function serverDiff(before: RouteSnapshot, after: RouteSnapshot): ServerView {
  const diff: [number, number][] = [...after.buckets].map(([le, n]) => [le, n - (before.buckets.get(le) ?? 0)]);
  const requests = after.count - before.count;
  return {
    requests,
    p50: histogramQuantile(0.5, diff) * 1000,
    p99: histogramQuantile(0.99, diff) * 1000,
    mean: requests ? ((after.sum - before.sum) / requests) * 1000 : NaN,
    errors: after.non2xx - before.non2xx,
    signed: { signer: after.signed.signer - before.signed.signer, main: after.signed.main - before.signed.main },
  };
}

export async function metricsText(base: string): Promise<string> {
  const res = await fetch(`${base}/metrics`);
  if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
  return res.text();
}

/** CPU seconds (user + system) a process (or, with `mainThread`, its main thread) has used so far, from /proc. */
export function cpuSeconds(pid: number, mainThread = false): number {
  const stat = fs.readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** Seconds a process's main thread has waited, ready to run, for a core so far (/proc schedstat: run ns, wait ns, slices); NaN without it. */
export function runQueueSeconds(pid: number): number {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[1]) / 1e9;
  } catch {
    return NaN;
  }
}
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** The machine's busy CPU time so far (every process, user + system + interrupts), in seconds, from /proc/stat. */
export function machineBusySeconds(): number {
  const [, ...ticks] = fs.readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!.trim().split(/\s+/).map(Number);
  // user nice system idle iowait irq softirq steal ...: idle and iowait are not busy.
  const busy = ticks.slice(0, 8).reduce((a, b) => a + b, 0) - ticks[3]! - ticks[4]!;
  return busy / CLOCK_TICKS;
}

/**
 * Waits until the machine is quiet (under QUIET_CORES busy over half a second, every process
 * counted), at most `maxMs`; returns the seconds waited. What a fill leaves for later (SQLite's WAL
 * checkpoint, PostgreSQL's autovacuum) would otherwise share the cores with the next load and be
 * measured as the cost of the room's size.
 */
const QUIET_CORES = 0.15;
export async function waitForQuiet(maxMs = 15_000): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    const busy0 = machineBusySeconds();
    const w0 = performance.now();
    await new Promise((r) => setTimeout(r, 500));
    const cores = (machineBusySeconds() - busy0) / ((performance.now() - w0) / 1000);
    const waited = (performance.now() - t0) / 1000;
    if (cores < QUIET_CORES || waited * 1000 >= maxMs) return waited;
  }
}

/** Runs `fn` between two readings of the server's histogram for `route` and of its CPU time. */
async function withServerView(load: Load, fn: () => Promise<ClientView>): Promise<[ClientView, ServerView | undefined, Cpu | undefined]> {
  const before = load.route ? routeSnapshot(await metricsText(load.base), load.route) : undefined;
  const t0 = performance.now();
  const cpu0 = load.pid ? cpuSeconds(load.pid) : 0;
  const main0 = load.pid ? cpuSeconds(load.pid, true) : 0;
  const waited0 = load.pid ? runQueueSeconds(load.pid) : 0;
  const machine0 = machineBusySeconds();
  const value = await fn();
  const used = load.pid ? cpuSeconds(load.pid) - cpu0 : 0;
  const usedMain = load.pid ? cpuSeconds(load.pid, true) - main0 : 0;
  const waited = load.pid ? runQueueSeconds(load.pid) - waited0 : 0;
  const machineUsed = machineBusySeconds() - machine0;
  // wrk's connections hold back their first request for WRK_STARTUP_S, the server idle meanwhile.
  const busy = (performance.now() - t0) / 1000 - (value.tool === "wrk" ? WRK_STARTUP_S : 0);
  const cpu = load.pid ? { share: used / busy, mainThread: usedMain / busy, mainWaiting: waited / busy, msPerRequest: (used * 1000) / value.total, machine: machineUsed / busy } : undefined;
  const after = load.route ? routeSnapshot(await metricsText(load.base), load.route) : undefined;
  return [value, before && after ? serverDiff(before, after) : undefined, cpu];
}

/**
 * The load with autocannon, then (unless noWrk) the same load with wrk for as long, each between
 * two readings of the server's histogram. A load that changes state (posts) runs twice: the wrk
 * run sees the state autocannon left, unless `forWrk` gives it requests (or a room) of its own.
 */
export async function measure(load: Load, forWrk?: Partial<Load> | ((ac: ClientView) => Partial<Load>)): Promise<LoadResult> {
  const ac = await measureAc(load);
  if (load.noWrk) return ac;
  const wrkLoad = { ...load, ...(typeof forWrk === "function" ? forWrk(ac.ac) : forWrk) };
  return { ...ac, ...(await measureWrk(wrkLoad, wrkLoad.amount ? Math.max(1, ac.ac.seconds) : undefined)) };
}

/**
 * The first load on a route meets cold code (JIT, lazy set-up): its first request on each of the
 * 64 connections took up to 2.5 s here, enough to set a 5 s run's p99. A short load first, not
 * counted, so that both generators measure the route warm. A load of a fixed size (a room filled
 * to a size) is not warmed: that would change the size.
 */
async function warmUp(load: Load): Promise<void> {
  if (!load.amount && load.warmup !== false && WARMUP > 0) await runAutocannon({ ...load, requests: load.warmup ?? load.requests, seconds: WARMUP });
}

/** The load with autocannon alone (after its warm-up), between two readings of the server's histogram. */
async function measureAc(load: Load): Promise<Pick<LoadResult, "ac" | "acServer" | "acCpu">> {
  await warmUp(load);
  const [ac, acServer, acCpu] = await withServerView(load, () => runAutocannon(load));
  return { ac, acServer, acCpu };
}

/** The load with wrk alone, for `seconds` (the load's own, else DURATION), between two readings of the server's histogram. */
async function measureWrk(load: Load, seconds = load.seconds ?? DURATION): Promise<Pick<LoadResult, "wrk" | "wrkServer" | "wrkCpu">> {
  const [wrk, wrkServer, wrkCpu] = await withServerView(load, () => runWrk(load, seconds));
  return { wrk, wrkServer, wrkCpu };
}

/** A side of a pair: its load for each generator (where the load changes state, each generator may have a room of its own). */
export type Side = (i: number, tool: "ac" | "wrk") => Load | Promise<Load>;

/**
 * Pair `i` of two loads compared with each other, A B B A per generator: autocannon on one side then
 * the other, wrk the other way round, with the sides' order alternating from pair to pair (A first
 * in even pairs), so that a drift favours neither and each ratio compares two runs of one generator
 * a few seconds apart. Each wrk run is warmed as autocannon's are (the other side idled meanwhile).
 * Returns [a's load, b's load].
 */
export async function inPair(a: Side, b: Side, i: number): Promise<[LoadResult, LoadResult]> {
  const [first, second] = i % 2 === 0 ? [a, b] : [b, a];
  const acFirst = await measureAc(await first(i, "ac"));
  const acSecond = await measureAc(await second(i, "ac"));
  const wrkOf = async (side: Side) => {
    const load = await side(i, "wrk");
    await warmUp(load);
    return measureWrk(load);
  };
  const wrkSecond = await wrkOf(second);
  const wrkFirst = await wrkOf(first);
  const ofFirst = { ...acFirst, ...wrkFirst };
  const ofSecond = { ...acSecond, ...wrkSecond };
  return i % 2 === 0 ? [ofFirst, ofSecond] : [ofSecond, ofFirst];
}

/** Both generators' lines (and the server's) for the log. */
export function describe(r: LoadResult): string[] {
  const server = (v: ServerView | undefined, cpu: Cpu | undefined) =>
    v || cpu ? [`  server    ${[v && fmtServer(v), cpu && fmtCpu(cpu)].filter(Boolean).join("; ")}`] : [];
  return [`autocannon ${fmtClient(r.ac)}`, ...server(r.acServer, r.acCpu), ...(r.wrk ? [`wrk        ${fmtClient(r.wrk)}`, ...server(r.wrkServer, r.wrkCpu)] : [])];
}

export const fmtCpu = (c: Cpu) =>
  `CPU ${num(c.share, 2)} cores (main thread ${num(c.mainThread, 2)}${Number.isNaN(c.mainWaiting) ? "" : `, and ${num(c.mainWaiting, 2)} waiting for a core`}), ${num(c.msPerRequest, 3)} ms a request (machine: ${num(c.machine, 2)} of ${os.cpus().length} cores busy)`;
