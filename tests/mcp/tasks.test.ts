import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { connectMcp, fails as failsOn, ok as okOn } from "../helpers/mcp";
import { testAgent } from "../helpers/agent";
import { client, startTestServer } from "../helpers/server";
import type { RunningServer } from "../../server";

describe("MCP task board tools", () => {
  let server: RunningServer;
  let mcp: Client;
  before(async () => {
    server = await startTestServer();
    mcp = await connectMcp(server.url);
  });
  after(async () => {
    await mcp.close();
    await server.close();
  });
  const ok = (name: string, args: Record<string, unknown>) => okOn(mcp, name, args);
  const fails = (name: string, args: Record<string, unknown>) => failsOn(mcp, name, args);

  test("create → join_board → claim → submit → review, the same rules as REST", async () => {
    const room = (await client(server.url).room()).uuid;
    const created = await ok("create_task", { room, agent_id: "planner", title: "Benchmark the parser", requires: ["bench"], reviewer: "checker", priority: 9 });
    const tid = created.task.id as number;
    assert.equal(created.task.status, "open");
    assert.equal((await fails("claim_task", { room, agent_id: "coder", task_id: tid })).code, "capability_mismatch", "not on the board yet");
    assert.equal((await ok("join_board", { room, agent_id: "coder", capabilities: ["python"] })).event, "agent.joined");
    assert.equal((await fails("claim_task", { room, agent_id: "coder", task_id: tid })).code, "capability_mismatch");
    const none = await ok("claim_task", { room, agent_id: "coder" });
    assert.equal(none.task, null, "claim-next never hands out a task the agent lacks a capability for");
    await ok("join_board", { room, agent_id: "bencher", capabilities: ["bench"] });
    const claimed = await ok("claim_task", { room, agent_id: "bencher" });
    assert.equal(claimed.task.id, tid);
    assert.equal(claimed.task.status, "claimed");
    const token = claimed.lease_token as string;
    assert.equal((await fails("claim_task", { room, agent_id: "bencher", task_id: tid })).code, "invalid_transition");
    const hb = await ok("update_task", { room, task_id: tid, agent_id: "bencher", lease_token: token, action: "heartbeat", progress: "warming up" });
    assert.equal(hb.task.status, "claimed");
    assert.equal((await fails("update_task", { room, task_id: tid, agent_id: "bencher", lease_token: "wrong", action: "release" })).code, "lease_conflict");
    const sub = await ok("update_task", { room, task_id: tid, agent_id: "bencher", lease_token: token, action: "submit", status: "completed", summary: "2x faster", artifacts: [{ type: "commit", ref: "deadbeef" }] });
    assert.equal(sub.task.status, "submitted");
    assert.equal((await fails("review_task", { room, task_id: tid, agent_id: "bencher", decision: "accept" })).code, "self_review");
    const listed = await ok("list_tasks", { room, status: "submitted" });
    assert.deepEqual(listed.tasks.map((t: { id: number }) => t.id), [tid]);
    const reviewed = await ok("review_task", { room, task_id: tid, agent_id: "checker", decision: "accept", note: "verified" });
    assert.equal(reviewed.task.status, "accepted");
    const rest = await client(server.url).get(`/api/rooms/${room}/tasks/${tid}`);
    assert.equal(rest.body.review.reviewer, "checker");
    assert.equal(rest.body.receipt.artifacts[0].ref, "deadbeef");
    assert.equal((await fails("update_task", { room, task_id: tid, agent_id: "x", lease_token: "t", action: "explode" })).code, "validation_error");
    for (const [name, args] of [["claim_task", { agent_id: "bencher", task_id: "1" }], ["update_task", { agent_id: "bencher", lease_token: token, action: "release" }], ["review_task", { task_id: 0, decision: "accept" }]] as const) {
      const bad = await fails(name, { room, ...args });
      assert.equal(bad.code, "validation_error", name);
      assert.match(bad.detail, /^task_id: /, name);
    }
  });

  test("a signed agent joins the board and claims over MCP, each write with its own sig", async () => {
    const room = (await client(server.url).room()).uuid;
    const tid = (await ok("create_task", { room, agent_id: "planner", title: "Sign here", requires: ["crypto"] })).task.id as number;
    const worker = testAgent();
    const joined = await ok("join_board", { room, agent_id: "signer", capabilities: ["crypto"], sig: worker.signWrite(room, "agent.joined", "signer", { capabilities: ["crypto"] }) });
    assert.deepEqual([joined.event, joined.auth], ["agent.joined", "signed"]);
    // The key is pinned now: an unsigned join or claim under this agent_id is refused and stores nothing.
    assert.equal((await fails("join_board", { room, agent_id: "signer", capabilities: ["crypto"] })).code, "signature_required");
    assert.equal((await fails("claim_task", { room, agent_id: "signer", task_id: tid })).code, "signature_required");
    const refreshed = await ok("join_board", { room, agent_id: "signer", capabilities: ["crypto"], sig: worker.signWrite(room, "agent.heartbeat", "signer", { capabilities: ["crypto"] }) });
    assert.equal(refreshed.event, "agent.heartbeat");
    const claimed = await ok("claim_task", { room, agent_id: "signer", task_id: tid, sig: worker.signWrite(room, "task.claimed", "signer", { task_id: tid }) });
    assert.equal(claimed.task.status, "claimed");
    assert.equal(claimed.task.claimant, "signer");
    assert.equal(typeof claimed.lease_token, "string");
  });

  test("the room instructions explain the board once the room has one, and /agents.md in full", async () => {
    const api = client(server.url);
    const room = (await api.room()).uuid;
    const md = async () => (await fetch(`${server.url}/${room}`, { headers: { accept: "text/markdown" } })).text();
    assert.ok(!(await md()).includes("## Tasks"), "a room without tasks gets no task section");
    assert.equal((await api.post(`/api/rooms/${room}/tasks`, { agent_id: "lead", title: "Write the parser" })).status, 201);
    const withTasks = await md();
    for (const needle of ["## Tasks", "/tasks/claim-next", "lease_token", "/agents.md#tasks"]) assert.ok(withTasks.includes(needle), `room instructions mention ${needle}`);
    const full = await (await fetch(`${server.url}/agents.md`)).text();
    for (const needle of ["/tasks/claim-next", "lease_token", "self_review", "needs_fix", "capabilities", "base_revision"]) {
      assert.ok(full.includes(needle), `/agents.md mentions ${needle}`);
    }
  });
});
