import type { Config } from "../config";
import type { Caches, RoomRows } from "./cache";
import type { FrameCache } from "../realtime/feed";
import type { LastCommits } from "../realtime/last-commits";
import type { Notifier } from "../realtime/notifier";
import type { LogEvent } from "../log/event";
import type { RoomRow, Store, StoreWriter } from "../store/types";
import type { RateLimiter } from "./rate-limit";
import type { ServerKey } from "./server-key";

export interface Clock {
  now(): number;
}
export const systemClock: Clock = { now: () => Date.now() };

/** Everything a use case needs, built once per process. */
export interface Services {
  config: Config;
  store: Store;
  key: ServerKey;
  clock: Clock;
  notifier: Notifier;
  limiter: RateLimiter;
  frames: FrameCache;
  /** The events of each waited-on room's last commit here, for the long-polls it wakes. */
  lastCommits: LastCommits;
  /** Host part of checkpoint origins. */
  originHost: string;
  /** Writes waiting for the next group commit (lib/services/events.ts). */
  writeQueue?: unknown;
  /** The my_turn waits with claim on this instance, by room (lib/services/turns.ts). */
  claimWaits?: unknown;
  /** Derived per-room state, keyed by the room head it was built from. */
  caches: Caches;
  /** The room rows the read paths use, kept true by the notifier (lib/services/cache.ts). */
  roomRows: RoomRows;
  /** The secret turn lease tokens are derived from (from the server key: the same on every instance). */
  leaseSecret: Buffer;
  /** The LLM arbiter of these services (lib/arbiter: created on first use). */
  arbiter?: unknown;
  /** This process's name in job leases (background work runs on one instance at a time). */
  instanceId: string;
  /**
   * Run inside the transaction of every append, after the event is written and before commit
   * (the webhook outbox writes its delivery rows here, so a crash loses none).
   */
  appendHooks: AppendHook[];
}

export type AppendHook = (tx: StoreWriter & { readonly now: string }, event: LogEvent, room: RoomRow) => Promise<void>;

/** Who is asking and from where: the adapters (REST, MCP, pages) fill this in. */
export interface Caller {
  ip: string;
  /** Origin used in URLs we print: PARLEY_PUBLIC_URL, else an allowed request Host, else the listen address (lib/config/origin.ts). */
  origin: string;
}

/** The clock's time as ISO 8601; the string of the last millisecond asked for is kept (a busy server asks many times in one). */
let lastIso = { ms: Number.NaN, iso: "" };
export function isoNow(svc: Services): string {
  const ms = svc.clock.now();
  if (ms !== lastIso.ms) lastIso = { ms, iso: new Date(ms).toISOString() };
  return lastIso.iso;
}

/** The room lifetime settings, as the room rules take them. */
export const roomLife = (svc: Services) => ({ idleTtlMs: svc.config.roomIdleTtlMs, maxTtlMs: svc.config.roomMaxTtlMs });

/** "No upper bound" for store reads that take a limit. */
export const ALL = Number.MAX_SAFE_INTEGER;
