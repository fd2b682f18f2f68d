import v8 from "node:v8";
import { ParleyError } from "../errors";
import type { LimitsStore } from "../store/types";
import type { Services } from "./context";

/**
 * Token buckets, one per key, for how often: kept by the store (in memory on SQLite, one table
 * shared by every instance on PostgreSQL, so a client spreading requests over instances gets one
 * budget); and counters of what this instance holds at once (open streams, exports), for how many.
 * A capacity of 0 turns a limit off.
 */
export class RateLimiter {
  private readonly holds = new Map<string, number>();

  constructor(
    private readonly buckets: LimitsStore,
    private readonly now: () => number,
  ) {}

  /** Takes one token from `key` (capacity per window) or throws 429 rate_limited with Retry-After. */
  async take(key: string, capacity: number, windowMs: number, what: string): Promise<void> {
    if (capacity <= 0) return;
    const retryAfter = await this.buckets.takeToken(key, capacity, windowMs, this.now());
    if (retryAfter > 0) throw new ParleyError("rate_limited", `Too many ${what}. Wait ${retryAfter} s (Retry-After) and try again.`, { retryAfter });
  }

  /**
   * Counts one more thing held under `key` (at most `capacity` at once) and returns its release,
   * which may be called any number of times; past the capacity, 429 rate_limited with `detail`.
   */
  hold(key: string, capacity: number, detail: string, retryAfter: number): () => void {
    if (capacity <= 0) return () => {};
    const held = this.holds.get(key) ?? 0;
    if (held >= capacity) throw new ParleyError("rate_limited", detail, { retryAfter });
    this.holds.set(key, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.holds.get(key) ?? 1) - 1;
      if (left > 0) this.holds.set(key, left);
      else this.holds.delete(key);
    };
  }

  /** How many are held under `key` now. */
  held(key: string): number {
    return this.holds.get(key) ?? 0;
  }

  /** Drops idle buckets so their number stays bounded by the number of active clients. */
  prune(): Promise<void> {
    return this.buckets.pruneBuckets(this.now());
  }
}

/** The key under which a client's open SSE streams and waiting long-polls are counted. */
export const streamsKey = (ip: string) => `streams:${ip}`;
export const EXPORTS_KEY = "exports";

/**
 * Counts an SSE stream or a waiting long-poll (REST or MCP) against its client's cap
 * (PARLEY_MAX_STREAMS_PER_CLIENT); the caller releases it when the response closes, however it ends.
 */
export function holdStream(svc: Services, ip: string): () => void {
  const cap = svc.config.maxStreamsPerClient;
  return svc.limiter.hold(
    streamsKey(ip),
    cap,
    `Your address already holds ${cap} open event streams and long-polls, the most allowed at once. Close one you no longer read, or wait 5 s (Retry-After), before opening another.`,
    5,
  );
}

/**
 * Counts a whole-room export or verification against the server's cap (PARLEY_MAX_CONCURRENT_EXPORTS),
 * and bounds the heap's growth while one runs (boundHeapGrowth).
 */
export function holdExport(svc: Services): () => void {
  const cap = svc.config.maxConcurrentExports;
  const release = svc.limiter.hold(
    EXPORTS_KEY,
    cap,
    `The server is already exporting or verifying ${cap} rooms, the most it does at once. Wait 2 s (Retry-After) and try again.`,
    2,
  );
  boundHeapGrowth(+1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    release();
    boundHeapGrowth(-1);
  };
}

/**
 * V8 lets the old space grow to up to four times what its last full collection left before it
 * collects again. While a whole room's log streams through the server that growth is garbage:
 * verifying 100,000 events peaked at 411 MB of RSS with 75 MB live. While an export or a
 * verification runs in this process, growth is bounded to twice the live heap (the same
 * verification then peaked at 271 MB, in the same time); otherwise V8 chooses, which is 10-15 %
 * faster for posts than the bound (docs/BENCHMARKS.md). A --heap-growing-percent given in
 * NODE_OPTIONS or on the command line is left alone.
 */
let wholeRoomReads = 0;
const growthGiven = [...process.execArgv, process.env.NODE_OPTIONS ?? ""].some((arg) => arg.includes("heap-growing-percent"));
function boundHeapGrowth(change: 1 | -1): void {
  wholeRoomReads += change;
  const first = change === 1 && wholeRoomReads === 1;
  const last = change === -1 && wholeRoomReads === 0;
  // 0 is V8's default: its own heuristics.
  if (!growthGiven && (first || last)) v8.setFlagsFromString(`--heap-growing-percent=${first ? 100 : 0}`);
}
