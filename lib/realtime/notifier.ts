/**
 * What a wait listens to for its caller going away: a request's AbortSignal, or anything that
 * reports "abort" as one does (api/http.ts cancelOf: the answer's connection closing, without an
 * AbortController).
 */
export interface Cancel {
  readonly aborted: boolean;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/** Published for a room that was deleted or swept: its streams and long-polls end. */
export const ROOM_GONE = Number.MAX_SAFE_INTEGER;

/**
 * Wakes long-polls and SSE streams when a room's log grows. It carries only the new head seq:
 * every reader re-reads from its own cursor, so a missed wake-up can delay but never lose an event.
 */
export class Notifier {
  private readonly listeners = new Map<string, Set<(seq: number) => void>>();
  private readonly everyRoom = new Set<(room: string, seq: number) => void>();

  private readonly onMissed = new Set<() => void>();

  /** Hears that commits may have gone unheard (missed(), below). */
  subscribeMissed(listener: () => void): () => void {
    this.onMissed.add(listener);
    return () => void this.onMissed.delete(listener);
  }

  /** The commits of other instances may have gone unheard (their LISTEN connection dropped, or is back). */
  missed(): void {
    for (const listener of this.onMissed) listener();
  }

  /** Hears every room's appends (the premium arbiter's worker); not counted as a stream. */
  subscribeAll(listener: (room: string, seq: number) => void): () => void {
    this.everyRoom.add(listener);
    return () => void this.everyRoom.delete(listener);
  }

  subscribe(room: string, listener: (seq: number) => void): () => void {
    let set = this.listeners.get(room);
    if (!set) this.listeners.set(room, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(room) === set) this.listeners.delete(room);
    };
  }

  /** Whether a stream or long-poll waits on the room now. */
  listening(room: string): boolean {
    return this.listeners.has(room);
  }

  publish(room: string, seq: number): void {
    for (const listener of this.everyRoom) listener(room, seq);
    const set = this.listeners.get(room);
    if (!set) return;
    for (const listener of [...set]) listener(seq);
  }

  /** Long-polls woken by the commits of this turn of the event loop, resumed together on the next. */
  private woken: (() => void)[] = [];

  /**
   * Resolves with true when the room passes `afterSeq`, false on timeout or abort. It listens
   * before it reads the head, so a commit between the two cannot be missed.
   *
   * Woken by a commit, it resolves on the next turn of the event loop, with every other wait that
   * commit woke: the commit's fan-out to the room's SSE streams (lib/realtime/fanout.ts) runs in
   * promise jobs, and a hundred long-polls reading their pages in the same jobs would hold every
   * stream's write behind them. Resumed together, their answers still leave in one pass.
   */
  waitFor(room: string, afterSeq: number, headSeq: () => Promise<number>, timeoutMs: number, signal?: Cancel): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      let settled = false;
      const done = (value: boolean, later = false) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener("abort", onAbort);
        if (!later) return resolve(value);
        if (this.woken.push(() => resolve(value)) === 1) {
          setImmediate(() => {
            const woken = this.woken;
            this.woken = [];
            for (const wake of woken) wake();
          });
        }
      };
      const onAbort = () => done(false);
      const unsubscribe = this.subscribe(room, (seq) => seq > afterSeq && done(true, true));
      const timer = timeoutMs > 0 ? setTimeout(() => done(false), timeoutMs) : undefined;
      signal?.addEventListener("abort", onAbort, { once: true });
      headSeq().then(
        (head) => (head > afterSeq || timeoutMs <= 0) && done(head > afterSeq),
        () => done(false),
      );
    });
  }

  /** The rooms someone is waiting on (for a re-read after a lost LISTEN connection). */
  rooms(): string[] {
    return [...this.listeners.keys()];
  }

  get streamCount(): number {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }
}
