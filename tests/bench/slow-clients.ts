/**
 * Robustness figures for slow and greedy clients, with the server in a child process (as in
 * production) and its caps on (short timeouts, so the run is quick): how many streams one client
 * holds against the cap, resident memory with SSE clients that never read and with parallel
 * exports of a large room, and /health latency while a slowloris attack trickles headers.
 * `slowClientFigures(report)` is called by tests/bench/run.ts; standalone:
 *   node --import tsx tests/bench/slow-clients.ts
 */
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { percentile, rssMb, startServerChild } from "./common";

type Report = (name: string, value: string) => void;

const STREAM_CAP = 64;
const EXPORT_CAP = 4;
const TIMEOUT_S = 5;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function post(base: string, url: string, body: unknown): Promise<any> {
  const res = await fetch(base + url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const json = await res.json();
  if (!res.ok) throw new Error(`${url}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Open SSE streams and waiting long-polls, as the server counts them (/metrics). */
async function liveListeners(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(/^parley_live_listeners (\d+)/m.exec(text)?.[1] ?? NaN);
}

async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what} did not happen within ${ms} ms`);
    await sleep(100);
  }
}

/** A raw connection that sends `request` and then reads nothing at all. */
function stalledClient(port: number, request: string): net.Socket {
  const socket = net.connect(port, "127.0.0.1", () => socket.write(request));
  socket.pause();
  socket.on("error", () => {});
  return socket;
}

/** One client asks for 661 SSE streams (the figure of the issue): how many does it get? */
async function streamCap(base: string, room: string, report: Report): Promise<void> {
  const url = new URL(base);
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const requests: http.ClientRequest[] = [];
  const statuses = await Promise.all(
    Array.from({ length: 661 }, () => new Promise<number>((resolve) => {
      const req = http.get({ host: url.hostname, port: url.port, path: `/api/rooms/${room}/events`, agent }, (res) => {
        resolve(res.statusCode ?? 0);
        if (res.statusCode !== 200) res.resume();
      });
      req.on("error", () => resolve(0));
      requests.push(req);
    })),
  );
  const held = statuses.filter((s) => s === 200).length;
  const refused = statuses.filter((s) => s === 429).length;
  report(`SSE streams asked by one client: 661 (cap ${STREAM_CAP})`, `${held} held, ${refused} answered 429 rate_limited, ${661 - held - refused} other`);
  for (const req of requests) req.destroy();
  agent.destroy();
  await until("the streams being closed", async () => (await liveListeners(base)) === 0, 10_000);
}

/** 50 SSE clients that never read, from since=0 on a room of large messages. */
async function stalledStreams(base: string, port: number, pid: number, room: string, roomMb: number, report: Report): Promise<void> {
  const before = rssMb(pid);
  const sockets = Array.from({ length: 50 }, () => stalledClient(port, `GET /api/rooms/${room}/events?since=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`));
  await until("50 streams open", async () => (await liveListeners(base)) === 50, 10_000);
  await sleep(2_000);
  const stalled = rssMb(pid);
  const t0 = performance.now();
  await until("the stalled streams being dropped", async () => (await liveListeners(base)) === 0, (TIMEOUT_S + 10) * 1000);
  const droppedAfter = (performance.now() - t0) / 1000 + 2;
  report(
    `RSS, 50 SSE clients that never read (since=0, ${roomMb.toFixed(0)} MB of frames each)`,
    `${before.toFixed(0)} MB before, ${stalled.toFixed(0)} MB while stalled, ${rssMb(pid).toFixed(0)} MB after; all dropped ~${droppedAfter.toFixed(0)} s after opening (stall timeout ${TIMEOUT_S} s)`,
  );
  for (const s of sockets) s.destroy();
}

