import { bytesToBase64, bytesToHex, utf8 } from "../log/bytes";
import { checkpointBody, checkpointNote, signCheckpoint } from "../log/checkpoint";
import { eventLeafHash, type EventSig, type LogEvent } from "../log/event";
import { frontierAppend, frontierFromText, frontierRoot, frontierToText, type Frontier } from "../log/merkle";
import { eventProblem, type EventType } from "../domain/catalogue";
import { eventToRow } from "../store/rows";
import { RetryWithSavepoints } from "../store/repository";
import type { EventRow, RoomRow, StoreWriter, WriteOptions } from "../store/types";
import type { SignTicket } from "./signer-thread";
import { project, type Parts, type Projected } from "./projector";
import { isoNow, roomLife, type Services } from "./context";
import { expiresAt } from "../domain/room";
import { refuseSecrets } from "../domain/secrets";

export interface NewEvent {
  type: EventType;
  actor: string;
  payload: Record<string, unknown>;
  server?: Record<string, unknown>;
  sig?: EventSig;
}

/** The payload an agent sends and may sign: exactly the given fields, absent ones omitted. */
export function definedFields(obj: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined));
}

export interface Receipt {
  seq: number;
  leaf_hash: string;
  checkpoint: string;
}

export interface Appended {
  event: LogEvent;
  leafHash: string;
  receipt: Receipt;
  /** The room row after the append. */
  room: RoomRow;
  /** The projections the event changed (lib/services/projector.ts). */
  projected: Projected;
}

/**
 * The one function that appends to a room's log. It must run inside `write(svc, [room], …)`: the
 * room's lock serialises appends, so seq has no gaps and prev never forks. It checks the event
 * against the catalogue, extends the Merkle frontier (no rehash of the room), lets the projector
 * write the projections the event changes (`parts`: what the caller loaded of them) and moves the
 * head. The event row and the room's head are written, and the checkpoint signed, once per room
 * when the transaction's work is done (SPEC 4.3: one checkpoint per committed batch; the receipt
 * gets it then). Every event of one transaction carries the transaction's time (`tx.now`).
 */
export async function appendEvent(svc: Services, tx: Tx, room: RoomRow, input: NewEvent, parts: Parts = {}): Promise<Appended> {
  // What agents and the owner write; the arbiter only quotes text that was screened on its way in.
  if (input.actor !== "server" && input.actor !== "arbiter") refuseSecrets(input.payload);
  const seq = room.headSize + 1;
  const problem = eventProblem({ type: input.type, payload: input.payload, server: input.server ?? {} });
  if (problem) throw new Error(`appendEvent: ${problem}`); // a service built an event its kind refuses: a bug, not bad input
  const event: LogEvent = {
    v: 1,
    room: room.uuid,
    seq,
    ts: tx.now,
    type: input.type,
    actor: input.actor,
    payload: input.payload,
    server: input.server ?? {},
    prev: room.headLeaf,
    ...(input.sig ? { sig: input.sig } : {}),
  };
  const leaf = eventLeafHash(event);
  const leafHex = bytesToHex(leaf);
  // The frontier this transaction's appends left (kept parsed), else the room row's.
  const pending = tx.heads.get(room.uuid);
  const base = pending && pending.room.headSize === room.headSize ? pending.frontier : roomFrontier(svc, room);
  const frontier = frontierAppend(base, room.headSize, leaf);
  const row = eventToRow(event, leafHex, "");
  const receipt: Receipt = { seq, leaf_hash: leafHex, checkpoint: "" };
  tx.touch(room.uuid);
  const head = pending ?? { room, frontier, rows: [], receipts: [] };
  tx.heads.set(room.uuid, head);
  head.rows.push(row);
  head.receipts.push(receipt);
  const { patch, projected } = await project(tx, room, event, leafHex, parts);
  // What agents and the owner do keeps a room alive (messages, claims, heartbeats, votes); what the
  // server and the arbiter do on their own does not.
  const activity = input.actor === "server" || input.actor === "arbiter" ? {} : {
    lastActivityAt: event.ts,
    expiresAt: new Date(expiresAt(Date.parse(room.createdAt), Date.parse(event.ts), roomLife(svc))).toISOString(),
  };
  const after: RoomRow = {
    ...room,
    ...activity,
    ...patch,
    headSize: seq,
    headLeaf: leafHex,
  };
  head.room = after;
  head.frontier = frontier;
  for (const hook of svc.appendHooks) await hook(tx, event, after);
  return { event, leafHash: leafHex, receipt, room: after, projected };
}

