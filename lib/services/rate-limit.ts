import { ParleyError } from "../errors";

interface Bucket {
  tokens: number;
  updated: number;
}

/** Token buckets in memory, one per key; a capacity of 0 turns a limit off. */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

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

  /** Drops full buckets so memory stays bounded by the number of active clients. */
  prune(): void {
    const now = this.now();
    for (const [key, b] of this.buckets) if (now - b.updated > 3_600_000) this.buckets.delete(key);
  }
}
