import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Services } from "../services/context";
import { watchRoom, type Sink } from "./fanout";

const encoder = new TextEncoder();
export const SSE_PING_MS = 15_000;
const PING = encoder.encode(": ping\n\n");
const RETRY = encoder.encode("retry: 2000\n\n");

/** Bytes a stream queues ahead of its socket; past them it stops reading the store until drained. */
export const SSE_QUEUE_BYTES = 64 * 1024;

/** The SSE response's headers. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-cache, no-transform",
  "X-Accel-Buffering": "no",
  Connection: "keep-alive",
};

/** Which events a stream sends: all of them, or (`mentioning`) those addressed to one agent. */
export interface StreamFilter {
  /** The agentKey of `mentioning=`: messages that mention the agent and, in a turns room, its turn-opened notices. */
  addressedTo?: string;
}

/**
 * Server-Sent Events of every event of a room after `since` (or those the filter keeps: the cursor
 * still moves past the others, so a wake-up never re-reads them), written straight to the Node
 * response: each frame is encoded once for all the room's watchers (lib/realtime/feed.ts) and, once
 * a stream has caught up, read once per head move for all of them (lib/realtime/fanout.ts). Pings
 * every 15 s; ends when the client leaves, or when the room is deleted or expires.
 *
 * Backpressure: a stream writes while less than SSE_QUEUE_BYTES wait for its socket; past them it
 * leaves the room's feed, and reads on from its own cursor after "drain". A client that stops
 * reading costs its buffers, not the room; server.ts drops it once it stays stalled
 * (PARLEY_STALLED_STREAM_TIMEOUT), and it resumes with Last-Event-ID.
 */
export function serveRoomEvents(svc: Services, res: ServerResponse, roomId: string, since: number, filter: StreamFilter = {}, pingMs = SSE_PING_MS): void {
  res.writeHead(200, SSE_HEADERS);
  // Node corks a response's socket on its first write of a tick and uncorks it on the next tick,
  // after every pending promise job of the process. A post's fan-out corks each socket itself and
  // uncorks it after the stream's frames: the bytes go out in the same pass, one write per socket.
  // Full is SSE_QUEUE_BYTES not yet taken by the socket: past Node's own mark (16 KiB), so a write
  // that filled it said false and "drain" follows. A large frame the socket takes at once leaves
  // the stream with room, and live.
  let corked: Socket | undefined;
  const sink: Sink = {
    room: () => (res.destroyed || res.writableEnded ? 0 : SSE_QUEUE_BYTES - res.writableLength),
    write: (bytes) => {
      if (res.destroyed || res.writableEnded) return false;
      const socket = res.socket;
      if (!corked && socket && !socket.writableCorked) (corked = socket).cork();
      res.write(bytes);
      return res.writableLength < SSE_QUEUE_BYTES;
    },
    flush: () => {
      const socket = corked;
      corked = undefined;
      socket?.uncork();
    },
    end: () => void (res.destroyed || res.end()),
  };
  sink.write(RETRY);
  sink.flush();
  const watch = watchRoom(svc, roomId, since, sink, { addressedTo: filter.addressedTo, pingMs, ping: PING });
  res.on("drain", watch.resume);
  res.once("close", watch.stop);
}

/**
 * The same stream as a ReadableStream (for a caller without a Node response): frames are queued
 * while the stream's queue has room (SSE_QUEUE_BYTES) and read on when its reader pulls.
 */
export function roomEventStream(svc: Services, roomId: string, since: number, signal: AbortSignal, pingMs = SSE_PING_MS, filter: StreamFilter = {}): ReadableStream<Uint8Array> {
  let watch: ReturnType<typeof watchRoom> | undefined;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        let closed = false;
        const sink: Sink = {
          room: () => (closed ? 0 : (controller.desiredSize ?? 0)),
          write: (bytes) => {
            if (closed) return false;
            controller.enqueue(bytes);
            return (controller.desiredSize ?? 0) > 0;
          },
          flush: () => {},
          end: () => {
            if (closed) return;
            closed = true;
            signal.removeEventListener("abort", onAbort);
            try {
              controller.close();
            } catch {
              /* already closed by the reader */
            }
          },
        };
        const onAbort = () => {
          watch?.stop();
          sink.end();
        };
        if (signal.aborted) return sink.end();
        sink.write(RETRY);
        watch = watchRoom(svc, roomId, since, sink, { addressedTo: filter.addressedTo, pingMs, ping: PING });
        signal.addEventListener("abort", onAbort, { once: true });
      },
      // The reader took from the queue: read on from the cursor.
      pull() {
        watch?.resume();
      },
      cancel() {
        watch?.stop();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: SSE_QUEUE_BYTES }),
  );
}
