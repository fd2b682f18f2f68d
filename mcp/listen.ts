// Room events over MCP (protocol 2026-07-28): a subscriptions/listen stream for room-messages
// resources gets notifications/resources/updated when a room has a new message. The stream is
// one POST held open (no session), so it works as every other request does: any instance serves
// it, and the notifier (LISTEN/NOTIFY on PostgreSQL) wakes it for commits made on any instance.
import { ParleyError } from "../lib/errors";
import { ROOM_GONE } from "../lib/realtime/notifier";
import type { Caller, Services } from "../lib/services/context";
import { readMessages } from "../lib/services/messages";
import { getRoom } from "../lib/services/rooms";
import { roomOfUri, ROOM_MESSAGES_TEMPLATE } from "./server";

/** Rooms one listen stream may follow (each is a notifier subscription while the stream is open). */
export const MAX_LISTENED_ROOMS = 20;

export interface RoomWatch {
  /** Starts notifying (once the stream's listener is in place); wake-ups before it are kept. */
  start(): void;
  /** Ends every subscription; idempotent. */
  stop(): void;
}

/** The resourceSubscriptions of a subscriptions/listen message (undefined for any other message). */
export function listenedUris(m: unknown): string[] | undefined {
  if (typeof m !== "object" || m === null) return undefined;
  const { method, params } = m as { method?: unknown; params?: { notifications?: { resourceSubscriptions?: unknown } } };
  if (method !== "subscriptions/listen") return undefined;
  const uris = params?.notifications?.resourceSubscriptions;
  return Array.isArray(uris) ? uris.filter((u): u is string => typeof u === "string") : [];
}

/**
 * Watches the rooms of `uris` from their current head: `notify(uri)` for each new message, and
 * `onGone()` once every watched room is deleted or expired (after a last `notify`, whose read
 * then answers room_not_found or room_expired). Refuses an unknown URI or room with its error.
 */
export async function watchRooms(svc: Services, caller: Caller, uris: string[], notify: (uri: string) => void, onGone: () => void): Promise<RoomWatch> {
  if (uris.length > MAX_LISTENED_ROOMS) {
    throw new ParleyError("validation_error", `resourceSubscriptions: at most ${MAX_LISTENED_ROOMS} rooms per subscriptions/listen; open another stream for more.`);
  }
  const rooms = [...new Set(uris)].map((uri) => {
    const room = roomOfUri(uri);
    if (!room) throw new ParleyError("validation_error", `resourceSubscriptions: ${JSON.stringify(uri).slice(0, 120)} is not a room's messages (${ROOM_MESSAGES_TEMPLATE}).`);
    return { uri, room: room.toLowerCase(), cursor: 0, pending: 0, busy: false, gone: false, unsubscribe: () => {} };
  });
  let started = false;
  let stopped = false;
  const stop = () => {
    stopped = true;
    for (const r of rooms) r.unsubscribe();
  };

  const drain = async (r: (typeof rooms)[number]) => {
    if (r.busy || !started || stopped) return;
    r.busy = true;
    try {
      while (!stopped && !r.gone && r.pending > r.cursor) {
        const target = r.pending;
        // Message ids are event seqs: one read says whether any of the new events is a message.
        const page = await readMessages(svc, r.room, { since: r.cursor, limit: 1 });
        if (page.messages.length > 0) notify(r.uri);
        r.cursor = Math.max(target, page.messages[0]?.id ?? 0);
      }
    } catch {
      gone(r); // expired meanwhile: its read says so
    } finally {
      r.busy = false;
    }
  };
  const gone = (r: (typeof rooms)[number]) => {
    if (r.gone || stopped) return;
    r.gone = true;
    r.unsubscribe();
    notify(r.uri);
    if (rooms.every((x) => x.gone)) onGone();
  };

  try {
    for (const r of rooms) {
      // Listen before reading the head, so that a commit between the two is not missed.
      r.unsubscribe = svc.notifier.subscribe(r.room, (seq) => {
        if (seq === ROOM_GONE) return started ? gone(r) : void (r.pending = seq);
        r.pending = Math.max(r.pending, seq);
        void drain(r);
      });
      r.cursor = (await getRoom(svc, caller, r.room)).head.size;
    }
  } catch (err) {
    stop();
    throw err;
  }
  return {
    start() {
      started = true;
      for (const r of rooms) {
        if (r.pending === ROOM_GONE) gone(r);
        else void drain(r);
      }
    },
    stop,
  };
}
