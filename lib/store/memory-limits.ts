import type { LimitsStore } from "./repository";

/** Token buckets in this process's memory: the rate limits of a single instance (SQLite). */
export class MemoryBuckets implements LimitsStore {
  private readonly buckets = new Map<string, { tokens: number; updated: number }>();

  async takeToken(key: string, capacity: number, windowMs: number, nowMs: number): Promise<number> {
    const rate = capacity / windowMs;
    const b = this.buckets.get(key) ?? { tokens: capacity, updated: nowMs };
    b.tokens = Math.min(capacity, b.tokens + (nowMs - b.updated) * rate);
    b.updated = nowMs;
    this.buckets.set(key, b);
    if (b.tokens < 1) return Math.max(1, Math.ceil((1 - b.tokens) / rate / 1000));
    b.tokens -= 1;
    return 0;
  }

  async pruneBuckets(nowMs: number): Promise<void> {
    for (const [key, b] of this.buckets) if (nowMs - b.updated > 3_600_000) this.buckets.delete(key);
  }
}