/**
 * The Merkle frontiers of the rooms being written to, parsed, keyed by the room row's frontier
 * text: a row with the same text has the same frontier (never changed in place), whichever
 * transaction or instance wrote it. A batch's first append to a room then parses nothing.
 */
const frontiers = (svc: Services) => svc.caches.of<Frontier>("frontiers", 1024);

function roomFrontier(svc: Services, room: RoomRow): Frontier {
  return frontiers(svc).peek(room.uuid, room.frontier) ?? frontiers(svc).set(room.uuid, room.frontier, frontierFromText(room.frontier));
}

/** A room's appends in the open transaction, written and signed when its work is done. */
interface PendingHead {
  /**
   * The room row after the last append. Its root, frontier and checkpoint are set when the batch is
   * signed (one Merkle root per room per batch); until then they are the room's before the batch.
   */
  room: RoomRow;
  /** The Merkle frontier after the last append. */
  frontier: Frontier;
  rows: EventRow[];
  receipts: Receipt[];
  /** Its checkpoint's signature, asked for ahead (signAhead) for this frontier. */
  ahead?: { frontier: Frontier; root: Uint8Array; body: string; ticket: SignTicket; asked: number };
}

/**
 * A write transaction as the services see it: the store's writer plus the one time all its events
 * carry, and the heads it has moved (reads of the room row and its events inside the transaction
 * see them before they are written).
 */
export type Tx = StoreWriter & {
  readonly now: string;
  readonly heads: Map<string, PendingHead>;
  /** Keeps the room's pending head as it is now, for the open savepoint to put back if its write fails: call it before changing the head. */
  touch(room: string): void;
};

function txOn(svc: Services, w: StoreWriter): Tx {
  const heads = new Map<string, PendingHead>();
  // While a savepoint is open (group commit: one per queued write), how to put back each pending
  // head its write changes, in the order changed. A failed write leaves no pending append behind,
  // and a write pays for the heads it touches, not for every head of the batch.
  let undo: (() => void)[] | undefined;
  return Object.assign(Object.create(w) as StoreWriter, {
    now: isoNow(svc),
    heads,
    touch(uuid: string) {
      if (!undo) return;
      const head = heads.get(uuid);
      if (!head) return void undo.push(() => heads.delete(uuid));
      // Its room and frontier are replaced, never changed in place; its lists only grow.
      const { room, frontier } = head;
      const rows = head.rows.length;
      const receipts = head.receipts.length;
      undo.push(() => {
        Object.assign(head, { room, frontier });
        head.rows.length = rows;
        head.receipts.length = receipts;
      });
    },
    getRoom: async (uuid: string) => heads.get(uuid)?.room ?? (await w.getRoom(uuid)),
    listEvents: async (room: string, since: number, limit: number) => {
      const pending = heads.get(room)?.rows.filter((r) => r.seq > since) ?? [];
      return [...(await w.listEvents(room, since, limit)), ...pending].slice(0, limit);
    },
    savepoint: async <T>(fn: () => Promise<T>): Promise<T> => {
      const outer = undo;
      const mine: (() => void)[] = (undo = []);
      try {
        const value = await w.savepoint(fn);
        outer?.push(...mine); // still undone if the savepoint around it fails
        return value;
      } catch (err) {
        for (let i = mine.length - 1; i >= 0; i--) mine[i]!();
        throw err;
      } finally {
        undo = outer;
      }
    },
  });
}

/** Signatures asked for ahead so far, in order (signHeads waits for the last one only). */
let asked = 0;

/**
 * Asks for the checkpoint signature of a room the batch will append no more to, made on the
 * signer's thread while the batch writes its other rooms (the main thread saves the ~30 µs of an
 * Ed25519 signature). signHeads takes it if the head has not moved since.
 */
function signAhead(svc: Services, heads: Map<string, PendingHead>, room: string): void {
  const head = heads.get(room);
  if (!head) return;
  const root = frontierRoot(head.frontier);
  const body = checkpointBody(`${svc.originHost}/room/${room}`, head.room.headSize, root);
  head.ahead = { frontier: head.frontier, root, body, ticket: svc.key.signSoon(utf8(body)), asked: asked++ };
}

