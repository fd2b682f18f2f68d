import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import http from "node:http";
import { spawn } from "node:child_process";
import { ManualClock, startApi, type TestApi } from "../helpers/server";
import { testAgent } from "../helpers/agent";
import { sweepBoards } from "../../lib/services/tasks";
import { rawSql } from "../helpers/db";

let f: TestApi;
// A second server whose clock the tests move (leases, handoff windows, lost agents).
const clock = new ManualClock(Date.now());
let timed: TestApi;

before(async () => {
  f = await startApi();
  // Its boards are swept by the tests alone: the server's own sweeper, were it to fire during a
  // test, would release a lease before the test's sweep looks for it.
  timed = await startApi({ PARLEY_AGENT_HEARTBEAT_S: "10", PARLEY_SWEEP_INTERVAL: "1h" }, { clock });
});
after(async () => {
  await f.close();
  await timed.close();
});

type Api = TestApi["api"];
const base = (room: string) => `/api/rooms/${room}`;

async function join(a: Api, room: string, agent_id: string, capabilities: string[] = [], extra: Record<string, unknown> = {}) {
  const r = await a.post(`${base(room)}/agents`, { agent_id, capabilities, ...extra });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}
async function create(a: Api, room: string, body: Record<string, unknown> = {}) {
  const r = await a.post(`${base(room)}/tasks`, { agent_id: "boss", title: "Write the parser", ...body });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.task as { id: number; revision: number; [k: string]: unknown };
}
async function claim(a: Api, room: string, tid: number, agent_id: string, extra: Record<string, unknown> = {}) {
  return a.post(`${base(room)}/tasks/${tid}/claim`, { agent_id, ...extra });
}
const act = (a: Api, room: string, tid: number, action: string, body: Record<string, unknown>, headers?: Record<string, string>) =>
  a.post(`${base(room)}/tasks/${tid}/${action}`, body, headers);
const sha256 = (s: string) => crypto.createHash("sha256").update(s).digest("hex");

describe("agents and tasks", () => {
  test("join, list agents with status; create, list and read a task with its history", async () => {
    const room = (await f.api.room()).uuid;
    const joined = await join(f.api, room, "alice", ["python", "review"]);
    assert.equal(joined.event, "agent.joined");
    assert.equal(joined.status, "online");
    assert.equal((await join(f.api, room, "alice", ["python", "review"])).event, "agent.heartbeat");
    const agents = await f.api.get(`${base(room)}/agents`);
    assert.deepEqual(agents.body.agents.map((a: { agent_id: string; capabilities: string[]; auth: string; status: string }) => [a.agent_id, a.capabilities, a.auth, a.status]), [
      ["alice", ["python", "review"], "anon", "online"],
    ]);
    const t = await create(f.api, room, { description: "RFC 8785", requires: ["python"], priority: 7, reviewer: "carol", context_refs: ["msg:1"] });
    assert.equal(t.status, "open");
    assert.equal(t.priority, 7);
    assert.equal(t.max_failures, 5);
    assert.equal(t.created_by, "boss");
    assert.equal(t.reviewer, "carol");
    assert.equal(t.revision, 1);
    assert.equal(t.attempt, 0);
    const list = await f.api.get(`${base(room)}/tasks?status=open`);
    assert.deepEqual(list.body.tasks.map((x: { id: number }) => x.id), [t.id]);
    assert.equal((await f.api.get(`${base(room)}/tasks?status=claimed`)).body.tasks.length, 0);
    assert.equal((await f.api.get(`${base(room)}/tasks?status=bogus`)).status, 400);
    const c = await claim(f.api, room, t.id, "alice");
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const got = await f.api.get(`${base(room)}/tasks/${t.id}`);
    assert.deepEqual(got.body.history.map((e: { type: string }) => e.type), ["task.created", "task.claimed"]);
    assert.equal(got.body.status, "claimed");
    assert.equal((await f.api.get(`${base(room)}/tasks/99999`)).body.code, "task_not_found");
  });

  test("validation: limits on title, requires, priority, max_failures, capabilities", async () => {
    const room = (await f.api.room()).uuid;
    const bad = [
      { title: "x".repeat(201) },
      { title: "ok", requires: Array.from({ length: 11 }, (_, i) => `c${i}`) },
      { title: "ok", priority: 10 },
      { title: "ok", max_failures: 0 },
      { title: "ok", description: "d".repeat(5001) },
      { title: "ok", context_refs: Array.from({ length: 21 }, (_, i) => `r${i}`) },
    ];
    for (const body of bad) {
      const r = await f.api.post(`${base(room)}/tasks`, { agent_id: "boss", ...body });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, "validation_error");
    }
    const caps = await f.api.post(`${base(room)}/agents`, { agent_id: "a", capabilities: Array.from({ length: 21 }, (_, i) => `c${i}`) });
    assert.equal(caps.status, 400);
    const long = await f.api.post(`${base(room)}/agents`, { agent_id: "a", capabilities: ["x".repeat(41)] });
    assert.equal(long.status, 400);
    const t = await create(f.api, room);
    await join(f.api, room, "a");
    assert.equal((await claim(f.api, room, t.id, "a", { lease_s: 10 })).status, 400, "lease_s below 30");
  });
});

