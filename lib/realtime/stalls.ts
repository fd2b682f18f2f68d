import type { ServerResponse } from "node:http";

/**
 * Drops streamed responses (SSE, MCP event streams, exports, streamed pages) whose client stopped
 * reading: the socket buffer stays full, no "drain" for `timeoutMs`. Their writers already wait for
 * "drain" before taking more (lib/realtime/sse.ts), so a stalled client costs its buffers until it
 * is dropped; an SSE client resumes with Last-Event-ID.
 *
 * Only chunked bodies are watched: a body written whole (Content-Length) stays "not drained" for
 * its whole transfer, so a slow but reading client would look stalled.
 */
export class StallWatch {
  /** Open responses, and since when each has been waiting for "drain" (0: it is not). */
  private readonly open = new Map<ServerResponse, number>();
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

  watch(res: ServerResponse): void {
    this.open.set(res, 0);
    res.on("drain", () => this.open.has(res) && this.open.set(res, 0));
    res.once("close", () => this.open.delete(res));
  }

  /** Responses being watched now. */
  get size(): number {
    return this.open.size;
  }

  check(): void {
    const now = this.now();
    for (const [res, since] of this.open) {
      if (!(res.headersSent && res.chunkedEncoding && res.writableNeedDrain)) {
        if (since) this.open.set(res, 0);
      } else if (!since) this.open.set(res, now);
      else if (now - since >= this.timeoutMs) {
        this.open.delete(res);
        this.dropped++;
        res.destroy();
      }
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