/**
 * How long a PostgreSQL batch of several rooms waits for the signer's thread. Its commit waits
 * for round trips anyway, and meanwhile the main thread serves other requests rather than making
 * the signatures the thread has not made yet (under the POST load about one in five: the thread
 * shares the two cores). SQLite commits within the event-loop turn: there nothing waits, and a
 * signature not ready is made on the spot.
 */
const SIGNER_WAIT_MS = 5;

/** Writes each moved room's events and head, with one signed checkpoint for the batch's last size. */
async function signHeads(svc: Services, w: StoreWriter, heads: Map<string, PendingHead>): Promise<void> {
  if (heads.size === 0) return;
  if (svc.store.dialect === "postgres" && heads.size > 1) {
    for (const [uuid, head] of heads) if (head.ahead?.frontier !== head.frontier) signAhead(svc, heads, uuid);
    // The thread signs in the order asked: once the last asked of those not ready is, all are.
    let last: PendingHead["ahead"];
    for (const head of heads.values()) if (!head.ahead!.ticket.ready() && head.ahead!.asked > (last?.asked ?? -1)) last = head.ahead;
    if (last) await last.ticket.settled(SIGNER_WAIT_MS);
  }
  for (const [uuid, head] of heads) {
    // The frontier is replaced at each append, never changed in place: the same one, the same tree.
    const ahead = head.ahead?.frontier === head.frontier ? head.ahead : undefined;
    const root = ahead?.root ?? frontierRoot(head.frontier);
    head.room.headRoot = bytesToBase64(root);
    // The row still holds the frontier's text before the batch: its nodes the appends kept keep their text.
    const before = head.room.frontier;
    head.room.frontier = frontierToText(head.frontier, frontiers(svc).peek(uuid, before), before);
    frontiers(svc).set(uuid, head.room.frontier, head.frontier);
    const { keyName, pubkey } = svc.key;
    const checkpoint = ahead
      ? checkpointNote(ahead.body, keyName, pubkey, ahead.ticket.take())
      : signCheckpoint({ origin: `${svc.originHost}/room/${uuid}`, size: head.room.headSize, root, keyName, pubkey, sign: svc.key.signNow });
    head.rows.at(-1)!.checkpoint = checkpoint;
    head.room.checkpoint = checkpoint;
    for (const receipt of head.receipts) receipt.checkpoint = checkpoint;
  }
  // Every room's events, then every room's head: two statements for the whole batch.
  await w.insertEvents([...heads.values()].flatMap((head) => head.rows));
  await w.updateRoomsAfterAppend([...heads].map(([uuid, head]) => [uuid, head.room] as const));
}

/** `seconds` after the transaction's time. */
export const txAfter = (tx: Tx, seconds: number) => new Date(Date.parse(tx.now) + seconds * 1000).toISOString();

/**
 * Runs one write transaction that may append to `rooms` (locked, in sorted order, before fn runs).
 * Readers of every room it appended to are woken once it has committed (the store's onCommit).
 */
export async function write<T>(svc: Services, rooms: readonly string[], fn: (tx: Tx) => Promise<T>, options?: WriteOptions): Promise<T> {
  // The heads of the run that committed (a transaction run again with savepoints makes new ones).
  let heads: Map<string, PendingHead> | undefined;
  try {
    return await svc.store.write(
      rooms,
      async (w) => {
        const tx = txOn(svc, w);
        heads = tx.heads;
        const value = await fn(tx);
        await signHeads(svc, w, tx.heads);
        return value;
      },
      // The committed events go to the streams' frame cache and to the long-polls' last commits
      // before their readers wake: they answer without reading them back.
      {
        ...options,
        committed: () => {
          if (!heads) return;
          svc.frames.committed(heads);
          svc.lastCommits.committed(heads);
        },
      },
    );
  } finally {
    // A write may change a room row without moving its head (the arbiter's usage): read it again.
    for (const room of rooms) svc.roomRows.forget(room);
  }
}