describe("claims", () => {
  test("20 concurrent claimers from two OS processes on one task: exactly one lease", async () => {
    const room = (await f.api.room()).uuid;
    const t = await create(f.api, room, { requires: ["go"] });
    for (const p of ["p1", "p2"]) for (let i = 0; i < 10; i++) await join(f.api, room, `${p}-${i}`, ["go"]);
    const children = ["p1", "p2"].map((prefix) =>
      spawn(process.execPath, ["--import", "tsx", "tests/helpers/claimers.ts", f.url, room, String(t.id), prefix, "10"], { stdio: ["pipe", "pipe", "inherit"] }),
    );
    const ready: Promise<void>[] = [];
    const outputs = children.map((child) => {
      let out = "";
      let signalReady = () => {};
      ready.push(new Promise<void>((r) => (signalReady = r)));
      return new Promise<[string, number, string | null][]>((resolve, reject) => {
        child.stdout.on("data", (d: Buffer) => {
          out += d.toString();
          if (out.startsWith("ready\n")) signalReady();
        });
        child.on("error", reject);
        child.on("exit", (code) =>
          code === 0 ? resolve(JSON.parse(out.trim().split("\n").at(-1)!) as [string, number, string | null][]) : reject(new Error(`claimer exited ${code}`)),
        );
      });
    });
    await Promise.all(ready); // both processes loaded and waiting
    for (const child of children) child.stdin.write("go\n");
    const results = (await Promise.all(outputs)).flat();
    assert.equal(results.length, 20);
    const winners = results.filter(([, status]) => status === 200);
    assert.equal(winners.length, 1, JSON.stringify(results));
    assert.ok(results.filter(([, s]) => s !== 200).every(([, s, code]) => s === 409 && code === "invalid_transition"), JSON.stringify(results));
    const task = (await f.api.get(`${base(room)}/tasks/${t.id}`)).body;
    assert.equal(task.claimant, winners[0]![0]);
    assert.equal(task.history.filter((e: { type: string }) => e.type === "task.claimed").length, 1);
  });

  test("50 agents running claim-next over 500 tasks: no task claimed twice", async () => {
    const room = (await f.api.room()).uuid;
    for (let i = 0; i < 500; i++) await f.api.post(`${base(room)}/tasks`, { agent_id: "boss", title: `task ${i}`, priority: i % 10 });
    const agents = Array.from({ length: 50 }, (_, i) => `worker-${i}`);
    for (const a of agents) await join(f.api, room, a, []);
    const claimed: [string, number][] = [];
    await Promise.all(
      agents.map(async (agent_id) => {
        for (;;) {
          const r = await f.api.post(`${base(room)}/tasks/claim-next`, { agent_id, lease_s: 3600 });
          assert.equal(r.status, 200, JSON.stringify(r.body));
          if (r.body.task === null) return;
          assert.equal(r.body.task.claimant, agent_id);
          assert.ok(typeof r.body.lease_token === "string");
          claimed.push([agent_id, r.body.task.id as number]);
        }
      }),
    );
    const ids = claimed.map(([, id]) => id);
    assert.equal(ids.length, 500);
    assert.equal(new Set(ids).size, 500, "a task was claimed twice");
    const open = await f.api.get(`${base(room)}/tasks?status=open`);
    assert.equal(open.body.tasks.length, 0);
  });

  test("claim-next takes the highest priority, then the oldest", async () => {
    const room = (await f.api.room()).uuid;
    const low = await create(f.api, room, { title: "low", priority: 1 });
    const hi1 = await create(f.api, room, { title: "hi1", priority: 8 });
    const hi2 = await create(f.api, room, { title: "hi2", priority: 8 });
    await join(f.api, room, "w");
    const order = [];
    for (let i = 0; i < 4; i++) order.push((await f.api.post(`${base(room)}/tasks/claim-next`, { agent_id: "w" })).body.task?.id ?? null);
    assert.deepEqual(order, [hi1.id, hi2.id, low.id, null]);
  });

  test("capability filtering: an agent without a required capability can neither claim the task nor get it from claim-next", async () => {
    const room = (await f.api.room()).uuid;
    const t = await create(f.api, room, { requires: ["rust", "review"] });
    await join(f.api, room, "partial", ["rust"]);
    await join(f.api, room, "none", []);
    await join(f.api, room, "full", ["review", "rust", "extra"]);
    for (const who of ["partial", "none", "stranger"]) {
      const r = await claim(f.api, room, t.id, who);
      assert.equal(r.status, 403, who);
      assert.equal(r.body.code, "capability_mismatch");
    }
    for (const who of ["partial", "none"]) {
      const r = await f.api.post(`${base(room)}/tasks/claim-next`, { agent_id: who });
      assert.equal(r.status, 200);
      assert.equal(r.body.task, null, `${who} must not receive the task`);
    }
    assert.equal((await f.api.post(`${base(room)}/tasks/claim-next`, { agent_id: "stranger" })).body.code, "capability_mismatch");
    const ok = await f.api.post(`${base(room)}/tasks/claim-next`, { agent_id: "full" });
    assert.equal(ok.body.task.id, t.id);
    const again = await claim(f.api, room, t.id, "full");
    assert.equal(again.status, 409);
    assert.equal(again.body.code, "invalid_transition");
  });

  test("the lease token is returned once and stored only as its SHA-256; a wrong token is a lease_conflict", async () => {
    const room = (await f.api.room()).uuid;
    const t = await create(f.api, room);
    await join(f.api, room, "w");
    await join(f.api, room, "x");
    const c = await claim(f.api, room, t.id, "w");
    const token = c.body.lease_token as string;
    assert.ok(token.length >= 40);
    const [row] = await rawSql<{ lease_hash: string; data: string }>(f.server.svc, "SELECT lease_hash, data FROM tasks WHERE room = ? AND id = ?", [room, t.id]);
    const events = await rawSql<{ payload: string; server: string }>(f.server.svc, "SELECT payload, server FROM events WHERE room = ?", [room]);
    assert.equal(row!.lease_hash, sha256(token));
    assert.ok(!row!.data.includes(token));
    assert.ok(events.every((e) => !e.payload.includes(token) && !e.server.includes(token)), "the token is never in the log");
    assert.ok(!JSON.stringify((await f.api.get(`${base(room)}/tasks/${t.id}`)).body).includes(token));
    const wrong = await act(f.api, room, t.id, "heartbeat", { agent_id: "w", lease_token: "nope" });
    assert.equal(wrong.status, 409);
    assert.equal(wrong.body.code, "lease_conflict");
    const other = await act(f.api, room, t.id, "release", { agent_id: "x", lease_token: token });
    assert.equal(other.body.code, "lease_conflict", "the token is bound to its claimant");
    const released = await act(f.api, room, t.id, "release", { agent_id: "w", lease_token: token });
    assert.equal(released.status, 200);
    assert.equal(released.body.task.status, "open");
    assert.equal(released.body.task.failures, 0);
    assert.equal((await act(f.api, room, t.id, "release", { agent_id: "w", lease_token: token })).body.code, "lease_conflict", "a released lease is gone");
  });
});

