// Token buckets shared by every instance: rows of the UNLOGGED rate_buckets table. Every limited
// request takes a token, so with the default limits every API request would cost a statement of
// its own. The takes of one instance are batched instead, as posts are (group commit): while one
// batch's statement is in flight the next takes queue, and go together in one statement when it
// returns, a bucket's takes granted in the order they were asked for. Cost: one round trip for
// every take in a batch (two when a batch names a bucket that does not exist yet).
import type pg from "pg";
import type { LimitsStore } from "./repository";

interface Take {
  resolve: (retryAfterSeconds: number) => void;
  reject: (err: unknown) => void;
}

interface Bucket {
  capacity: number;
  /** Tokens per millisecond. */
  rate: number;
  takes: Take[];
}

interface Left {
  key: string;
  /** Tokens left after the batch's takes. */
  tokens: number;
  /** How many of the bucket's takes got a token (the first ones asked for). */
  granted: number;
}

/**
 * Refills the batch's buckets that exist and takes what they hold of each one's takes, under row
 * locks taken in key order (two instances' batches never deadlock): one statement. The CTE reads
 * each bucket locked (at its newest version), the UPDATE writes what is left. `taken` tells
 * whether the bucket's last batch got any token.
 */
const TAKE_EXISTING = `
  WITH input AS (SELECT * FROM unnest($1::text[], $2::int[], $3::float8[], $4::float8[]) AS t(key, n, capacity, rate)),
  cur AS (
    SELECT b.key, LEAST(i.n, floor(r.refilled))::int AS granted, r.refilled
    FROM rate_buckets b JOIN input i ON i.key = b.key,
         LATERAL (SELECT LEAST(i.capacity, b.tokens + ($5::bigint - b.updated_ms) * i.rate) AS refilled) r
    ORDER BY b.key
    FOR UPDATE OF b
  )
  UPDATE rate_buckets b SET tokens = cur.refilled - cur.granted, updated_ms = $5, taken = cur.granted > 0
  FROM cur WHERE b.key = cur.key
  RETURNING b.key, b.tokens, cur.granted`;

/**
 * The batch's buckets that did not exist, created full and then taken from; a key another
 * instance created meanwhile is left out (and taken from by TAKE_EXISTING's next round).
 */
const CREATE_MISSING = `
  INSERT INTO rate_buckets (key, tokens, updated_ms, taken)
  SELECT key, capacity - LEAST(n, floor(capacity)), $5, LEAST(n, floor(capacity)) > 0
  FROM unnest($1::text[], $2::int[], $3::float8[], $4::float8[]) AS t(key, n, capacity, rate)
  ORDER BY key
  ON CONFLICT (key) DO NOTHING
  RETURNING key, tokens`;

export function pgBuckets(pool: pg.Pool, guarded: <T>(fn: () => Promise<T>) => Promise<T>): LimitsStore {
  let queued = new Map<string, Bucket>();
  let queuedNow = 0;
  let inFlight = false;

  /** Answers every take of the batch: at most a few rounds, one more per creation race lost. */
  async function run(batch: Map<string, Bucket>, nowMs: number): Promise<void> {
    const values = (keys: string[]) => [
      keys,
      keys.map((k) => batch.get(k)!.takes.length),
      keys.map((k) => batch.get(k)!.capacity),
      keys.map((k) => batch.get(k)!.rate),
      nowMs,
    ];
    let left = [...batch.keys()].sort();
    for (let round = 0; left.length > 0; round++) {
      if (round === 10) throw new Error("rate buckets: the race to create a bucket was lost ten times");
      const existing = await guarded(() => pool.query<Left>({ name: "take_tokens", text: TAKE_EXISTING, values: values(left) }));
      for (const row of existing.rows) settle(batch.get(row.key)!, row.tokens, row.granted);
      left = without(left, existing.rows);
      if (left.length === 0) break;
      const created = await guarded(() => pool.query<{ key: string; tokens: number }>({ name: "create_buckets", text: CREATE_MISSING, values: values(left) }));
      for (const row of created.rows) {
        const bucket = batch.get(row.key)!;
        settle(bucket, row.tokens, Math.min(bucket.takes.length, Math.floor(bucket.capacity)));
      }
      left = without(left, created.rows);
    }
  }

  function settle(bucket: Bucket, tokens: number, granted: number): void {
    const retryAfter = Math.max(1, Math.ceil((1 - tokens) / bucket.rate / 1000));
    bucket.takes.forEach((take, i) => take.resolve(i < granted ? 0 : retryAfter));
  }

  function flush(): void {
    if (inFlight || queued.size === 0) return;
    const batch = queued;
    const nowMs = queuedNow;
    queued = new Map();
    queuedNow = 0;
    inFlight = true;
    run(batch, nowMs)
      .catch((err: unknown) => {
        for (const bucket of batch.values()) for (const take of bucket.takes) take.reject(err);
      })
      .finally(() => {
        inFlight = false;
        flush();
      });
  }

  return {
    takeToken(key, capacity, windowMs, nowMs) {
      return new Promise<number>((resolve, reject) => {
        // The takes of this turn of the event loop go together, or with the next batch when one is in flight.
        if (!inFlight && queued.size === 0) setImmediate(flush);
        let bucket = queued.get(key);
        if (!bucket) queued.set(key, (bucket = { capacity, rate: capacity / windowMs, takes: [] }));
        bucket.takes.push({ resolve, reject });
        queuedNow = Math.max(queuedNow, nowMs);
      });
    },
    pruneBuckets: async (nowMs) => void (await guarded(() => pool.query(`DELETE FROM rate_buckets WHERE updated_ms < $1`, [nowMs - 3_600_000]))),
  };
}

const without = (keys: string[], rows: { key: string }[]) => {
  const done = new Set(rows.map((r) => r.key));
  return keys.filter((k) => !done.has(k));
};