interface QueuedWrite {
  room: string;
  fn: (tx: Tx) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for the hot write paths. Writes that arrive in the same event-loop turn run in
 * one transaction, each inside its own savepoint: they are applied one after another in arrival
 * order (so caps and chains hold exactly as with one transaction each), a failing write rolls back
 * only itself, and the batch pays for one commit instead of one per write. The batch locks all
 * its rooms up front, in one order, so two instances' batches cannot deadlock.
 *
 * A room has one batch committing at a time: its writes that arrive meanwhile wait for the next
 * batch (PostgreSQL commits take round trips; SQLite's commit within the turn, so there nothing
 * ever waits). Small batches queued behind one another on the room's row lock would each pay a
 * transaction and a signed checkpoint; the next batch gathers them all. For the same reason at
 * most MAX_BATCHES batches commit at once, whatever their rooms.
 */
export function queuedWrite<T>(svc: Services, room: string, fn: (tx: Tx) => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const queue = (svc.writeQueue ??= { waiting: [], committing: new Set(), batches: 0, scheduled: false }) as WriteQueue;
    queue.waiting.push({ room, fn: fn as (tx: Tx) => Promise<unknown>, resolve: resolve as (value: unknown) => void, reject });
    scheduleFlush(svc, queue);
  });
}

interface WriteQueue {
  waiting: QueuedWrite[];
  /** Rooms whose batch is committing. */
  committing: Set<string>;
  /** Batches committing. */
  batches: number;
  scheduled: boolean;
}

function scheduleFlush(svc: Services, queue: WriteQueue): void {
  if (queue.scheduled) return;
  queue.scheduled = true;
  setImmediate(() => {
    queue.scheduled = false;
    void flushQueue(svc, queue);
  });
}

/**
 * Batches committing at once, at most. A batch that finds this many committing waits: the next
 * to commit takes it up (its finally flushes again), with every write that arrived meanwhile.
 * On PostgreSQL each batch waits milliseconds for its round trips, and over HTTP the posts come
 * back from their clients spread out: without the cap the batches were many and small (12 posts
 * each over 50 rooms with 64 connections, counted), each paying a transaction, a lock statement
 * and a checkpoint per room. Two keep one batch's work overlapping the other's wait. SQLite
 * commits within the turn, so there no batch is ever committing when another starts.
 */
const MAX_BATCHES = 2;

async function flushQueue(svc: Services, queue: WriteQueue): Promise<void> {
  if (queue.batches >= MAX_BATCHES) return;
  const items: QueuedWrite[] = [];
  const later: QueuedWrite[] = [];
  for (const item of queue.waiting) (queue.committing.has(item.room) ? later : items).push(item);
  queue.waiting = later;
  if (items.length === 0) return;
  const rooms = new Set(items.map((q) => q.room));
  for (const room of rooms) queue.committing.add(room);
  queue.batches++;
  try {
    await commitBatch(svc, items);
  } finally {
    queue.batches--;
    for (const room of rooms) queue.committing.delete(room);
    if (queue.waiting.length > 0) scheduleFlush(svc, queue);
  }
}

async function commitBatch(svc: Services, queue: QueuedWrite[]): Promise<void> {
  let outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
  // Each room's last write in the batch: after it, the room's checkpoint can be signed.
  const lastOfRoom = new Map(queue.map((q, i) => [q.room, i]));
  const batch = (options: WriteOptions) =>
    write(
      svc,
      queue.map((q) => q.room),
      async (tx) => {
        outcomes = [];
        for (const [i, item] of queue.entries()) {
          try {
            outcomes.push({ ok: true, value: await tx.savepoint(() => item.fn(tx)) });
          } catch (error) {
            outcomes.push({ ok: false, error });
          }
          if (lastOfRoom.get(item.room) === i && i < queue.length - 1) signAhead(svc, tx.heads, item.room);
        }
      },
      options,
    );
  try {
    // Without savepoints first; a write that failed after writing makes it run again with them.
    await batch({ optimistic: true }).catch((error: unknown) => {
      if (error instanceof RetryWithSavepoints) return batch({});
      throw error;
    });
  } catch (error) {
    for (const item of queue) item.reject(error); // the commit itself failed: nothing was written
    return;
  }
  queue.forEach((item, i) => {
    const outcome = outcomes[i]!;
    if (outcome.ok) item.resolve(outcome.value);
    else item.reject(outcome.error);
  });
}
