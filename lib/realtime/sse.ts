import { requireRoom } from "../services/rooms";
import type { Services } from "../services/context";

const encoder = new TextEncoder();
export const SSE_PING_MS = 15_000;

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
      const flush = () => {
        if (closed) return;
        try {
          requireRoom(svc, roomId);
        } catch {
          return close();
        }
        for (;;) {
          const frames = svc.frames.read(roomId, cursor);
          if (frames.length === 0) break;
          controller.enqueue(encoder.encode(frames.map((f) => f.text).join("")));
          cursor = frames.at(-1)!.seq;
        }
      };
      // Wake-ups during a burst are coalesced into one read per tick.
      const wake = () => {
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
        controller.enqueue(encoder.encode(": ping\n\n"));
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
      flush();
    },
    cancel() {
      cleanup();
    },
  });
}
