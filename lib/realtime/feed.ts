import { eventFromRow } from "../store/rows";
import { addressedKeys, messageFromEvent } from "../domain/message";
import { agentKey } from "../domain/names";
import type { Services } from "../services/context";
import type { EventRow } from "../store/types";

export interface Frame {
  seq: number;
  /** A complete SSE frame (id, event and data lines), UTF-8 encoded once. */
  bytes: Uint8Array;
  /**
   * The agents (agentKeys) the event is for, what `mentioning=` streams keep: a message's addressees
   * (its mentions, its author excepted), the agent whose turn a turn.opened opens.
   */
  addressed: readonly string[];
}

const encoder = new TextEncoder();

const MAX_CACHED_ROOMS = 256;
const MAX_FRAMES_PER_ROOM = 256;
/** Frames of long messages are tens of KiB: the cache is bounded in bytes too. */
const MAX_CACHED_BYTES = 32 * 1024 * 1024;

/**
 * Formats a room's events as SSE frames, once per event however many watchers read it: a post
 * into a room with 1,000 watchers costs one query and one JSON.stringify, not a thousand.
 * Readers still read from their own cursor, so the cache only saves work and never changes what
 * is delivered.
 */
export class FrameCache {
  private readonly rooms = new Map<string, Map<number, Frame>>();
  /**
   * Store reads in flight, by room and cursor: the watchers of a room woken by one commit all miss
   * the cache at the same cursor, and share one query instead of each sending its own. A room's
   * are forgotten when its head moves: a read that began before a commit may not see it, and one
   * asked for after the commit's wake-up must.
   */
  private readonly loading = new Map<string, Map<number, Promise<Frame[]>>>();
  private bytes = 0;
  /** The head of the last commit whose frames were made here, by room (see committed). */
  private readonly committedHeads = new Map<string, number>();

  constructor(private readonly svc: Services) {
    svc.notifier.subscribeAll((room) => this.loading.delete(room));
  }

  /**
   * Frames after `since`, oldest first, at most `limit`; fewer when the cache holds them up to this
   * instance's last commit to the room (its readers read on while they know of a later head).
   */
  async read(room: string, since: number, limit = 500): Promise<Frame[]> {
    const cached = this.rooms.get(room);
    const out: Frame[] = [];
    for (let seq = since + 1; cached && out.length < limit; seq++) {
      const frame = cached.get(seq);
      if (!frame) break;
      out.push(frame);
    }
    // Up to the head of this instance's last commit to the room, the cache has it all: the caller
    // reads again from there if it knows of more (another instance's commit).
    if (out.length === limit || (out.length > 0 && out.at(-1)!.seq === this.committedHeads.get(room))) return out;
    const from = out.at(-1)?.seq ?? since;
    const loaded = await this.load(room, from, limit - out.length);
    for (let i = 0; i < loaded.length && out.length < limit; i++) out.push(loaded[i]!);
    return out;
  }

  /** Frames after `from` from the store (up to `limit`), one query for every reader at that cursor. */
  private load(room: string, from: number, limit: number): Promise<Frame[]> {
    let reads = this.loading.get(room);
    let pending = reads?.get(from);
    if (!pending) {
      if (!reads) this.loading.set(room, (reads = new Map()));
      const own = (pending = this.svc.store.listEvents(room, from, limit).then((rows) => rows.map((row) => this.remember(room, toFrame(row)))));
      reads.set(from, own);
      const done = () => {
        const now = this.loading.get(room);
        if (now?.get(from) !== own) return;
        now.delete(from);
        if (now.size === 0) this.loading.delete(room);
      };
      own.then(done, done);
    }
    return pending;
  }

  /**
   * A commit's events, from the commit itself (called once it has committed, before its readers
   * wake): the rooms being read now (cached, with someone waiting on them) get their frames here,
   * so their streams send them without a store read. It never throws: the write has committed,
   * and a room whose frames could not be made here is forgotten (its streams read it back).
   */
  committed(heads: ReadonlyMap<string, { rows: readonly EventRow[] }>): void {
    for (const [room, { rows }] of heads) {
      if (!this.rooms.has(room) || !this.svc.notifier.listening(room)) continue;
      try {
        for (const row of rows) this.remember(room, toFrame(row));
        if (rows.length > 0 && this.rooms.has(room)) this.committedHeads.set(room, rows.at(-1)!.seq);
      } catch (err) {
        this.forget(room);
        console.error("parley: the frames of a commit could not be cached; its streams read it back:", err);
      }
    }
  }

  forget(room: string): void {
    for (const frame of this.rooms.get(room)?.values() ?? []) this.bytes -= frame.bytes.byteLength;
    this.rooms.delete(room);
    this.committedHeads.delete(room);
  }

  /** Bytes of the frames cached now. */
  get cachedBytes(): number {
    return this.bytes;
  }

  private remember(room: string, frame: Frame): Frame {
    let frames = this.rooms.get(room);
    if (!frames) {
      if (this.rooms.size >= MAX_CACHED_ROOMS) this.forget(this.rooms.keys().next().value!);
      this.rooms.set(room, (frames = new Map()));
    }
    if (!frames.has(frame.seq)) this.bytes += frame.bytes.byteLength;
    frames.set(frame.seq, frame);
    if (frames.size > MAX_FRAMES_PER_ROOM) this.dropOldest(frames);
    // Over the byte bound: the least recently added rooms go first, then this room's oldest frames.
    if (this.bytes > MAX_CACHED_BYTES) {
      for (const other of [...this.rooms.keys()]) {
        if (this.bytes <= MAX_CACHED_BYTES) break;
        if (other !== room) this.forget(other);
      }
      while (this.bytes > MAX_CACHED_BYTES && frames.size > 1) this.dropOldest(frames);
    }
    return frame;
  }

  private dropOldest(frames: Map<number, Frame>): void {
    const [seq, oldest] = frames.entries().next().value!;
    this.bytes -= oldest.bytes.byteLength;
    frames.delete(seq);
  }
}

/** The JSON an SSE reader gets: the log event, its leaf hash and, for messages, the message. */
export function eventData(row: EventRow) {
  const event = eventFromRow(row);
  return {
    ...event,
    hash: row.leafHash,
    ...(event.type === "message.posted" ? { message: messageFromEvent(event, row.leafHash) } : {}),
  };
}

function addressedBy(data: ReturnType<typeof eventData>): string[] {
  if (data.message) return addressedKeys(data.message);
  // The turn-opened notice: its payload names the agent whose turn it is (TURN_EVENTS).
  if (data.type === "turn.opened" && typeof data.payload.agent_id === "string") return [agentKey(data.payload.agent_id)];
  return [];
}

/**
 * An event stream is read in terminals (`curl -N`): DEL, the C1 controls and the line and paragraph
 * separators in agent text go out as JSON escapes (the same JSON), never as raw characters.
 */
const TERMINAL_CONTROLS = /[\u007f-\u009f\u2028\u2029]/g;
export const escapeControls = (json: string) => json.replace(TERMINAL_CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

function toFrame(row: EventRow): Frame {
  const data = eventData(row);
  return { seq: row.seq, bytes: encoder.encode(`id: ${row.seq}\nevent: ${row.type}\ndata: ${escapeControls(JSON.stringify(data))}\n\n`), addressed: addressedBy(data) };
}
