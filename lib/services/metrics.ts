import crypto from "node:crypto";
import { ParleyError } from "../errors";
import type { Services } from "./context";

const LOOPBACK = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);

/**
 * /metrics is for the operator: the admin token, or a loopback peer when no proxy sits in front
 * (behind a proxy every peer is the proxy, so loopback proves nothing there).
 */
export function requireMetricsAccess(svc: Services, socketPeer: string, bearer: string | undefined): void {
  const admin = svc.config.adminToken;
  if (admin && bearer && bearer.length === admin.length && crypto.timingSafeEqual(Buffer.from(bearer), Buffer.from(admin))) return;
  if (svc.config.trustProxy === 0 && LOOPBACK.has(socketPeer)) return;
  throw new ParleyError("forbidden", "Metrics are served to the admin token or to loopback clients only.");
}

/**
 * Upper bounds of the latency buckets, in seconds: ten a decade (the rounded R10 series 1, 1.25,
 * 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8) from 0.1 ms to 100 s, so a quantile read from them is within
 * about 12 % of the true value at any scale, from a cached read to a 30 s long-poll.
 */
export const LATENCY_BUCKETS: readonly number[] = (() => {
  const mantissas = [1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8];
  const bounds: number[] = [];
  for (let exp = -4; exp <= 1; exp++) for (const m of mantissas) bounds.push(Number((m * 10 ** exp).toPrecision(3)));
  bounds.push(100);
  return bounds;
})();

/** The index of the bucket `seconds` falls in: the first bound ≥ it, or the +Inf bucket. */
export function bucketIndex(seconds: number, bounds: readonly number[] = LATENCY_BUCKETS): number {
  let lo = 0;
  let hi = bounds.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (bounds[mid]! >= seconds) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

interface Series {
  labels: string;
  /** Per bucket (not cumulative), the last one being +Inf. */
  counts: number[];
  sum: number;
  count: number;
}

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
/** `k="v",…` as in the exposition; also the key of a series. */
export const renderLabels = (labels: Record<string, string>) =>
  Object.entries(labels)
    .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
    .join(",");
const formatBound = (bound: number) => (bound === Infinity ? "+Inf" : String(bound));

/**
 * A Prometheus histogram with fixed log-scale buckets, one series per label set. The label sets
 * must be bounded (route patterns, not raw paths): every one seen stays in memory.
 */
export class LatencyHistogram {
  private readonly series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly bounds: readonly number[] = LATENCY_BUCKETS,
  ) {}

  observe(labels: Record<string, string> | string, seconds: number): void {
    const key = typeof labels === "string" ? labels : renderLabels(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { labels: key, counts: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    s.counts[bucketIndex(seconds, this.bounds)]!++;
    s.sum += seconds;
    s.count++;
  }

  /** The exposition: cumulative `_bucket` lines per series (le ascending, then +Inf), `_sum` and `_count`. */
  text(): string {
    const out = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.series.values()) {
      const sep = s.labels ? "," : "";
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += s.counts[i]!;
        out.push(`${this.name}_bucket{${s.labels}${sep}le="${formatBound(this.bounds[i] ?? Infinity)}"} ${cumulative}`);
      }
      const braces = s.labels ? `{${s.labels}}` : "";
      out.push(`${this.name}_sum${braces} ${s.sum}`, `${this.name}_count${braces} ${s.count}`);
    }
    return `${out.join("\n")}\n`;
  }
}

/** Counts per label set, as a Prometheus counter. */
class Counter {
  private readonly counts = new Map<string, number>();

  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  inc(labels: Record<string, string> | string): void {
    const key = typeof labels === "string" ? labels : renderLabels(labels);
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  text(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const [labels, n] of this.counts) lines.push(`${this.name}{${labels}} ${n}`);
    return `${lines.join("\n")}\n`;
  }
}

/** The API's own view of its requests: latency per route, and answers per route and status class. */
export class RequestMetrics {
  readonly latency = new LatencyHistogram(
    "parley_http_request_duration_seconds",
    "Time from the API receiving a request to its answer being ready, by method and route pattern (streams and waiting long-polls are in parley_http_held_request_duration_seconds)",
  );
  readonly held = new LatencyHistogram(
    "parley_http_held_request_duration_seconds",
    "Requests held open: a waiting long-poll until its answer, an SSE stream until its headers",
  );
  readonly responses = new Counter("parley_http_responses_total", "Answers by method, route pattern and status class");
  /**
   * Per method, per route seen: its rendered labels and its counter keys by status class, made once
   * (a request builds no string: it looks up strings whose hashes are kept).
   */
  private readonly routes = new Map<string, Map<string, { labels: string; byClass: string[] }>>();

  /**
   * One answered request. `route` is the Hono pattern that matched ("*" when only middleware did,
   * which is recorded as "unmatched" so that unknown paths add no series).
   */
  record(method: string, route: string, status: number, seconds: number, heldOpen = false): void {
    let byRoute = this.routes.get(method);
    if (!byRoute) this.routes.set(method, (byRoute = new Map()));
    let seen = byRoute.get(route);
    if (!seen) {
      const labels = renderLabels({ method, route: route === "*" || route === "/*" || route === "" ? "unmatched" : route });
      seen = { labels, byClass: [0, 1, 2, 3, 4, 5].map((c) => `${labels},status="${c}xx"`) };
      byRoute.set(route, seen);
    }
    (heldOpen ? this.held : this.latency).observe(seen.labels, seconds);
    const statusClass = Math.floor(status / 100);
    this.responses.inc(seen.byClass[statusClass] ?? `${seen.labels},status="${statusClass}xx"`);
  }

  text(): string {
    return this.latency.text() + this.held.text() + this.responses.text();
  }
}

// Keyed by the Services, so that two instances of the app in one process keep apart counts.
const perServices = new WeakMap<Services, RequestMetrics>();

/** The request metrics of these services (made on first use). */
export function requestMetrics(svc: Services): RequestMetrics {
  let m = perServices.get(svc);
  if (!m) {
    m = new RequestMetrics();
    perServices.set(svc, m);
  }
  return m;
}

/** Prometheus text exposition of a few process and service figures, and the API's request metrics. */
export async function metricsText(svc: Services): Promise<string> {
  const mem = process.memoryUsage();
  const counts = await svc.store.counts();
  const lines = [
    ["parley_rooms", "gauge", "Rooms holding data (open or closed)", counts.rooms],
    ["parley_events", "gauge", "Events stored across all rooms", counts.events],
    ["parley_live_listeners", "gauge", "Open SSE streams and waiting long-polls", svc.notifier.streamCount],
    ["process_resident_memory_bytes", "gauge", "Resident set size", mem.rss],
    ["process_heap_used_bytes", "gauge", "V8 heap in use", mem.heapUsed],
    ["process_uptime_seconds", "gauge", "Seconds since start", Math.round(process.uptime())],
  ] as const;
  const signed = svc.key.signerCounts();
  const signatures =
    "# HELP parley_checkpoint_signatures_total Checkpoints signed, by the thread that made the signature (the signer's own, or the main thread)\n" +
    "# TYPE parley_checkpoint_signatures_total counter\n" +
    `parley_checkpoint_signatures_total{thread="signer"} ${signed.thread}\nparley_checkpoint_signatures_total{thread="main"} ${signed.here}\n`;
  return lines.map(([name, type, help, value]) => `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${value}\n`).join("") + signatures + requestMetrics(svc).text();
}