describe("leases, handoffs and budgets (manual clock)", () => {
  const sweep = () => sweepBoards(timed.server.svc);

  test("heartbeat extends the lease; a lease that runs out is released with a failure", async () => {
    const room = (await timed.api.room()).uuid;
    const t = await create(timed.api, room);
    await join(timed.api, room, "w");
    const c = await claim(timed.api, room, t.id, "w", { lease_s: 30 });
    const token = c.body.lease_token;
    const first = Date.parse(c.body.task.lease_until);
    assert.equal(first, clock.now() + 30_000);
    clock.advance(20_000);
    const hb = await act(timed.api, room, t.id, "heartbeat", { agent_id: "w", lease_token: token, lease_s: 60, progress: "half" });
    assert.equal(hb.status, 200, JSON.stringify(hb.body));
    assert.equal(Date.parse(hb.body.task.lease_until), clock.now() + 60_000);
    clock.advance(20_000); // past the first lease
    await sweep();
    assert.equal((await timed.api.get(`${base(room)}/tasks/${t.id}`)).body.status, "claimed", "the heartbeat kept it");
    clock.advance(41_000);
    const late = await act(timed.api, room, t.id, "heartbeat", { agent_id: "w", lease_token: token });
    assert.equal(late.status, 409);
    assert.equal(late.body.code, "lease_expired");
    await join(timed.api, room, "w"); // alive: only the lease ran out
    assert.ok((await sweep()).released >= 1);
    const after = (await timed.api.get(`${base(room)}/tasks/${t.id}`)).body;
    assert.equal(after.status, "open");
    assert.equal(after.failures, 1);
    assert.equal(after.claimant, null);
    const rel = after.history.at(-1);
    assert.equal(rel.type, "task.released");
    assert.equal(rel.actor, "server");
    assert.equal(rel.server.failure, true);
  });

  test("a room its owner closed stands still: no lease runs out, no agent is lost, until it is reopened", async () => {
    const created = await timed.api.room();
    const room = created.uuid;
    const owner = { authorization: `Bearer ${created.owner_token}` };
    const t = await create(timed.api, room, { max_failures: 1 });
    await join(timed.api, room, "w");
    assert.equal((await claim(timed.api, room, t.id, "w", { lease_s: 30 })).status, 200);
    assert.equal((await timed.api.post(`${base(room)}/close`, {}, owner)).status, 200);
    clock.advance(60_000);
    await sweep();
    const frozen = (await timed.api.get(`${base(room)}/tasks/${t.id}`)).body;
    assert.deepEqual([frozen.status, frozen.failures], ["claimed", 0], "closed: the holder could not heartbeat, so nothing is counted");
    assert.equal((await timed.api.get(`${base(room)}/agents`)).body.agents[0].status, "lost", "shown as silent");
    assert.equal(frozen.history.length, 2, "and nothing was logged");
    assert.equal((await timed.api.post(`${base(room)}/reopen`, {}, owner)).status, 200);
    await sweep();
    assert.equal((await timed.api.get(`${base(room)}/tasks/${t.id}`)).body.claimant, null, "reopened: the clock runs again");
    assert.equal((await timed.api.post(`${base(room)}/verify`, {})).body.verdict, "CLEAN");
  });

  test("failure budget: failures ≥ max_failures → failed, with the reasons", async () => {
    const room = (await timed.api.room()).uuid;
    const t = await create(timed.api, room, { max_failures: 3 });
    await join(timed.api, room, "w");
    let c = await claim(timed.api, room, t.id, "w");
    const f1 = await act(timed.api, room, t.id, "fail", { agent_id: "w", lease_token: c.body.lease_token, reason: "flaky network" });
    assert.equal(f1.body.task.status, "open");
    assert.equal(f1.body.task.failures, 1);
    c = await claim(timed.api, room, t.id, "w");
    const s = await act(timed.api, room, t.id, "submit", { agent_id: "w", lease_token: c.body.lease_token, status: "failed", summary: "tests red" });
    assert.equal(s.body.task.status, "open", "a failed receipt reopens");
    assert.equal(s.body.task.failures, 2);
    c = await claim(timed.api, room, t.id, "w", { lease_s: 30 });
    clock.advance(31_000);
    await join(timed.api, room, "w"); // alive: only the lease ran out
    await sweep();
    const done = (await timed.api.get(`${base(room)}/tasks/${t.id}`)).body;
    assert.equal(done.status, "failed");
    assert.equal(done.failures, 3);
    assert.equal(done.attempt, 3);
    assert.equal(done.failure_reasons.length, 3);
    assert.equal(done.failure_reasons[0], "flaky network");
    await join(timed.api, room, "w");
    assert.equal((await claim(timed.api, room, t.id, "w")).body.code, "invalid_transition", "failed is terminal");
  });

  test("handoff window: only the named agent (or capability) may claim until it ends", async () => {
    const room = (await timed.api.room()).uuid;
    const t = await create(timed.api, room);
    for (const a of ["w", "friend", "other"]) await join(timed.api, room, a, a === "other" ? [] : ["db"]);
    const c = await claim(timed.api, room, t.id, "w");
    const h = await act(timed.api, room, t.id, "handoff", { agent_id: "w", lease_token: c.body.lease_token, to_agent: "friend", note: "you know the schema", window_s: 60 });
    assert.equal(h.status, 200, JSON.stringify(h.body));
    assert.equal(h.body.task.status, "open");
    assert.equal(h.body.task.failures, 0);
    assert.equal(h.body.task.handoff.to_agent, "friend");
    const blocked = await claim(timed.api, room, t.id, "other");
    assert.equal(blocked.status, 409);
    assert.equal(blocked.body.code, "handoff_window");
    assert.match(blocked.body.detail, new RegExp(h.body.task.handoff.until));
    assert.equal((await timed.api.post(`${base(room)}/tasks/claim-next`, { agent_id: "other" })).body.task, null);
    clock.advance(61_000);
    for (const a of ["w", "friend", "other"]) await join(timed.api, room, a, a === "other" ? [] : ["db"]);
    const late = await claim(timed.api, room, t.id, "other");
    assert.equal(late.status, 200, "the window expired");

    // By capability.
    const t2 = await create(timed.api, room);
    const c2 = await claim(timed.api, room, t2.id, "w");
    await act(timed.api, room, t2.id, "handoff", { agent_id: "w", lease_token: c2.body.lease_token, to_capability: "db", note: "" });
    assert.equal((await claim(timed.api, room, t2.id, "other")).body.code, "handoff_window");
    assert.equal((await claim(timed.api, room, t2.id, "friend")).status, 200);
    const both = await act(timed.api, room, t2.id, "handoff", { agent_id: "friend", lease_token: "x", to_agent: "a", to_capability: "b", note: "" });
    assert.equal(both.status, 400);
  });

  test("an agent lost (3 silent heartbeat intervals) has its leases released without a failure", async () => {
    const room = (await timed.api.room()).uuid;
    const t = await create(timed.api, room);
    await join(timed.api, room, "sleepy");
    await join(timed.api, room, "awake");
    await claim(timed.api, room, t.id, "sleepy", { lease_s: 3600 });
    clock.advance(16_000);
    const mid = (await timed.api.get(`${base(room)}/agents`)).body.agents;
    assert.deepEqual(mid.map((a: { status: string }) => a.status), ["away", "away"]);
    await join(timed.api, room, "awake");
    clock.advance(15_000); // sleepy silent 31 s > 3 × 10 s
    const swept = await sweep();
    assert.ok(swept.lost >= 1);
    const agents = (await timed.api.get(`${base(room)}/agents`)).body.agents;
    assert.deepEqual(agents.map((a: { agent_id: string; status: string }) => [a.agent_id, a.status]), [["awake", "online"], ["sleepy", "lost"]]);
    const task = (await timed.api.get(`${base(room)}/tasks/${t.id}`)).body;
    assert.equal(task.status, "open");
    assert.equal(task.failures, 0);
    assert.equal(task.history.at(-1).server.reason, "agent_lost");
    assert.equal((await claim(timed.api, room, t.id, "sleepy")).body.code, "capability_mismatch", "a lost agent must join again");
    assert.equal((await join(timed.api, room, "sleepy")).event, "agent.joined");
    assert.equal((await claim(timed.api, room, t.id, "sleepy")).status, 200);
  });
});

