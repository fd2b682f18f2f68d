/**
 * The arbiter of a process (SPEC 5.3): one extraction at a time per room, shared by
 * `POST /context/refresh` and the premium rooms' background worker.
 *
 * Premium rooms: an append (heard through the notifier) that leaves messages to extract arms a
 * timer of PARLEY_ARBITER_COALESCE; messages that arrive before it fires go into the same run. A
 * run never overlaps another in the same room; appends during a run arm the next timer when it
 * ends, with the window counted from the first of them. After an outage the room is tried again
 * after a growing delay (30 s … 5 min), or sooner by POST /context/refresh.
 */
import { ParleyError } from "../errors";
import type { Services } from "../services/context";
import { getContext } from "../services/ledger";
import { requireOwner, requireRoom } from "../services/rooms";
import { Aborted, configuredProviders, type LlmProvider } from "./client";
import { ROOM_GONE } from "../realtime/notifier";
import type { ExtractionSummary } from "../schemas/arbiter-summary";
import { extractRoom } from "./extract";

interface RoomState {
  /** The tail of this room's queue of runs. */
  tail: Promise<unknown>;
  queued: number;
  timer?: ReturnType<typeof setTimeout>;
  /** When an append was heard during a run (real time), or undefined. */
  dirtyAt?: number;
}

const OUTAGE_RETRY_MS = 30_000;
const OUTAGE_RETRY_MAX_MS = 5 * 60_000;
const PREMIUM_CACHE_MAX = 10_000;

export class Arbiter {
  private readonly rooms = new Map<string, RoomState>();
  /** Whether a room is premium: fixed at creation, so it is cached. */
  private readonly premium = new Map<string, boolean>();
  /** Consecutive outages per premium room: the background worker backs off. */
  private readonly outages = new Map<string, number>();
  private readonly abort = new AbortController();
  private unsubscribe?: () => void;
  private stopped = false;

  constructor(
    private readonly svc: Services,
    readonly providers: LlmProvider[] = configuredProviders(svc.config.arbiter.providers, svc.config.arbiter.timeoutMs),
  ) {}

  get configured(): boolean {
    return this.providers.length > 0;
  }

  private state(room: string): RoomState {
    let st = this.rooms.get(room);
    if (!st) this.rooms.set(room, (st = { tail: Promise.resolve(), queued: 0 }));
    return st;
  }

  private forget(room: string): void {
    const st = this.rooms.get(room);
    if (st && st.queued === 0 && !st.timer) this.rooms.delete(room);
  }

  /** Runs an extraction once every earlier run of this room has finished. */
  run(room: string, opts: { full: boolean }): Promise<ExtractionSummary> {
    if (this.stopped) return Promise.reject(new ParleyError("arbiter_unavailable", "The server is shutting down; try again in a moment."));
    const st = this.state(room);
    st.queued++;
    const result = st.tail.then(() => extractRoom(this.svc, room, opts, { providers: this.providers, config: this.svc.config.arbiter, signal: this.abort.signal }));
    st.tail = result.catch(() => undefined).finally(() => {
      st.queued--;
      this.afterRun(room, st);
    });
    return result;
  }

  /** Appends heard during the runs of a premium room arm its next run (whoever started this one). */
  private afterRun(room: string, st: RoomState): void {
    try {
      if (st.queued > 0 || st.dirtyAt === undefined || this.stopped) return;
      const heardAt = st.dirtyAt;
      st.dirtyAt = undefined;
      // Messages that arrived during the run have waited since then: the window counts from there.
      if (this.isPremium(room) && this.hasPending(room)) this.schedule(room, Math.max(0, this.svc.config.arbiter.coalesceMs - (Date.now() - heardAt)));
    } finally {
      this.forget(room);
    }
  }

  /** Starts the premium rooms' background worker. */
  start(): void {
    if (this.unsubscribe || !this.configured) return;
    this.unsubscribe = this.svc.notifier.subscribeAll((room, seq) => {
      try {
        this.heard(room, seq);
      } catch (err) {
        console.error("arbiter worker:", err);
      }
    });
  }

