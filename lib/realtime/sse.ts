import { requireRoom } from "../services/rooms";
import type { Services } from "../services/context";
import { ROOM_GONE } from "./notifier";

const encoder = new TextEncoder();
export const SSE_PING_MS = 15_000;
const PING = encoder.encode(": ping\n\n");


/**
 * A Server-Sent Events body with every event of a room after `since`. It sleeps on the notifier,
 * re-reads from its own cursor when woken (lossless), pings every 15 s, and unsubscribes on both
 * client abort and stream cancel. It ends when the room is deleted or expires.
 */
export function roomEventStream(svc: Services, roomId: string, since: number, signal: AbortSignal, pingMs = SSE_PING_MS): ReadableStream<Uint8Array> {
  let cursor = since;
  let cleanup = () => {};
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
      const roomAlive = () => {
        try {
          requireRoom(svc, roomId);
          return true;
        } catch {
          close();
          return false;
        }
      };
      const flush = () => {
        if (closed) return;
        for (;;) {
          const frames = svc.frames.read(roomId, cursor);
          if (frames.length === 0) break;
          // Frames carry their bytes, encoded once for every watcher of the room.
          for (const frame of frames) controller.enqueue(frame.bytes);
          cursor = frames.at(-1)!.seq;
        }
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
        if (closed || !roomAlive()) return;
        controller.enqueue(PING);
        flush();
      }, pingMs);
      const onAbort = () => close();
      cleanup = () => {
        unsubscribe();
        clearInterval(ping);
        signal.removeEventListener("abort", onAbort);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      controller.enqueue(encoder.encode("retry: 2000\n\n"));
      if (roomAlive()) flush();
    },
    cancel() {
      cleanup();
    },
  });
}
