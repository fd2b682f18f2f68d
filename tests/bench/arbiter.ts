/**
 * Arbiter figures (issue 4): a premium room fed 100 messages by 4 agents in 10 s against a fake
 * provider that answers in 200 ms — LLM calls, time until the ledger reflects the last message,
 * nothing lost — and GET /context throughput for 100 threads × 10 revisions, with where its time
 * goes. `arbiterFigures(report)` is called by tests/bench/run.ts; standalone:
 *   node --import tsx tests/bench/arbiter.ts
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import autocannon from "autocannon";
import { freePort } from "../helpers/net";
import { startArbiterApi } from "../helpers/fake-llm";
import { loadConfig } from "../../lib/config";
import { contextHash, sealOf } from "../../lib/domain/ledger";
import { createServices } from "../../lib/services";
import { getContext, openThread, reviseThread } from "../../lib/services/ledger";
import { createRoom } from "../../lib/services/rooms";
import { loadOrCreateServerKey } from "../../lib/services/server-key";
import { openSqliteStore } from "../../lib/store/sqlite";

type Report = (name: string, value: string) => void;

const ROOT = path.resolve(import.meta.dirname, "../..");
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const NO_LIMITS = {
  PARLEY_RATE_ROOMS_PER_HOUR: "0",
  PARLEY_RATE_POSTS_PER_MINUTE: "0",
  PARLEY_RATE_AGENT_POSTS_PER_MINUTE: "0",
  PARLEY_RATE_REQUESTS_PER_MINUTE: "0",
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function json(base: string, method: string, url: string, body?: unknown): Promise<any> {
  const res = await fetch(base + url, { method, headers: { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  return res.json();
}

/** 100 messages, 4 agents, 10 s: each agent proposes a topic in turn and the three others confirm it. */
async function premiumRoom(report: Report): Promise<void> {
  const { llm, server, close } = await startArbiterApi({ PARLEY_ARBITER_COALESCE: process.env.BENCH_COALESCE ?? "1.5s" });
  llm.latencyMs = 200;
  try {
    const base = server.url;
    const room = (await json(base, "POST", "/api/rooms", { protocol_mode: "premium" })).uuid as string;
    const agents = ["ada", "bao", "cyd", "dov"];
    const ids: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < 100; i++) {
      const wait = t0 + i * 100 - performance.now();
      if (wait > 0) await sleep(wait);
      const k = Math.floor(i / 4);
      const owner = k % 4;
      const agent = agents[(owner + (i % 4)) % 4]!;
      const text = i % 4 === 0 ? `Next point. PROPOSE topic ${k}: ${10 * k + 5} units.` : `Works for me. CONFIRM topic ${k}.`;
      ids.push((await json(base, "POST", `/api/rooms/${room}/messages`, { agent_id: agent, text })).id);
    }
    const posted = performance.now();
    const last = ids.at(-1)!;
    let ctx: any;
    for (;;) {
      ctx = await json(base, "GET", `/api/rooms/${room}/context`);
      if (ctx.last_extracted_msg_id >= last || performance.now() - posted > 30_000) break;
      await sleep(10);
    }
    const lag = performance.now() - posted;

    // Nothing lost: every message's item is in the ledger, keyed by its source message.
    const sources = new Set<number>();
    for (const t of ctx.threads) for (const r of await json(base, "GET", `/api/rooms/${room}/claims/${t.id}/revisions`)) sources.add(r.source_msg_id);
    const missing = ids.filter((id) => !sources.has(id));
    const agreed = ctx.threads.filter((t: { status: string }) => t.status === "agreed").length;
    const info = await json(base, "GET", `/api/rooms/${room}`);
    report("Premium room, 100 msgs / 4 agents / 10 s, 200 ms provider: LLM calls", `${llm.count} (target ≤ 15), ${info.arbiter.tokens.toLocaleString("en")} tokens`);
    report("Premium room: last message → reflected in the ledger", `${lag.toFixed(0)} ms`);
    report("Premium room: messages with their item in the ledger", `${100 - missing.length}/100, ${ctx.threads.length}/25 threads, ${agreed} agreed${missing.length ? `, missing ${missing.join(",")}` : ""}`);
  } finally {
    await close();
  }
}


