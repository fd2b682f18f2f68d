/**
 * The readers of the delivery figures, in a process of their own (forked by run.ts with an IPC
 * channel), so that parsing 1,000 streams does not share an event loop with the poster or the load
 * generator. Asked { base, room, sse, pollers, since }, it opens `sse` SSE streams and starts
 * `pollers` long-poll loops on the room, answers { ready } once every stream has its headers, and
 * on { stop, rounds } — once every reader has round rounds - 1, or 15 s later — answers { sse, polls }: every arrival of a message "delivery <round>" as
 * [reader, round, time], time on the machine's clock (performance.timeOrigin + performance.now(),
 * the clock the poster uses) — and exits.
 */
import http from "node:http";

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

function send(message: unknown): Promise<void> {
  return new Promise((resolve, reject) => process.send!(message, (err: Error | null) => (err ? reject(err) : resolve())));
}

async function run(opts: Start): Promise<void> {
  const url = new URL(opts.base);
  const sseAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const pollAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const sseArrivals: Arrival[] = [];
  const pollArrivals: Arrival[] = [];
  const requests: http.ClientRequest[] = [];

  await Promise.all(
    Array.from(
      { length: opts.sse },
      (_, reader) =>
        new Promise<void>((resolve, reject) => {
          const req = http.get({ host: url.hostname, port: url.port, path: `/api/rooms/${opts.room}/events?since=${opts.since}`, agent: sseAgent }, (res) => {
            if (res.statusCode !== 200) return reject(new Error(`SSE stream answered ${res.statusCode}`));
            let buffer = "";
            res.setEncoding("utf8");
            res.on("data", (chunk: string) => {
              const at = now();
              buffer += chunk;
              let idx: number;
              while ((idx = buffer.indexOf("\n\n")) >= 0) {
                const round = roundOf(buffer.slice(0, idx));
                buffer = buffer.slice(idx + 2);
                if (!Number.isNaN(round)) sseArrivals.push([reader, round, at]);
              }
            });
            res.on("error", () => {});
            resolve();
          });
          req.on("error", reject);
          requests.push(req);
        }),
    ),
  );

  let polling = true;
  const poll = (since: number) =>
    new Promise<{ messages: { id: number; text: string }[]; next_since: number } | null>((resolve) => {
      const req = http.get({ host: url.hostname, port: url.port, path: `/api/rooms/${opts.room}/messages?since=${since}&wait=30`, agent: pollAgent }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          try {
            resolve(res.statusCode === 200 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : null);
          } catch {
            resolve(null);
          }
        });
        res.on("error", () => resolve(null));
      });
      req.on("error", () => resolve(null));
      requests.push(req);
    });
  const pollers = Array.from({ length: opts.pollers }, async (_, reader) => {
    let since = opts.since;
    while (polling) {
      const page = await poll(since);
      const at = now();
      if (!page) {
        if (polling) await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      for (const m of page.messages) {
        const round = roundOf(m.text);
        if (!Number.isNaN(round)) pollArrivals.push([reader, round, at]);
      }
      since = page.next_since;
    }
  });
  // Every long-poll is waiting on the server before the first post.
  await new Promise((r) => setTimeout(r, 500));
  await send({ ready: true });

  // { stop, rounds }: once every reader has the last round (or 15 s after the ask), stop.
  const { rounds } = await new Promise<{ rounds: number }>((resolve) => process.once("message", resolve));
  const hasLast = (arrivals: Arrival[], readers: number) => new Set(arrivals.filter(([, round]) => round === rounds - 1).map(([reader]) => reader)).size >= readers;
  const until = Date.now() + 15_000;
  while (Date.now() < until && !(hasLast(sseArrivals, opts.sse) && hasLast(pollArrivals, opts.pollers))) await new Promise((r) => setTimeout(r, 100));
  polling = false;
  for (const req of requests) req.destroy();
  sseAgent.destroy();
  pollAgent.destroy();
  await Promise.all(pollers);
  await send({ sse: sseArrivals, polls: pollArrivals });
  process.disconnect();
}

process.once("message", (opts: Start) => {
  run(opts).catch(async (err: unknown) => {
    await send({ error: String((err as Error)?.stack ?? err) }).catch(() => {});
    process.exit(1);
  });
});
