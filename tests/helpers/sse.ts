export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/** Reads an SSE response: parses frames (and comments) until aborted. */
export async function openSse(url: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: controller.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const waiters: (() => void)[] = [];
  const done = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let idx: number;
        while ((idx = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, idx);
          buffer = buffer.slice(idx + 2);
          const ev: SseEvent = { data: "" };
          let hasData = false;
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) comments.push(line.slice(1).trim());
            else if (line.startsWith("id: ")) ev.id = line.slice(4);
            else if (line.startsWith("event: ")) ev.event = line.slice(7);
            else if (line.startsWith("data: ")) {
              ev.data += (hasData ? "\n" : "") + line.slice(6);
              hasData = true;
            }
          }
          if (hasData) events.push(ev);
          waiters.splice(0).forEach((w) => w());
        }
      }
    } catch {
      /* aborted */
    }
  })();
  return {
    res,
    events,
    comments,
    /** Resolves when the stream ends (the server closed it, or close()). */
    ended: done,
    /** Resolves once at least n events arrived (rejects after timeoutMs). */
    async waitFor(n: number, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (events.length < n) {
        if (Date.now() > deadline) throw new Error(`expected ${n} SSE events, got ${events.length}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return events;
    },
    close() {
      controller.abort();
      return done;
    },
  };
}
