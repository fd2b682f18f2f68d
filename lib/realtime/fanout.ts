// One read per room per head move, shared by all the room's live streams. A stream that has caught
// up with the room is "live": the room's feed reads the new frames once and writes them to every
// live stream in one pass. A stream that is behind (it resumed from an old cursor, or its client
// reads slowly and its buffer filled) reads on from its own cursor, through the same frame cache,
// until it reaches the feed again, and rejoins it. Every stream keeps its own cursor and sends only
// frames past it, so neither path can skip or repeat an event.
import { requireRoom } from "../services/access";
import type { Services } from "../services/context";
import type { Frame } from "./feed";
import { ROOM_GONE } from "./notifier";

/** Where a stream writes: a Node response (server.ts) or a ReadableStream's controller. */
export interface Sink {
  /** Bytes it takes now before it is full (0 or less: wait for `resume`, which it promises to call). */
  room(): number;
  /** Queues bytes; false once it is full (wait for `resume`, which it promises to call). */
  write(bytes: Uint8Array): boolean;
  /** Sends what the writes since the last flush queued, now (one write to the socket for all of them). */
  flush(): void;
  /** Ends the response (the room is gone, or the store failed: the client resumes with Last-Event-ID). */
  end(): void;
}

/** Frames a lagging stream reads at a time, at most (a frame of a long message is tens of KiB). */
const PAGE = 16;
/** Frames the feed reads at a time: a group commit into one room moves its head by up to 64. */
const FEED_PAGE = 64;
/** The ping's re-read (a wake-up lost on the way) runs once per room in this time, however many streams ping. */
const POKE_MS = 1_000;

const feedsBySvc = new WeakMap<Services, Map<string, RoomFeed>>();

/** The feed of `room`, made on its first stream and dropped with its last. */
function feedOf(svc: Services, room: string): RoomFeed {
  let feeds = feedsBySvc.get(svc);
  if (!feeds) feedsBySvc.set(svc, (feeds = new Map()));
  let feed = feeds.get(room);
  if (!feed) feeds.set(room, (feed = new RoomFeed(svc, room, () => feeds.delete(room))));
  return feed;
}

/** Open feeds (rooms with streams) of a Services; for tests. */
export function feedCount(svc: Services): number {
  return feedsBySvc.get(svc)?.size ?? 0;
}

export interface WatchOptions {
  /** The agentKey of `mentioning=`: only frames addressed to that agent are sent (the cursor moves past the others). */
  addressedTo?: string;
  pingMs: number;
  ping: Uint8Array;
}

/**
 * Streams the room's frames after `since` to `sink` until `stop()` (the client left) or the room
 * ends. `resume()` is to be called when the sink has room again (a drained socket, a pull).
 */
export function watchRoom(svc: Services, room: string, since: number, sink: Sink, opts: WatchOptions): { resume(): void; stop(): void } {
  const watcher = new Watcher(feedOf(svc, room), sink, since, opts);
  watcher.start();
  return { resume: () => watcher.catchUp(), stop: () => watcher.close(false) };
}

class RoomFeed {
  readonly watchers = new Set<Watcher>();
  /** The streams at the feed's position: they get each new frame as the feed reads it. */
  readonly live = new Set<Watcher>();
  /** Every frame up to `at` has been sent to every live stream (meaningful while one is live). */
  at = 0;
  /** The highest head heard of (wake-ups); the feed reads while it is behind it. */
  private target = 0;
  /** Wake-ups that raised the target, counted: one during a read means that read may predate its commit. */
  private raised = 0;
  private running = false;
  private scheduled = false;
  private lastPoke = 0;
  private checking = false;
  private checkAgain = false;

  constructor(
    readonly svc: Services,
    readonly room: string,
    private readonly drop: () => void,
  ) {}

  add(w: Watcher): void {
    this.watchers.add(w);
  }

  remove(w: Watcher): void {
    this.watchers.delete(w);
    this.live.delete(w);
    if (this.watchers.size === 0) this.drop();
  }

  /**
   * A stream that read to the end of the room asks to join: it may when nobody is live (the feed
   * starts at its cursor) or when it is at or past the feed's position. False: it is behind, read on.
   */
  join(w: Watcher): boolean {
    if (this.live.size === 0) this.at = w.cursor;
    else if (w.cursor < this.at) return false;
    this.live.add(w);
    w.live = true;
    if (this.at < this.target) this.schedule();
    return true;
  }

  /** The room's head moved to `seq` (a commit here, or on another instance). */
  wake(seq: number): void {
    if (seq === ROOM_GONE) return this.checkAlive();
    if (seq <= this.target) return;
    this.target = seq;
    this.raised++;
    if (this.live.size > 0) this.schedule();
  }

  /** A ping: read past the feed's position even without a wake-up (one that was lost), at most once a second. */
  poke(): void {
    const now = performance.now();
    if (now - this.lastPoke < POKE_MS) return;
    this.lastPoke = now;
    this.target = Math.max(this.target, this.at + 1);
    if (this.live.size > 0) this.schedule();
  }