/** The API server alone (no pages) in a child process, as in production. */
async function startApiChild(): Promise<{ base: string; child: ChildProcess }> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-bench-arbiter-"));
  // A file, not `-e`: `--input-type=module` would be inherited by the WAL checkpoint worker.
  const entry = path.join(dataDir, "api-only.mjs");
  fs.writeFileSync(entry, `const { startServer } = await import(${JSON.stringify(pathToFileURL(path.join(ROOT, "server.ts")).href)});\nawait startServer({ pages: false, quiet: true });\n`);
  const child = spawn(process.execPath, ["--import", "tsx", entry], {
    cwd: ROOT,
    env: { ...process.env, ...NO_LIMITS, PORT: String(port), HOST: "127.0.0.1", PARLEY_DATA_DIR: dataDir, NODE_ENV: "production" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${base}/health`)).ok) return { base, child };
    } catch {
      /* not up yet */
    }
    await sleep(100);
  }
  child.kill("SIGTERM");
  throw new Error("server did not start");
}

/** A room with 100 threads of 10 revisions each (the opener's propose and 9 updates). */
async function seedLedger(base: string): Promise<string> {
  const room = (await json(base, "POST", "/api/rooms", { description: "ledger benchmark" })).uuid as string;
  for (let t = 0; t < 100; t++) {
    const thread = await json(base, "POST", `/api/rooms/${room}/claims`, { subject: `Topic number ${t}`, value: "value 0", opened_by: `agent-${t % 4}`, quote: "a quote of moderate length from the message" });
    for (let r = 1; r < 10; r++) await json(base, "POST", `/api/rooms/${room}/claims/${thread.id}/revisions`, { agent_id: `agent-${t % 4}`, kind: "update", value: `value ${r}` });
  }
  return room;
}

async function contextThroughput(report: Report): Promise<void> {
  const { base, child } = await startApiChild();
  try {
    const room = await seedLedger(base);
    const res = await fetch(`${base}/api/rooms/${room}/context`);
    const bytes = (await res.arrayBuffer()).byteLength;
    for (const connections of [1, 32]) {
      const r = await new Promise<autocannon.Result>((resolve, reject) =>
        autocannon({ url: `${base}/api/rooms/${room}/context`, connections, duration: DURATION }, (err, out) => (err ? reject(err) : resolve(out))),
      );
      report(
        `GET /context, 100 threads × 10 revisions, ${connections} conn.`,
        `${Math.round(r.requests.average).toLocaleString("en")} req/s, p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, errors ${r.errors + r.non2xx}${connections === 32 ? " (target ≥ 2,000)" : ""}, ${(bytes / 1024).toFixed(0)} KiB`,
      );
    }
  } finally {
    child.kill("SIGTERM");
  }
}

/** Where a GET /context spends its time, in-process (no HTTP), per request. */
async function contextBreakdown(report: Report): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-bench-ctx-"));
  const config = loadConfig({ ...NO_LIMITS, PARLEY_DATA_DIR: dataDir });
  const store = openSqliteStore(dataDir);
  const svc = createServices(config, store, loadOrCreateServerKey(config.keyFile, config.keyName));
  try {
    const room = (await createRoom(svc, { ip: "local", origin: "http://localhost" }, { description: "", is_public: false, protocol_mode: "standard", mode: "open" })).uuid;
    for (let t = 0; t < 100; t++) {
      const thread = await openThread(svc, room, { subject: `Topic number ${t}`, value: "value 0", opened_by: `agent-${t % 4}`, quote: "a quote of moderate length from the message" });
      for (let r = 1; r < 10; r++) await reviseThread(svc, room, String(thread.id), { agent_id: `agent-${t % 4}`, kind: "update", value: `value ${r}` });
    }
    const time = async (fn: () => unknown) => {
      for (let i = 0; i < 50; i++) await fn();
      const n = 500;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) await fn();
      return ((performance.now() - t0) / n) * 1000;
    };
    const threads = await store.listThreads(room);
    const handshakes = await store.listHandshakes(room);
    const whole = await getContext(svc, room);
    const parts = {
      "listThreads (SQL + row mapping)": await time(() => store.listThreads(room)),
      listDiscrepancies: await time(() => store.listDiscrepancies(room)),
      listHandshakes: await time(() => store.listHandshakes(room)),
      "contextHash (JCS + SHA-256)": await time(() => contextHash(threads)),
      sealOf: await time(() => sealOf(threads, handshakes)),
      "JSON.stringify of the answer": await time(() => JSON.stringify(whole)),
    };
    const total = await time(async () => JSON.stringify(await getContext(svc, room)));
    report("GET /context in-process (getContext + stringify)", `${total.toFixed(0)} µs/request → ${Math.round(1e6 / total).toLocaleString("en")} req/s on one core`);
    report("  of which", Object.entries(parts).map(([k, v]) => `${k} ${v.toFixed(0)} µs`).join("; "));
  } finally {
    await store.close();
  }
}

export async function arbiterFigures(report: Report): Promise<void> {
  await premiumRoom(report);
  await contextThroughput(report);
  await contextBreakdown(report);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(`Parley arbiter benchmark — ${new Date().toISOString()} — ${os.cpus().length} cores, Node ${process.version}`);
  await arbiterFigures((name, value) => console.log(`${name.padEnd(62)} ${value}`));
}