describe("receipts and review", () => {
  async function submitted(room: string, opts: { worker?: ReturnType<typeof testAgent> } = {}) {
    const t = await create(f.api, room, { reviewer: "rev" });
    const w = opts.worker;
    const joinSig = w && { sig: w.signWrite(room, "agent.joined", "worker", { capabilities: [] }) };
    await join(f.api, room, "worker", [], joinSig ?? {});
    const claimPayload = { task_id: t.id };
    const c = await claim(f.api, room, t.id, "worker", w ? { sig: w.signWrite(room, "task.claimed", "worker", claimPayload) } : {});
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const artifacts = [
      { type: "text", ref: "hello", sha256: sha256("hello") },
      { type: "text", ref: "tampered", sha256: sha256("original") },
      { type: "commit", ref: "abc123" },
    ];
    const payload = { task_id: t.id, status: "completed", summary: "done", artifacts };
    const s = await act(f.api, room, t.id, "submit", { agent_id: "worker", lease_token: c.body.lease_token, status: "completed", summary: "done", artifacts, ...(w ? { sig: w.signWrite(room, "task.submitted", "worker", payload) } : {}) });
    assert.equal(s.status, 200, JSON.stringify(s.body));
    return { t, s: s.body.task };
  }

  test("a receipt records artifacts; text with sha256 is checked; URLs are never fetched", async () => {
    const hits: string[] = [];
    const trap = http.createServer((req, res) => {
      hits.push(req.url ?? "");
      res.end("x");
    });
    await new Promise<void>((r) => trap.listen(0, "127.0.0.1", r));
    const trapBase = `http://127.0.0.1:${(trap.address() as { port: number }).port}`;
    const url = `${trapBase}/artifact`;
    try {
      const room = (await f.api.room()).uuid;
      const { s } = await submitted(room);
      assert.equal(s.status, "submitted");
      assert.deepEqual(s.receipt.artifacts.map((a: { verified?: boolean }) => a.verified), [true, false, undefined]);
      const t = await create(f.api, room);
      await join(f.api, room, "w2");
      const c = await claim(f.api, room, t.id, "w2");
      const r = await act(f.api, room, t.id, "submit", { agent_id: "w2", lease_token: c.body.lease_token, status: "partial", summary: "see link", artifacts: [{ type: "url", ref: url }, { type: "pr", ref: url }], duration_s: 12 });
      assert.equal(r.body.task.status, "submitted");
      assert.equal(r.body.task.receipt.duration_s, 12);
      // Read the task and verify the room (where a fetch might hide), then a sentinel: our own
      // request reaches the trap after any fetch the server started before it.
      assert.equal((await f.api.get(`${base(room)}/tasks/${t.id}`)).status, 200);
      assert.equal((await f.api.post(`${base(room)}/verify`, {})).body.verdict, "CLEAN");
      assert.equal(await (await fetch(`${trapBase}/sentinel`)).text(), "x");
      assert.deepEqual(hits, ["/sentinel"], "the server fetched an agent-supplied URL");
    } finally {
      trap.close();
    }
  });

  test("self-review is refused, also under a second agent_id signed with the claimant's pinned key", async () => {
    const room = (await f.api.room()).uuid;
    const worker = testAgent();
    const { t } = await submitted(room, { worker });
    const own = await act(f.api, room, t.id, "review", { agent_id: "worker", decision: "accept", note: "lgtm", sig: worker.signWrite(room, "task.reviewed", "worker", { task_id: t.id, decision: "accept", note: "lgtm" }) });
    assert.equal(own.status, 403);
    assert.equal(own.body.code, "self_review");
    const alias = await act(f.api, room, t.id, "review", { agent_id: "rev", decision: "accept", sig: worker.signWrite(room, "task.reviewed", "rev", { task_id: t.id, decision: "accept" }) });
    assert.equal(alias.status, 403);
    assert.equal(alias.body.code, "self_review");
    const stranger = await act(f.api, room, t.id, "review", { agent_id: "mallory", decision: "accept" });
    assert.equal(stranger.status, 403);
    assert.equal(stranger.body.code, "forbidden");
    const reviewer = testAgent();
    const ok = await act(f.api, room, t.id, "review", { agent_id: "rev", decision: "accept", note: "good", sig: reviewer.signWrite(room, "task.reviewed", "rev", { task_id: t.id, decision: "accept", note: "good" }) });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.task.status, "accepted");
    assert.equal(ok.body.task.review.reviewer, "rev");
    assert.equal((await act(f.api, room, t.id, "review", { agent_id: "rev", decision: "reject" })).body.code, "invalid_transition");
  });

  test("creator and room owner may review; reject is terminal", async () => {
    const { uuid: room, owner_token } = await f.api.room();
    const { t } = await submitted(room);
    const byOwner = await act(f.api, room, t.id, "review", { decision: "reject", note: "wrong approach" }, { authorization: `Bearer ${owner_token}` });
    assert.equal(byOwner.status, 200, JSON.stringify(byOwner.body));
    assert.equal(byOwner.body.task.status, "rejected");
    assert.equal(byOwner.body.task.review.reviewer, "owner");
    const { t: t2 } = await submitted(room);
    const byCreator = await act(f.api, room, t2.id, "review", { agent_id: "boss", decision: "accept" });
    assert.equal(byCreator.body.task.status, "accepted");
    const { t: t3 } = await submitted(room);
    const badToken = await act(f.api, room, t3.id, "review", { decision: "accept" }, { authorization: "Bearer nope" });
    assert.equal(badToken.body.code, "not_owner");
  });

  test("needs_fix reopens with a priority window for the previous claimant", async () => {
    const room = (await f.api.room()).uuid;
    const { t } = await submitted(room);
    const nf = await act(f.api, room, t.id, "review", { agent_id: "rev", decision: "needs_fix", note: "add tests" });
    assert.equal(nf.status, 200);
    assert.equal(nf.body.task.status, "open");
    assert.equal(nf.body.task.handoff.to_agent, "worker");
    assert.equal(nf.body.task.review.decision, "needs_fix");
    await join(f.api, room, "intruder");
    assert.equal((await claim(f.api, room, t.id, "intruder")).body.code, "handoff_window");
    const again = await claim(f.api, room, t.id, "worker");
    assert.equal(again.status, 200);
    assert.equal(again.body.task.attempt, 2);
  });

  test("stale base_revision → 409 stale_revision and nothing changes", async () => {
    const room = (await f.api.room()).uuid;
    const t = await create(f.api, room);
    await join(f.api, room, "w");
    const stale = await claim(f.api, room, t.id, "w", { base_revision: t.revision + 1 });
    assert.equal(stale.status, 409);
    assert.equal(stale.body.code, "stale_revision");
    const c = await claim(f.api, room, t.id, "w", { base_revision: t.revision });
    assert.equal(c.status, 200);
    const hb = await act(f.api, room, t.id, "heartbeat", { agent_id: "w", lease_token: c.body.lease_token, base_revision: t.revision });
    assert.equal(hb.body.code, "stale_revision");
    const cancel = await act(f.api, room, t.id, "cancel", { agent_id: "boss", base_revision: 1 });
    assert.equal(cancel.body.code, "stale_revision");
    assert.equal((await f.api.get(`${base(room)}/tasks/${t.id}`)).body.revision, 2);
  });

  test("cancel: by the creator or the room owner, never twice", async () => {
    const { uuid: room, owner_token } = await f.api.room();
    const t = await create(f.api, room);
    const bad = await act(f.api, room, t.id, "cancel", { agent_id: "mallory" });
    assert.equal(bad.status, 403);
    assert.equal(bad.body.code, "forbidden");
    assert.equal((await act(f.api, room, t.id, "cancel", {})).status, 403);
    const ok = await act(f.api, room, t.id, "cancel", { agent_id: "boss", reason: "obsolete" });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.task.status, "cancelled");
    assert.equal((await act(f.api, room, t.id, "cancel", { agent_id: "boss" })).body.code, "invalid_transition");
    const t2 = await create(f.api, room);
    await join(f.api, room, "w");
    await claim(f.api, room, t2.id, "w");
    const byOwner = await act(f.api, room, t2.id, "cancel", {}, { authorization: `Bearer ${owner_token}` });
    assert.equal(byOwner.body.task.status, "cancelled");
    assert.equal(byOwner.body.task.claimant, null);
    const t3 = await create(f.api, room);
    const ownerWithName = await act(f.api, room, t3.id, "cancel", { agent_id: "moderator" }, { authorization: `Bearer ${owner_token}` });
    assert.equal(ownerWithName.body.task.status, "cancelled", "the owner token is enough whatever agent_id comes with it");
    const t4 = await create(f.api, room);
    assert.equal((await act(f.api, room, t4.id, "cancel", { agent_id: "mallory" }, { authorization: "Bearer wrong" })).body.code, "not_owner");
  });
});

