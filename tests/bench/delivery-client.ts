/**
 * The readers of the delivery figures, in a process of their own (forked by core.ts with an IPC
 * channel), so that parsing 1,000 streams does not share an event loop with the poster or the load
 * generator. Asked { base, room, sse, pollers, since }, it opens `sse` SSE streams and starts
 * `pollers` long-poll loops on the room, answers { ready } once every stream has its headers, and
 * on { stop, rounds } — once every reader has round rounds - 1, or 15 s later — answers { sse, polls }: every arrival of a message "delivery <round>" as
 * [reader, round, time], time on the machine's clock (performance.timeOrigin + performance.now(),
 * the clock the poster uses) — and exits.
 */
import http from "node:http";
import net from "node:net";
import { sendToParent } from "./ipc";

interface Start {
  base: string;
  room: string;
  sse: number;
  pollers: number;
  since: number;
}

type Arrival = [reader: number, round: number, at: number];
const now = () => performance.timeOrigin + performance.now();
const roundOf = (text: string) => Number(/delivery (\d+)/.exec(text)?.[1] ?? NaN);
const DELIVERY = /delivery (\d+)/g;


async function run(opts: Start): Promise<void> {
  const url = new URL(opts.base);
  const pollAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const sseArrivals: Arrival[] = [];
  const pollArrivals: Arrival[] = [];
  const requests: http.ClientRequest[] = [];
  const sockets: net.Socket[] = [];

  // The SSE readers are plain TCP connections that send the request and look for each round's
  // message in the bytes as they arrive: 1,000 readers share this one event loop, and Node's HTTP
  // client costs about as much per chunk as the server's write does, so parsing through it would
  // queue the readers behind one another and measure this process rather than the delivery. The
  // time is taken when the frame's bytes reach this process; the answer's status is checked.
  await Promise.all(
    Array.from(
      { length: opts.sse },
      (_, reader) =>
        new Promise<void>((resolve, reject) => {
          const socket = net.connect({ host: url.hostname, port: Number(url.port), noDelay: true });
          let head = true;
          let buffer = "";
          let last = -1;
          socket.setEncoding("latin1");
          socket.on("connect", () => socket.write(`GET /api/rooms/${opts.room}/events?since=${opts.since} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/event-stream\r\n\r\n`));
          socket.on("data", (chunk: string) => {
            const at = now();
            buffer += chunk;
            if (head) {
              const end = buffer.indexOf("\r\n\r\n");
              if (end < 0) return;
              if (!/^HTTP\/1\.1 200 /.test(buffer)) return reject(new Error(`SSE stream answered ${buffer.slice(0, buffer.indexOf("\r\n"))}`));
              head = false;
              buffer = buffer.slice(end + 4);
              resolve();
            }
            // Whole frames only (a frame ends with a blank line; the chunked framing has none).
            const end = buffer.lastIndexOf("\n\n");
            if (end < 0) return;
            for (const m of buffer.slice(0, end).matchAll(DELIVERY)) {
              const round = Number(m[1]);
              if (round > last) sseArrivals.push([reader, (last = round), at]);
            }
            buffer = buffer.slice(end + 2);
          });
          socket.on("error", reject);
          sockets.push(socket);
        }),
    ),
  );

  let polling = true;
  type Page = { messages: { id: number; text: string }[]; next_since: number };
  // An answer's time is taken when its last byte is read, before it is parsed.
  const poll = (since: number) =>
    new Promise<{ page: Page | null; at: number }>((resolve) => {
      const req = http.get({ host: url.hostname, port: url.port, path: `/api/rooms/${opts.room}/messages?since=${since}&wait=30`, agent: pollAgent }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const at = now();
          try {
            resolve({ page: res.statusCode === 200 ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as Page) : null, at });
          } catch {
            resolve({ page: null, at });
          }
        });
        res.on("error", () => resolve({ page: null, at: now() }));
      });
      req.on("error", () => resolve({ page: null, at: now() }));
      requests.push(req);
    });
  const pollers = Array.from({ length: opts.pollers }, async (_, reader) => {
    let since = opts.since;
    while (polling) {
      const { page, at } = await poll(since);
      if (!page) {
        if (polling) await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      for (const m of page.messages) {
        const round = roundOf(m.text);
        if (!Number.isNaN(round)) pollArrivals.push([reader, round, at]);
      }
      since = page.next_since;
      // The next poll goes out after the answers already here are read: sending it first would
      // hold the other readers' answers (and their times) behind this one's new request.
      await new Promise((r) => setImmediate(r));
    }
  });
  // Every long-poll is waiting on the server before the first post.
  await new Promise((r) => setTimeout(r, 500));
  await sendToParent({ ready: true });

  // { stop, rounds }: once every reader has the last round (or 15 s after the ask), stop.
  const { rounds } = await new Promise<{ rounds: number }>((resolve) => process.once("message", resolve));
  const hasLast = (arrivals: Arrival[], readers: number) => new Set(arrivals.filter(([, round]) => round === rounds - 1).map(([reader]) => reader)).size >= readers;
  const until = Date.now() + 15_000;
  while (Date.now() < until && !(hasLast(sseArrivals, opts.sse) && hasLast(pollArrivals, opts.pollers))) await new Promise((r) => setTimeout(r, 100));
  polling = false;
  for (const req of requests) req.destroy();
  for (const socket of sockets) socket.destroy();
  pollAgent.destroy();
  await Promise.all(pollers);
  await sendToParent({ sse: sseArrivals, polls: pollArrivals });
  process.disconnect();
}

process.once("message", (opts: Start) => {
  run(opts).catch(async (err: unknown) => {
    await sendToParent({ error: String((err as Error)?.stack ?? err) }).catch(() => {});
    process.exit(1);
  });
});
