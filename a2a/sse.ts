// A2A streams as Server-Sent Events (A2A 1.0 §9.4.2: one JSON-RPC response per `data:` event).
import { escapeControls } from "../lib/realtime/feed";
import { rpcErrorOf } from "./errors";

const encoder = new TextEncoder();
export const A2A_PING_MS = 15_000;
const PING = encoder.encode(": ping\n\n");

/** Streams are read in terminals too (`curl -N`): control characters go out escaped, as on the room's SSE stream. */
const json = (value: unknown) => escapeControls(JSON.stringify(value));

export const SSE_HEADERS = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-cache, no-transform",
  "X-Accel-Buffering": "no",
  Connection: "keep-alive",
} as const;

/**
 * An SSE body of JSON-RPC responses. The next response is produced only when the client has read
 * the last one (pull), so a client that stops reading stops the store reads behind it too; a ping
 * every 15 s keeps idle connections open through proxies. `first` was taken before the response
 * started (so that an error could still be a plain JSON answer). An error later in the stream is
 * the last event (`event: error`). Cancelling (the client left) calls `stop` and ends the source.
 */
export function rpcEventStream(
  source: AsyncIterator<unknown>,
  first: IteratorResult<unknown>,
  requestId: string | number | null,
  stop: () => void,
  pingMs = A2A_PING_MS,
): ReadableStream<Uint8Array> {
  let closed = false;
  let ping: ReturnType<typeof setInterval> | undefined;
  const finish = () => {
    if (closed) return false;
    closed = true;
    clearInterval(ping);
    stop();
    return true;
  };
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        if (first.done) {
          finish();
          controller.close();
          return;
        }
        controller.enqueue(encoder.encode(`data: ${json(first.value)}\n\n`));
        ping = setInterval(() => {
          if (!closed && (controller.desiredSize ?? 0) > 0) controller.enqueue(PING);
        }, pingMs);
      },
      async pull(controller) {
        if (closed) return;
        let frame: string | undefined;
        try {
          const next = await source.next();
          if (!next.done) frame = `data: ${json(next.value)}\n\n`;
        } catch (err) {
          frame = `event: error\ndata: ${json({ jsonrpc: "2.0", id: requestId, error: rpcErrorOf(err) })}\n\n`;
          if (finish()) {
            controller.enqueue(encoder.encode(frame));
            controller.close();
          }
          return;
        }
        if (closed) return;
        if (frame === undefined) {
          finish();
          controller.close();
        } else controller.enqueue(encoder.encode(frame));
      },
      cancel() {
        if (finish()) source.return?.(undefined).catch(() => {});
      },
    },
    { highWaterMark: 1 },
  );
}
