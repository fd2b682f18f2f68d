/**
 * Task board figures (issue 7), with the server in a child process as in production:
 * claim-next throughput with 50 competing agents (claims/s, double claims must be 0) and the
 * create → claim → submit → accept cycle, p50/p99. `taskFigures(report)` can be called by
 * tests/bench/run.ts; standalone:
 *   node --import tsx tests/bench/tasks.ts
 */
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { percentile, startServerChild } from "./common";

type Report = (name: string, value: string) => void;

const TASKS = Number(process.env.BENCH_TASKS ?? 5000);
const CYCLES = Number(process.env.BENCH_CYCLES ?? 500);
const AGENTS = 50;

async function post(base: string, url: string, body: unknown): Promise<any> {
  const res = await fetch(base + url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const json = await res.json();
  if (!res.ok) throw new Error(`${url}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** 50 agents call claim-next as fast as they can until the board is empty. */
async function claimNextThroughput(base: string, report: Report): Promise<void> {
  const room = (await post(base, "/api/rooms", {})).uuid as string;
  for (let i = 0; i < TASKS; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, TASKS - i) }, (_, k) => post(base, `/api/rooms/${room}/tasks`, { agent_id: "planner", title: `task ${i + k}`, priority: (i + k) % 10 })));
  }
  const agents = Array.from({ length: AGENTS }, (_, i) => `agent-${i}`);
  for (const agent_id of agents) await post(base, `/api/rooms/${room}/agents`, { agent_id, capabilities: [] });
  const claimed: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    agents.map(async (agent_id) => {
      for (;;) {
        const r = await post(base, `/api/rooms/${room}/tasks/claim-next`, { agent_id, lease_s: 3600 });
        if (r.task === null) return;
        claimed.push(r.task.id);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const doubles = claimed.length - new Set(claimed).size;
  report(`claim-next, ${AGENTS} competing agents, ${TASKS.toLocaleString("en")} tasks`, `${Math.round(claimed.length / seconds).toLocaleString("en")} claims/s, ${claimed.length}/${TASKS} claimed, double claims ${doubles}`);
}

/** One agent creates, another claims and submits, a third accepts: the whole cycle, one at a time. */
async function cycleLatency(base: string, report: Report): Promise<void> {
  const room = (await post(base, "/api/rooms", {})).uuid as string;
  await post(base, `/api/rooms/${room}/agents`, { agent_id: "worker", capabilities: ["code"] });
  const times: number[] = [];
  for (let i = 0; i < CYCLES; i++) {
    const t0 = performance.now();
    const { task } = await post(base, `/api/rooms/${room}/tasks`, { agent_id: "planner", title: `cycle ${i}`, requires: ["code"], reviewer: "checker" });
    const claim = await post(base, `/api/rooms/${room}/tasks/${task.id}/claim`, { agent_id: "worker" });
    await post(base, `/api/rooms/${room}/tasks/${task.id}/submit`, { agent_id: "worker", lease_token: claim.lease_token, status: "completed", summary: "done", artifacts: [{ type: "commit", ref: "abc" }] });
    const reviewed = await post(base, `/api/rooms/${room}/tasks/${task.id}/review`, { agent_id: "checker", decision: "accept" });
    if (reviewed.task.status !== "accepted") throw new Error("cycle did not end accepted");
    times.push(performance.now() - t0);
    if (i % 50 === 49) await post(base, `/api/rooms/${room}/agents`, { agent_id: "worker", capabilities: ["code"] }); // heartbeat
  }
  report(`create → claim → submit → accept cycle (4 requests), ${CYCLES} cycles`, `p50 ${percentile(times, 50).toFixed(1)} ms, p99 ${percentile(times, 99).toFixed(1)} ms`);
}

export async function taskFigures(report: Report): Promise<void> {
  const { base, close } = await startServerChild({ prefix: "parley-bench-tasks-" });
  try {
    await claimNextThroughput(base, report);
    await cycleLatency(base, report);
  } finally {
    await close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(`Parley task board benchmark — ${new Date().toISOString()} — ${os.cpus().length} cores, Node ${process.version}`);
  await taskFigures((name, value) => console.log(`${name.padEnd(62)} ${value}`));
}
