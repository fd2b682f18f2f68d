import { requireRoom } from "../services/access";
import type { Services } from "../services/context";
import { ROOM_GONE } from "./notifier";

const encoder = new TextEncoder();
export const SSE_PING_MS = 15_000;
const PING = encoder.encode(": ping\n\n");

/** Bytes a stream queues ahead of its socket; past them it stops reading the store until drained. */
export const SSE_QUEUE_BYTES = 64 * 1024;
/** Frames read from the store at a time, at most (a frame of a long message is tens of KiB). */
const PAGE = 16;

/** Which events a stream sends: all of them, or (`mentioning`) those addressed to one agent. */
export interface StreamFilter {
  /** The agentKey of `mentioning=`: messages that mention the agent and, in a turns room, its turn-opened notices. */
  addressedTo?: string;
}

/**
 * A Server-Sent Events body with every event of a room after `since` (or those the filter keeps:
 * the cursor still moves past the others, so a wake-up never re-reads them). It sleeps on the notifier,
 * re-reads from its own cursor when woken (lossless), pings every 15 s, and unsubscribes on both
 * client abort and stream cancel. It ends when the room is deleted or expires.
 *
 * Backpressure: frames are read from the store only while the stream's queue has room
 * (SSE_QUEUE_BYTES); the writer takes from it only while the socket drains (@hono/node-server
 * waits for "drain"). A client that stops reading costs its queue and its socket buffer, not the
 * room; server.ts drops it once it stays stalled (PARLEY_STALLED_STREAM_TIMEOUT), and it resumes
 * with Last-Event-ID.
 */
export function roomEventStream(svc: Services, roomId: string, since: number, signal: AbortSignal, pingMs = SSE_PING_MS, filter: StreamFilter = {}): ReadableStream<Uint8Array> {
  const { addressedTo } = filter;
  let cursor = since;
  let cleanup = () => {};
  let flush = () => {};
  return new ReadableStream<Uint8Array>({
    start(controller) {
      let closed = false;
      let pending = false;
      const close = () => {
        if (closed) return;
        closed = true;
        cleanup();
        try {
          controller.close();
        } catch {
          /* already closed by the reader */
        }
      };
      /** Ends the stream when the room is gone or expired; true while it lives. */
      const roomAlive = async () => {
        try {
          await requireRoom(svc, roomId);
          return true;
        } catch {
          close();
          return false;
        }
      };
      const queueHasRoom = () => (controller.desiredSize ?? 0) > 0;
      let flushing = false;
      let again = false;
      const sent = { frames: 0, bytes: 0 };
      const drain = async () => {
        do {
          again = false;
          while (!closed && queueHasRoom()) {
            // As many frames as the queue has room for, by the size of those sent so far: a page
            // of small frames, one or two of large ones (none read only to be dropped).
            const average = sent.frames > 0 ? sent.bytes / sent.frames : 1024;
            const frames = await svc.frames.read(roomId, cursor, Math.max(1, Math.min(PAGE, Math.ceil(controller.desiredSize! / average))));
            if (frames.length === 0) break;
            // Frames carry their bytes, encoded once for every watcher of the room.
            for (const frame of frames) {
              cursor = frame.seq;
              if (addressedTo !== undefined && !frame.addressed.includes(addressedTo)) continue;
              sent.frames++;
              sent.bytes += frame.bytes.byteLength;
              if (closed) return;
              controller.enqueue(frame.bytes);
              if (!queueHasRoom()) break;
            }
          }
        } while (again && !closed);
      };
      flush = () => {
        // enqueue() may call pull() (and so flush) at once when a read is waiting, and wake-ups
        // arrive while a read is out: one drain at a time, run again if asked meanwhile.
        if (closed) return;
        if (flushing) return void (again = true);
        flushing = true;
        drain()
          .catch(() => close()) // the store went away: the client reconnects with Last-Event-ID
          .finally(() => (flushing = false));
      };
      // Wake-ups during a burst are coalesced into one read per tick.
      const wake = (seq: number) => {
        if (seq === ROOM_GONE) return void roomAlive();
        if (pending) return;
        pending = true;
        queueMicrotask(() => {
          pending = false;
          flush();
        });
      };
      const unsubscribe = svc.notifier.subscribe(roomId, wake);
      // The ping also notices a room that expired while nothing was said.
      const ping = setInterval(() => {
        if (closed) return;
        void roomAlive().then((alive) => {
          if (!alive || closed) return;
          // A stream with bytes still queued needs no ping to stay open.
          if (queueHasRoom()) controller.enqueue(PING);
          flush();
        });
      }, pingMs);
      const onAbort = () => close();
      cleanup = () => {
        unsubscribe();
        clearInterval(ping);
        signal.removeEventListener("abort", onAbort);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      controller.enqueue(encoder.encode("retry: 2000\n\n"));
      void roomAlive().then((alive) => alive && flush());
    },
    // The writer took from the queue (its socket drained): read on from the cursor.
    pull() {
      flush();
    },
    cancel() {
      cleanup();
    },
  }, new ByteLengthQueuingStrategy({ highWaterMark: SSE_QUEUE_BYTES }));
}