  /**
   * Ends every stream of a room that was deleted or expired: one check for all of them, and one
   * more after it when asked meanwhile (a deletion during a ping's check must not be missed).
   */
  checkAlive(): void {
    if (this.checking) return void (this.checkAgain = true);
    this.checking = true;
    this.checkAgain = false;
    const settle = () => {
      this.checking = false;
      if (this.checkAgain && this.watchers.size > 0) this.checkAlive();
    };
    requireRoom(this.svc, this.room).then(settle, () => {
      for (const w of [...this.watchers]) w.close(true);
      settle();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.running) return;
    this.scheduled = true;
    // After the commit's listeners have all run: every wake of this tick is one read.
    queueMicrotask(() => {
      this.scheduled = false;
      void this.run();
    });
  }

  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.live.size > 0 && this.at < this.target) {
        const raised = this.raised;
        const frames = await this.svc.frames.read(this.room, this.at, FEED_PAGE);
        if (frames.length === 0) {
          // Woken meanwhile: this read may have begun before that commit; read again.
          if (this.raised !== raised) continue;
          // Nothing past the position (a ping's re-read found nothing new): wait for the next wake-up.
          this.target = this.at;
          break;
        }
        for (const w of this.live) {
          if (!w.send(frames)) {
            // Full: it leaves the feed and reads on by itself once its client has read.
            this.live.delete(w);
            w.live = false;
          }
        }
        this.at = Math.max(this.at, frames.at(-1)!.seq);
      }
    } catch {
      // The store went away: the live streams end, their clients resume with Last-Event-ID.
      for (const w of [...this.live]) w.close(true);
    } finally {
      this.running = false;
    }
    if (this.live.size > 0 && this.at < this.target) this.schedule();
  }
}

class Watcher {
  live = false;
  cursor: number;
  private closed = false;
  private reading = false;
  private unsubscribe = () => {};
  private ping: ReturnType<typeof setInterval> | undefined;
  private readonly sent = { frames: 0, bytes: 0 };

  constructor(
    private readonly feed: RoomFeed,
    private readonly sink: Sink,
    since: number,
    private readonly opts: WatchOptions,
  ) {
    this.cursor = since;
  }

  start(): void {
    const { feed } = this;
    feed.add(this);
    // Each stream listens itself, so that the notifier counts it (streamCount, /metrics).
    this.unsubscribe = feed.svc.notifier.subscribe(feed.room, (seq) => feed.wake(seq));
    // The ping also notices a room that expired while nothing was said.
    this.ping = setInterval(() => {
      if (this.closed) return;
      // A stream with bytes still queued needs no ping to stay open.
      if (this.sink.room() > 0) {
        this.sink.write(this.opts.ping);
        this.sink.flush();
      }
      feed.checkAlive();
      if (this.live) feed.poke();
      else this.catchUp();
    }, this.opts.pingMs);
    this.ping.unref?.(); // an open stream is no reason to keep a process alive
    requireRoom(feed.svc, feed.room).then(
      () => this.catchUp(),
      () => this.close(true),
    );
  }

  /**
   * Sends the frames past its cursor that it keeps, in one write to the socket. False when it
   * stopped short (the sink filled up) or the sink is still full once flushed: it waits for `resume`.
   */
  send(frames: readonly Frame[]): boolean {
    const { addressedTo } = this.opts;
    let full = false;
    for (const frame of frames) {
      if (frame.seq <= this.cursor) continue;
      this.cursor = frame.seq;
      if (addressedTo !== undefined && !frame.addressed.includes(addressedTo)) continue;
      this.sent.frames++;
      this.sent.bytes += frame.bytes.byteLength;
      if ((full = !this.sink.write(frame.bytes))) break;
    }
    this.sink.flush();
    return !full && this.sink.room() > 0;
  }

  /** Reads on from its own cursor (while the sink has room) until it reaches the feed, then joins it. */
  catchUp(): void {
    if (this.closed || this.live || this.reading) return;
    this.reading = true;
    this.readOn()
      .catch(() => this.close(true)) // the store went away: the client reconnects with Last-Event-ID
      .finally(() => (this.reading = false));
  }

  private async readOn(): Promise<void> {
    const { feed } = this;
    let behind = false;
    for (;;) {
      if (this.closed) return;
      const room = this.sink.room();
      if (room <= 0) return; // resume() once the client has read
      // As many frames as the sink has room for, by the size of those sent so far: a page of
      // small frames, one or two of large ones (none read only to be dropped).
      const average = this.sent.frames > 0 ? this.sent.bytes / this.sent.frames : 1024;
      const frames = await feed.svc.frames.read(feed.room, this.cursor, Math.max(1, Math.min(PAGE, Math.ceil(room / average))));
      if (this.closed) return;
      if (frames.length === 0) {
        if (feed.join(this)) return;
        // The feed is ahead of what this read saw (it began before a commit): read again, once;
        // twice nothing behind the feed (the room's events are gone) waits for the ping.
        if (behind) return;
        behind = true;
        continue;
      }
      behind = false;
      if (!this.send(frames)) return;
    }
  }

  /** Stops streaming; `end` also ends the response (the client did not leave by itself). */
  close(end: boolean): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    clearInterval(this.ping);
    this.feed.remove(this);
    if (end) this.sink.end();
  }
}