/** 20 clients export the large room at once. */
async function parallelExports(base: string, pid: number, room: string, report: Report): Promise<void> {
  const before = rssMb(pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 50);
  let bytes = 0;
  const statuses = await Promise.all(
    Array.from({ length: 20 }, async () => {
      const res = await fetch(`${base}/api/rooms/${room}/export`);
      const body = await res.arrayBuffer();
      if (res.status === 200) bytes = body.byteLength;
      return res.status;
    }),
  );
  clearInterval(sampler);
  const served = statuses.filter((s) => s === 200).length;
  const refused = statuses.filter((s) => s === 429).length;
  report(
    `20 parallel exports of a ${(bytes / 1e6).toFixed(0)} MB bundle (cap ${EXPORT_CAP} at once)`,
    `${served} served, ${refused} answered 429 rate_limited; RSS ${before.toFixed(0)} MB before, peak ${peak.toFixed(0)} MB`,
  );
}

/** /health latency, `n` requests one after another. */
async function healthLatency(base: string, n: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await (await fetch(`${base}/health`)).arrayBuffer();
    times.push(performance.now() - t0);
  }
  return times;
}

/** 1,000 connections that send a header line a second and never finish; /health meanwhile. */
async function slowloris(base: string, port: number, report: Report): Promise<void> {
  const quiet = await healthLatency(base, 200);
  let closed = 0;
  const sockets = Array.from({ length: 1000 }, () => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
    socket.on("error", () => {});
    socket.on("close", () => closed++);
    return socket;
  });
  let line = 0;
  const trickle = setInterval(() => {
    for (const s of sockets) if (!s.destroyed) s.write(`X-Slow-${line}: 1\r\n`);
    line++;
  }, 1_000);
  const attacked = await healthLatency(base, 200);
  const t0 = performance.now();
  await until("the slowloris connections being closed", async () => closed === sockets.length, (TIMEOUT_S + 10) * 1000).catch(() => {});
  const took = (performance.now() - t0) / 1000;
  clearInterval(trickle);
  for (const s of sockets) s.destroy();
  const fmt = (xs: number[]) => `p50 ${percentile(xs, 50).toFixed(1)} ms, p99 ${percentile(xs, 99).toFixed(1)} ms`;
  report("/health, quiet", fmt(quiet));
  report("/health during a slowloris of 1,000 trickling connections", fmt(attacked));
  report(`Slowloris connections closed by the server (read timeout ${TIMEOUT_S} s)`, `${closed} of ${sockets.length}, the last ~${took.toFixed(0)} s after the /health run`);
}

export async function slowClientFigures(report: Report): Promise<void> {
  const { base, child, close } = await startServerChild({
    prefix: "parley-bench-slow-",
    apiOnly: true,
    env: {
      PARLEY_MAX_STREAMS_PER_CLIENT: String(STREAM_CAP),
      PARLEY_MAX_CONCURRENT_EXPORTS: String(EXPORT_CAP),
      PARLEY_REQUEST_READ_TIMEOUT: `${TIMEOUT_S}s`,
      PARLEY_STALLED_STREAM_TIMEOUT: `${TIMEOUT_S}s`,
    },
  });
  try {
    const port = Number(new URL(base).port);
    const pid = child.pid!;
    const quiet = (await post(base, "/api/rooms", {})).uuid as string;
    await streamCap(base, quiet, report);

    // 200 messages of 10,000 three-byte characters: ~12 MB of SSE frames, a bundle of about as much.
    const room = (await post(base, "/api/rooms", { description: "large messages" })).uuid as string;
    const text = "€".repeat(10_000);
    for (let i = 0; i < 200; i += 20) {
      await Promise.all(Array.from({ length: 20 }, (_, k) => post(base, `/api/rooms/${room}/messages`, { agent_id: `agent-${(i + k) % 3}`, text })));
    }
    await stalledStreams(base, port, pid, room, (200 * 2 * 30_000) / 1e6, report);
    await parallelExports(base, pid, room, report);
    await slowloris(base, port, report);
  } finally {
    await close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(`Parley slow-client benchmark — ${new Date().toISOString()} — ${os.cpus().length} cores, Node ${process.version}`);
  await slowClientFigures((name, value) => console.log(`${name.padEnd(72)} ${value}`));
}
