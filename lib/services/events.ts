import { bytesToBase64, bytesToHex } from "../log/bytes";
import { signCheckpoint } from "../log/checkpoint";
import { eventLeafHash, type EventSig, type LogEvent } from "../log/event";
import { frontierAppend, frontierFromHex, frontierRoot, frontierToHex } from "../log/merkle";
import type { EventRow, RoomAfterAppend, RoomRow, StoreWriter } from "../store/types";
import { isoNow, roomLife, type Services } from "./context";
import { expiresAt } from "../domain/room";

export interface NewEvent {
  type: string;
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
}

/**
 * The one function that appends to a room's log. It must run inside `svc.store.write`: the
 * immediate transaction serialises appends, so seq has no gaps and prev never forks. It extends
 * the Merkle frontier (no rehash of the room), signs the new checkpoint and moves the head;
 * `roomPatch` carries the projection changes to the room row that belong to this event.
 */
export function appendEvent(
  svc: Services,
  tx: StoreWriter,
  room: RoomRow,
  input: NewEvent,
  roomPatch: Partial<RoomAfterAppend> = {},
): Appended {
  const seq = room.headSize + 1;
  const event: LogEvent = {
    v: 1,
    room: room.uuid,
    seq,
    ts: isoNow(svc),
    type: input.type,
    actor: input.actor,
    payload: input.payload,
    server: input.server ?? {},
    prev: room.headLeaf,
    ...(input.sig ? { sig: input.sig } : {}),
  };
  const leaf = eventLeafHash(event);
  const leafHex = bytesToHex(leaf);
  const frontier = frontierAppend(frontierFromHex(JSON.parse(room.frontier) as string[]), room.headSize, leaf);
  const root = frontierRoot(frontier);
  const checkpoint = signCheckpoint({
    origin: `${svc.originHost}/room/${room.uuid}`,
    size: seq,
    root,
    keyName: svc.key.keyName,
    pubkey: svc.key.pubkey,
    sign: svc.key.sign,
  });
  tx.insertEvent(eventToRow(event, leafHex, checkpoint));
  // What agents and the owner do keeps a room alive (messages, claims, heartbeats, votes); what the
  // server and the arbiter do on their own does not.
  const activity = input.actor === "server" || input.actor === "arbiter" ? {} : {
    lastActivityAt: event.ts,
    expiresAt: new Date(expiresAt(Date.parse(room.createdAt), Date.parse(event.ts), roomLife(svc))).toISOString(),
  };
  const after: RoomRow = {
    ...room,
    ...activity,
    ...roomPatch,
    headSize: seq,
    headLeaf: leafHex,
    headRoot: bytesToBase64(root),
    frontier: JSON.stringify(frontierToHex(frontier)),
    checkpoint,
  };
  tx.updateRoomAfterAppend(room.uuid, after);
  pendingPublish.push([room.uuid, seq]);
  return { event, leafHash: leafHex, receipt: { seq, leaf_hash: leafHex, checkpoint }, room: after };
}

// Appends made inside the current transaction; published once it has committed.
let pendingPublish: [string, number][] = [];

/** Runs one write transaction and, after it commits, wakes the readers of every room it appended to. */
export function writeTx<T>(svc: Services, fn: (tx: StoreWriter) => T): T {
  pendingPublish = [];
  let result: T;
  try {
    result = svc.store.write(fn);
  } catch (err) {
    pendingPublish = [];
    throw err;
  }
  const published = pendingPublish;
  pendingPublish = [];
  for (const [room, seq] of published) svc.notifier.publish(room, seq);
  return result;
}

interface QueuedWrite {
  fn: (tx: StoreWriter) => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}
const queues = new WeakMap<Services, QueuedWrite[]>();

/**
 * Group commit for the hot write paths. Writes that arrive in the same event-loop turn run in
 * one transaction, each inside its own savepoint: they are applied one after another in arrival
 * order (so caps and chains hold exactly as with one transaction each), a failing write rolls back
 * only itself, and the batch pays for one commit instead of one per write.
 */
export function queuedWrite<T>(svc: Services, fn: (tx: StoreWriter) => T): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let queue = queues.get(svc);
    if (!queue) {
      queues.set(svc, (queue = []));
      setImmediate(() => flushQueue(svc));
    }
    queue.push({ fn, resolve: resolve as (value: unknown) => void, reject });
  });
}

function flushQueue(svc: Services): void {
  const queue = queues.get(svc) ?? [];
  queues.delete(svc);
  const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
  try {
    writeTx(svc, () => {
      for (const item of queue) {
        const published = pendingPublish.length;
        try {
          outcomes.push({ ok: true, value: svc.store.write(item.fn) }); // nested: a savepoint
        } catch (error) {
          pendingPublish.length = published; // its appends were rolled back
          outcomes.push({ ok: false, error });
        }
      }
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

export function eventToRow(event: LogEvent, leafHash: string, checkpoint: string): EventRow {
  return {
    room: event.room,
    seq: event.seq,
    ts: event.ts,
    type: event.type,
    actor: event.actor,
    payload: JSON.stringify(event.payload),
    server: JSON.stringify(event.server),
    prev: event.prev,
    sig: event.sig ? JSON.stringify(event.sig) : null,
    leafHash,
    checkpoint,
  };
}

export function eventFromRow(row: EventRow): LogEvent {
  return {
    v: 1,
    room: row.room,
    seq: row.seq,
    ts: row.ts,
    type: row.type,
    actor: row.actor,
    payload: JSON.parse(row.payload) as Record<string, unknown>,
    server: JSON.parse(row.server) as Record<string, unknown>,
    prev: row.prev,
    ...(row.sig ? { sig: JSON.parse(row.sig) as EventSig } : {}),
  };
}
