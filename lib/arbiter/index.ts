/**
 * The arbiter of a process (SPEC 5.3): one extraction at a time per room, shared by
 * `POST /context/refresh` and the premium rooms' background worker.
 *
 * Premium rooms: an append (heard through the notifier) that leaves messages to extract arms a
 * timer of PARLEY_ARBITER_COALESCE; messages that arrive before it fires go into the same run. A
 * run never overlaps another in the same room; appends during a run arm the next timer when it
 * ends, with the window counted from the first of them. After an outage the room is tried again
 * after a growing delay (30 s … 5 min), or sooner by POST /context/refresh.
 *
 * Across instances a run holds the job lease "arbiter:<room>": one extraction per room at a time in
 * the whole fleet. A refresh waits for another instance's run; a background run leaves the room to
 * it (that instance hears the appends too and runs again). A crashed holder's lease runs out.
 */
import { ParleyError } from "../errors";
import type { Services } from "../services/context";
import { getContext } from "../services/ledger";
import { requireOwner, requireRoom } from "../services/access";
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
/** How long a run may hold a room's lease, and how long a refresh waits for another instance's run. */
const LEASE_TTL_MS = 10 * 60_000;
const LEASE_POLL_MS = 200;

/** Another instance is extracting this room (a background run leaves it to that one). */
class Busy extends Error {}

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
  run(room: string, opts: { full: boolean; wait?: boolean }): Promise<ExtractionSummary> {
    if (this.stopped) return Promise.reject(new ParleyError("arbiter_unavailable", "The server is shutting down; try again in a moment."));
    const st = this.state(room);
    st.queued++;
    const result = st.tail.then(() =>
      this.exclusive(room, opts.wait ?? true, () => extractRoom(this.svc, room, opts, { providers: this.providers, config: this.svc.config.arbiter, signal: this.abort.signal })),
    );
    st.tail = result.catch(() => undefined).finally(async () => {
      st.queued--;
      await this.afterRun(room, st).catch((err: unknown) => this.report(err));
    });
    return result;
  }

  /** Runs fn holding the room's lease across instances; without `wait`, Busy when another holds it. */
  private async exclusive<T>(room: string, wait: boolean, fn: () => Promise<T>): Promise<T> {
    const { jobs } = this.svc.store;
    const name = `arbiter:${room}`;
    const giveUp = Date.now() + LEASE_TTL_MS;
    while (!(await jobs.leaseJob(name, this.svc.instanceId, LEASE_TTL_MS, Date.now()))) {
      if (!wait || this.stopped || Date.now() > giveUp) throw new Busy();
      await new Promise((resolve) => setTimeout(resolve, LEASE_POLL_MS));
    }
    try {
      return await fn();
    } finally {
      await jobs.releaseJob(name, this.svc.instanceId).catch(() => {});
    }
  }

  /** Appends heard during the runs of a premium room arm its next run (whoever started this one). */
  private async afterRun(room: string, st: RoomState): Promise<void> {
    try {
      if (st.queued > 0 || st.dirtyAt === undefined || this.stopped) return;
      const heardAt = st.dirtyAt;
      st.dirtyAt = undefined;
      // Messages that arrived during the run have waited since then: the window counts from there.
      if ((await this.isPremium(room)) && (await this.hasPending(room))) this.schedule(room, Math.max(0, this.svc.config.arbiter.coalesceMs - (Date.now() - heardAt)));
    } finally {
      this.forget(room);
    }
  }

  /**
   * A background step that failed. Once the server is closing, a step still running finds the
   * store closed under it (a post heard just before the close): that is no fault to report.
   */
  private report(err: unknown): void {
    if (!this.stopped) console.error("arbiter worker:", err);
  }

  /** Starts the premium rooms' background worker. */
  start(): void {
    if (this.unsubscribe || !this.configured) return;
    this.unsubscribe = this.svc.notifier.subscribeAll((room, seq) => {
      this.heard(room, seq).catch((err: unknown) => this.report(err));
    });
  }

  private async isPremium(room: string): Promise<boolean> {
    let premium = this.premium.get(room);
    if (premium === undefined) {
      const row = await this.svc.store.getRoom(room);
      if (!row) return false;
      premium = row.protocolMode === "premium";
      if (this.premium.size >= PREMIUM_CACHE_MAX) this.premium.clear();
      this.premium.set(room, premium);
    }
    return premium;
  }

  /** An append to `room` (heard after its commit, on this instance or another). */
  private async heard(room: string, seq: number): Promise<void> {
    if (this.stopped || (seq !== ROOM_GONE && !(await this.isPremium(room)))) return;
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
    else if (!st.timer && (await this.hasPending(room))) this.schedule(room, this.svc.config.arbiter.coalesceMs);
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

  private async hasPending(room: string): Promise<boolean> {
    const row = await this.svc.store.getRoom(room);
    return row !== undefined && (await this.svc.store.listMessages(room, row.arbiterWatermark, 1)).length > 0;
  }

  private async background(room: string): Promise<void> {
    try {
      await this.run(room, { full: false, wait: false });
      this.outages.delete(room);
    } catch (err) {
      if (err instanceof Aborted || err instanceof Busy || this.stopped) return;
      if (err instanceof ParleyError && (err.code === "room_not_found" || err.code === "room_expired")) {
        this.premium.delete(room);
        this.outages.delete(room);
        return this.forget(room);
      }
      // An outage is already recorded on the room (last_extraction_error); anything else is a bug.
      if (!(err instanceof ParleyError && err.code === "arbiter_failed")) console.error("arbiter worker:", err);
      const outages = this.outages.get(room) ?? 0;
      this.outages.set(room, outages + 1);
      if (await this.hasPending(room)) this.schedule(room, Math.min(OUTAGE_RETRY_MAX_MS, OUTAGE_RETRY_MS * 2 ** outages));
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

/** The arbiter of these services (created on first use, kept on the services). */
export function arbiterOf(svc: Services): Arbiter {
  return (svc.arbiter ??= new Arbiter(svc)) as Arbiter;
}

/**
 * POST /context/refresh: extracts what is new (or everything, for the room owner, with full) and
 * answers with the context and what the run did. Nothing new → no LLM call.
 */
export async function refreshContext(svc: Services, rawRoomId: string, opts: { full: boolean; bearer?: string }) {
  const room = await requireRoom(svc, rawRoomId);
  const arbiter = arbiterOf(svc);
  if (!arbiter.configured) {
    throw new ParleyError("arbiter_unavailable", "No LLM arbiter is configured on this server, so the ledger is not extracted from the chat. Write threads and revisions through the /claims routes instead.");
  }
  if (opts.full) requireOwner(svc, room, opts.bearer);
  const extraction = await arbiter.run(room.uuid, { full: opts.full });
  return { ...(await getContext(svc, room.uuid)), extraction };
}