describe("the board is part of the verifiable history", () => {
  test("verify is CLEAN after a board session and REFUTED after editing a task row", async () => {
    const room = (await timed.api.room()).uuid;
    const signer = testAgent();
    await join(timed.api, room, "signed", ["x"], { sig: signer.signWrite(room, "agent.joined", "signed", { capabilities: ["x"] }) });
    await join(timed.api, room, "w", ["x"]);
    await join(timed.api, room, "rev", ["x"]);
    const t1 = await create(timed.api, room, { reviewer: "rev", requires: ["x"] });
    const t2 = await create(timed.api, room, { max_failures: 1 });
    const t3 = await create(timed.api, room);
    const ok = (r: { status: number; body: unknown }, what: string) => assert.equal(r.status, 200, `${what}: ${JSON.stringify(r.body)}`);
    const c1 = await claim(timed.api, room, t1.id, "w");
    ok(c1, "claim");
    ok(await act(timed.api, room, t1.id, "heartbeat", { agent_id: "w", lease_token: c1.body.lease_token, progress: "50%" }), "heartbeat");
    ok(await act(timed.api, room, t1.id, "submit", { agent_id: "w", lease_token: c1.body.lease_token, status: "completed", summary: "ok", artifacts: [{ type: "text", ref: "a", sha256: sha256("a") }] }), "submit");
    ok(await act(timed.api, room, t1.id, "review", { agent_id: "rev", decision: "needs_fix", note: "more" }), "needs_fix");
    const c1b = await claim(timed.api, room, t1.id, "w");
    ok(c1b, "re-claim");
    ok(await act(timed.api, room, t1.id, "submit", { agent_id: "w", lease_token: c1b.body.lease_token, status: "completed", summary: "ok2" }), "second submit");
    ok(await act(timed.api, room, t1.id, "review", { agent_id: "rev", decision: "accept" }), "accept");
    const c2 = await claim(timed.api, room, t2.id, "signed", { lease_s: 30, sig: signer.signWrite(room, "task.claimed", "signed", { task_id: t2.id, lease_s: 30 }) });
    assert.equal(c2.status, 200, JSON.stringify(c2.body));
    ok(await act(timed.api, room, t3.id, "cancel", { agent_id: "boss" }), "cancel");
    const task1 = (await timed.api.get(`${base(room)}/tasks/${t1.id}`)).body;
    assert.equal(task1.status, "accepted");
    assert.deepEqual(task1.history.map((e: { type: string }) => e.type), [
      "task.created", "task.claimed", "task.heartbeat", "task.submitted", "task.reviewed", "task.claimed", "task.submitted", "task.reviewed",
    ]);
    assert.deepEqual(task1.history.filter((e: { type: string }) => e.type === "task.reviewed").map((e: { payload: { decision: string } }) => e.payload.decision), ["needs_fix", "accept"]);
    assert.equal((await timed.api.get(`${base(room)}/tasks/${t3.id}`)).body.status, "cancelled");
    clock.advance(31_000);
    await join(timed.api, room, "signed", ["x"], { sig: signer.signWrite(room, "agent.heartbeat", "signed", { capabilities: ["x"] }) });
    await sweepBoards(timed.server.svc); // the lease runs out → failed (budget 1); w and rev are lost after 30 s
    assert.equal((await timed.api.get(`${base(room)}/tasks/${t2.id}`)).body.status, "failed");
    const clean = await timed.api.post(`${base(room)}/verify`, {});
    assert.equal(clean.body.verdict, "CLEAN", clean.body.explanation + JSON.stringify(clean.body.failures));
    assert.equal(clean.body.details.projections.tasks, 3);

    await rawSql(timed.server.svc, "UPDATE tasks SET status = 'accepted' WHERE room = ? AND id = ?", [room, t2.id]);
    const refuted = await timed.api.post(`${base(room)}/verify`, {});
    assert.equal(refuted.body.verdict, "REFUTED");
    assert.deepEqual(refuted.body.failures.map((f: { seq: number; type: string }) => [f.seq, f.type]), [[t2.id, "projection"]]);
  });
});
