import { ParleyError } from "../errors";
import type { Services } from "./context";

interface Bucket {
  tokens: number;
  updated: number;
}

/**
 * Token buckets in memory, one per key, for how often; and counters of what is held at once (open
 * streams, exports), for how many. A capacity of 0 turns a limit off.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly holds = new Map<string, number>();

  constructor(private readonly now: () => number) {}

  /** Takes one token from `key` (capacity per window) or throws 429 rate_limited with Retry-After. */
  take(key: string, capacity: number, windowMs: number, what: string): void {
    if (capacity <= 0) return;
    const now = this.now();
    const rate = capacity / windowMs;
    const bucket = this.buckets.get(key) ?? { tokens: capacity, updated: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + (now - bucket.updated) * rate);
    bucket.updated = now;
    if (bucket.tokens < 1) {
      this.buckets.set(key, bucket);
      const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / rate / 1000));
      throw new ParleyError("rate_limited", `Too many ${what}. Wait ${retryAfter} s (Retry-After) and try again.`, { retryAfter });
    }
    bucket.tokens -= 1;
    this.buckets.set(key, bucket);
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

  /** Drops full buckets so memory stays bounded by the number of active clients. */
  prune(): void {
    const now = this.now();
    for (const [key, b] of this.buckets) if (now - b.updated > 3_600_000) this.buckets.delete(key);
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

/** Counts a whole-room export or verification against the server's cap (PARLEY_MAX_CONCURRENT_EXPORTS). */
export function holdExport(svc: Services): () => void {
  const cap = svc.config.maxConcurrentExports;
  return svc.limiter.hold(
    EXPORTS_KEY,
    cap,
    `The server is already exporting or verifying ${cap} rooms, the most it does at once. Wait 2 s (Retry-After) and try again.`,
    2,
  );
}
