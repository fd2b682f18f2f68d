import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";

const CURRENT = Symbol("parley.stalls.response");
const SINCE = Symbol("parley.stalls.since");
type Watched = Socket & { [CURRENT]?: ServerResponse; [SINCE]?: number };

/**
 * Drops streamed responses (SSE, MCP event streams, exports, streamed pages) whose client stopped
 * reading: the socket buffer stays full, no "drain" for `timeoutMs`. Their writers already wait for
 * "drain" before taking more (lib/realtime/sse.ts), so a stalled client costs its buffers until it
 * is dropped; an SSE client resumes with Last-Event-ID.
 *
 * Only chunked bodies are watched: a body written whole (Content-Length) stays "not drained" for
 * its whole transfer, so a slow but reading client would look stalled.
 *
 * It follows connections, not responses: a connection is followed from its first request until it
 * closes, and each request only marks itself as the connection's current response. Following
 * every response (a map entry and two listeners each) cost a request that does nothing 10-20 % of
 * its rate on a server with the pages (docs/BENCHMARKS.md, tenth round). A response queued behind
 * another on its connection (HTTP/1.1 pipelining, which browsers and HTTP clients do not use) has
 * no socket yet and is not followed.
 */
export class StallWatch {
  private readonly sockets = new Set<Watched>();
  private readonly timer: NodeJS.Timeout;
  /** Responses dropped so far. */
  dropped = 0;

  constructor(
    private readonly timeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.timer = setInterval(() => this.check(), Math.min(1_000, Math.max(50, timeoutMs / 4)));
    this.timer.unref();
  }

  /** A request's response: its connection's current one (the connection followed from now on). */
  watch(res: ServerResponse): void {
    const socket = res.socket as Watched | null;
    if (!socket) return;
    if (socket[SINCE] === undefined) {
      socket[SINCE] = 0;
      this.sockets.add(socket);
      // The response's "drain" is its socket's.
      socket.on("drain", () => void (socket[SINCE] = 0));
      socket.once("close", () => this.sockets.delete(socket));
    }
    socket[CURRENT] = res;
  }

  check(): void {
    const now = this.now();
    for (const socket of this.sockets) {
      const res = socket[CURRENT];
      const since = socket[SINCE] ?? 0;
      if (!(res && res.headersSent && res.chunkedEncoding && res.writableNeedDrain)) {
        if (since) socket[SINCE] = 0;
      } else if (!since) socket[SINCE] = now;
      else if (now - since >= this.timeoutMs) {
        this.sockets.delete(socket);
        this.dropped++;
        res.destroy();
      }
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