  private isPremium(room: string): boolean {
    let premium = this.premium.get(room);
    if (premium === undefined) {
      const row = this.svc.store.getRoom(room);
      if (!row) return false;
      premium = row.protocolMode === "premium";
      if (this.premium.size >= PREMIUM_CACHE_MAX) this.premium.clear();
      this.premium.set(room, premium);
    }
    return premium;
  }

  /** An append to `room` (called synchronously after its commit). */
  private heard(room: string, seq: number): void {
    if (this.stopped || !this.isPremium(room)) return;
    const st = this.state(room);
    if (seq === ROOM_GONE) {
      // Deleted or expired: nothing more to extract.
      clearTimeout(st.timer);
      st.timer = undefined;
      this.premium.delete(room);
      this.forget(room);
      return;
    }
    if (st.queued > 0) st.dirtyAt ??= Date.now();
    // The window opens with the first message to extract, not with any append (room.created, a thread opened by API).
    else if (!st.timer && this.hasPending(room)) this.schedule(room, this.svc.config.arbiter.coalesceMs);
    else this.forget(room);
  }

  private schedule(room: string, delayMs: number): void {
    const st = this.state(room);
    if (this.stopped || st.timer) return;
    st.timer = setTimeout(() => {
      st.timer = undefined;
      void this.background(room);
    }, delayMs);
    st.timer.unref?.();
  }

  private hasPending(room: string): boolean {
    const row = this.svc.store.getRoom(room);
    return row !== undefined && this.svc.store.listMessages(room, row.arbiterWatermark, 1).length > 0;
  }

  private async background(room: string): Promise<void> {
    try {
      await this.run(room, { full: false });
      this.outages.delete(room);
    } catch (err) {
      if (err instanceof Aborted || this.stopped) return;
      if (err instanceof ParleyError && (err.code === "room_not_found" || err.code === "room_expired")) {
        this.premium.delete(room);
        this.outages.delete(room);
        return this.forget(room);
      }
      // An outage is already recorded on the room (last_extraction_error); anything else is a bug.
      if (!(err instanceof ParleyError && err.code === "arbiter_failed")) console.error("arbiter worker:", err);
      const outages = this.outages.get(room) ?? 0;
      this.outages.set(room, outages + 1);
      if (this.hasPending(room)) this.schedule(room, Math.min(OUTAGE_RETRY_MAX_MS, OUTAGE_RETRY_MS * 2 ** outages));
    }
  }

  /** Stops timers and in-flight calls and waits for running extractions to end. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.abort.abort();
    const tails = [...this.rooms.values()].map((st) => {
      clearTimeout(st.timer);
      st.timer = undefined;
      return st.tail;
    });
    await Promise.allSettled(tails);
    this.rooms.clear();
  }
}

const arbiters = new WeakMap<Services, Arbiter>();

/** The process's arbiter for these services (created on first use). */
export function arbiterOf(svc: Services): Arbiter {
  let arbiter = arbiters.get(svc);
  if (!arbiter) arbiters.set(svc, (arbiter = new Arbiter(svc)));
  return arbiter;
}

/**
 * POST /context/refresh: extracts what is new (or everything, for the room owner, with full) and
 * answers with the context and what the run did. Nothing new → no LLM call.
 */
export async function refreshContext(svc: Services, rawRoomId: string, opts: { full: boolean; bearer?: string }) {
  const room = requireRoom(svc, rawRoomId);
  const arbiter = arbiterOf(svc);
  if (!arbiter.configured) {
    throw new ParleyError("arbiter_unavailable", "No LLM arbiter is configured on this server, so the ledger is not extracted from the chat. Write threads and revisions through the /claims routes instead.");
  }
  if (opts.full) requireOwner(svc, room, opts.bearer);
  const extraction = await arbiter.run(room.uuid, { full: opts.full });
  return { ...getContext(svc, room.uuid), extraction };
}
