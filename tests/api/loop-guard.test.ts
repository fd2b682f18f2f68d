// The loop guard of open rooms (SPEC 12): counters readable in GET /api/rooms/{id} before they
// trip, 429 loop_guard with Retry-After for a streak on every door (REST, MCP, A2A), and one alert
// (the owner's alerts webhook and the admin console) for two agents alone exchanging too much.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ManualClock, startApi, withApi, type TestApi } from "../helpers/server";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver";
import { waitUntil } from "../helpers/wait";
import { connectMcp, fails, ok } from "../helpers/mcp";
import type { StoreWriter, WriteOptions } from "../../lib/store/types";

const ADMIN = "admin-token-for-loop-guard-tests";
const admin = { authorization: `Bearer ${ADMIN}` };
/** Three in a row at most; a pause of a minute ends a streak; more than four between two agents in ten minutes alerts. */
const GUARD = {
  PARLEY_LOOP_GUARD_STREAK: "3",
  PARLEY_LOOP_GUARD_PAUSE: "60s",
  PARLEY_LOOP_GUARD_PAIR: "4",
  PARLEY_LOOP_GUARD_WINDOW: "10m",
  PARLEY_ADMIN_TOKEN: ADMIN,
  PARLEY_WEBHOOK_ALLOW_PRIVATE: "1",
  PARLEY_WEBHOOK_INTERVAL: "100ms",
};

let f: TestApi;
let rx: Receiver;
const clock = new ManualClock(Date.now());
before(async () => {
  rx = await startReceiver();
  f = await startApi(GUARD, { clock });
});
after(async () => {
  await f.close();
  await rx.close();
});

const info = async (room: string) => (await f.api.get(`/api/rooms/${room}`)).body;
const say = (room: string, agent: string, text = `${agent} says ${Math.random()}`) => f.api.say(room, agent, text);
const loopAlerts = async (room: string) => ((await f.api.get("/api/admin/alerts", admin)).body.alerts as { kind: string; room: string; detail: any }[]).filter((a) => a.room === room);

describe("the counters", () => {
  test("GET /api/rooms/{id} shows the streak and the pair, with their limits, before either trips", async () => {
    const { uuid } = await f.api.room();
    assert.deepEqual((await info(uuid)).loop_guard, { streak: null, pair: null }, "nothing said yet");
    await say(uuid, "ann");
    await say(uuid, "ann");
    assert.deepEqual((await info(uuid)).loop_guard, { streak: { agent_id: "ann", count: 2, limit: 3 }, pair: null });
    await say(uuid, "bob");
    assert.deepEqual((await info(uuid)).loop_guard, {
      streak: { agent_id: "bob", count: 1, limit: 3 },
      pair: { agents: ["bob", "ann"], count: 3, limit: 4, window_s: 600 },
    });
    await say(uuid, "cy");
    assert.deepEqual((await info(uuid)).loop_guard.pair, { agents: ["cy", "bob"], count: 2, limit: 4, window_s: 600 }, "a third agent starts a new pair");
  });

  test("a turns room has no loop guard: its counters are null", async () => {
    const r = await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["ann", "bob"] } });
    assert.equal(r.status, 201);
    assert.equal((await info(r.body.uuid)).loop_guard, null);
  });
});

describe("a streak", () => {
  test("the message past the limit is 429 loop_guard with Retry-After and a sentence, and writes nothing; another agent's message lifts it", async () => {
    const { uuid } = await f.api.room();
    for (let i = 0; i < 3; i++) assert.equal((await say(uuid, "ann")).status, 201);
    const size = (await info(uuid)).head.size;
    const refused = await say(uuid, "ann", "one more");
    assert.equal(refused.status, 429);
    assert.equal(refused.body.code, "loop_guard");
    assert.equal(refused.headers.get("retry-after"), "60");
    assert.match(refused.body.detail, /"ann" has posted 3 messages in a row and nobody else has spoken/);
    assert.match(refused.body.detail, /Retry-After/);
    assert.equal((await info(uuid)).head.size, size, "nothing was appended");
    assert.equal((await say(uuid, "bob")).status, 201);
    assert.equal((await say(uuid, "ann")).status, 201, "someone else spoke: the streak is over");
  });

  test("names compare by key: ann, Ann and ANN are one streak", async () => {
    const { uuid } = await f.api.room();
    for (const name of ["ann", "Ann", "ANN"]) assert.equal((await say(uuid, name)).status, 201);
    assert.equal((await say(uuid, " ann ")).body.code, "loop_guard");
    assert.equal((await say(uuid, "bob")).status, 201, "others may still post");
  });

  test("a pause ends the streak: Retry-After counts down to it", async () => {
    const { uuid } = await f.api.room();
    for (let i = 0; i < 3; i++) await say(uuid, "ann");
    clock.advance(30_000);
    const waiting = await say(uuid, "ann");
    assert.equal(waiting.body.code, "loop_guard");
    assert.equal(waiting.headers.get("retry-after"), "30");
    clock.advance(30_000);
    assert.equal((await say(uuid, "ann")).status, 201, "after the pause it may post");
    assert.deepEqual((await info(uuid)).loop_guard.streak, { agent_id: "ann", count: 1, limit: 3 }, "a new streak of one");
  });

  test("messages far apart are no streak", async () => {
    const { uuid } = await f.api.room();
    for (let i = 0; i < 5; i++) {
      assert.equal((await say(uuid, "slow")).status, 201, `message ${i + 1}`);
      clock.advance(61_000);
    }
  });

  test("the refusal is the same over MCP and A2A", async () => {
    const { uuid } = await f.api.room();
    for (let i = 0; i < 3; i++) await say(uuid, "ann");
    const mcp = await connectMcp(f.url);
    try {
      const e = await fails(mcp, "send_message", { room: uuid, agent_id: "ann", text: "over MCP" }, "loop_guard");
      assert.equal(e.retry_after, 60);
      await ok(mcp, "send_message", { room: uuid, agent_id: "bob", text: "bob over MCP" });
    } finally {
      await mcp.close();
    }
    for (let i = 0; i < 2; i++) await say(uuid, "bob");
    const res = await fetch(`${f.url}/a2a/${uuid}`, {
      method: "POST",
      headers: { "content-type": "application/json", "A2A-Version": "1.0" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "lg-1", role: "ROLE_USER", parts: [{ text: "over A2A" }], metadata: { agent_id: "bob" } } } }),
    });
    const body = (await res.json()) as { error?: { code: number; data?: { metadata?: Record<string, string> }[] } };
    assert.equal(body.error?.code, -32603, "A2A's try-again-later error");
    const meta = body.error?.data?.find((d) => d.metadata)?.metadata;
    assert.deepEqual([meta?.code, meta?.retry_after], ["loop_guard", "60"]);
  });

  test("the owner and the admin console hear of a streak once, however many posts it refuses", async () => {
    const room = await f.api.room();
    const hook = await f.api.post(`/api/rooms/${room.uuid}/webhooks`, { url: `${rx.url}/streak`, kind: "alerts" }, { authorization: `Bearer ${room.owner_token}` });
    assert.equal(hook.status, 201);
    for (let i = 0; i < 3; i++) await say(room.uuid, "ann");
    for (let i = 0; i < 3; i++) assert.equal((await say(room.uuid, "ann")).body.code, "loop_guard");
    const alerts = await loopAlerts(room.uuid);
    assert.deepEqual(alerts.map((a) => [a.kind, a.detail.agent_id, a.detail.count]), [["loop_guard_streak", "ann", 3]]);
    await waitUntil("the owner's alert", async () => rx.at("/streak").length >= 1, 10_000);
    const got = rx.at("/streak");
    assert.equal(got.length, 1);
    assert.equal(got[0]!.headers["x-parley-event"], "alert.loop_guard");
    assert.equal(got[0]!.body.alert.detail.rule, "streak");
    // A new streak (after someone else spoke) is a new alert.
    await say(room.uuid, "bob");
    for (let i = 0; i < 4; i++) await say(room.uuid, "ann");
    assert.equal((await loopAlerts(room.uuid)).filter((a) => a.kind === "loop_guard_streak").length, 2);
  });
});

describe("a pair", () => {
  test("two agents alone past the limit raise one alert per window, and nobody is refused", async () => {
    const room = await f.api.room();
    const hook = await f.api.post(`/api/rooms/${room.uuid}/webhooks`, { url: `${rx.url}/pair`, kind: "alerts" }, { authorization: `Bearer ${room.owner_token}` });
    assert.equal(hook.status, 201);
    for (let i = 0; i < 4; i++) assert.equal((await say(room.uuid, i % 2 ? "bob" : "ann")).status, 201);
    assert.deepEqual(await loopAlerts(room.uuid), [], "at the limit: no alert yet");
    assert.equal((await info(room.uuid)).loop_guard.pair.count, 4);
    for (let i = 0; i < 4; i++) assert.equal((await say(room.uuid, i % 2 ? "bob" : "ann")).status, 201, "the pair is never refused");
    const alerts = await loopAlerts(room.uuid);
    assert.equal(alerts.length, 1, "one alert for the window");
    assert.equal(alerts[0]!.kind, "loop_guard_pair");
    assert.deepEqual(new Set(alerts[0]!.detail.agents), new Set(["ann", "bob"]));
    assert.equal(alerts[0]!.detail.count, 5, "raised by the message past the limit");
    await waitUntil("the owner's alert", async () => rx.at("/pair").length >= 1, 10_000);
    assert.equal(rx.at("/pair")[0]!.body.alert.detail.rule, "pair");
    // Once the window has passed, a pair still at it is told about again.
    clock.advance(10 * 60_000 + 1_000);
    for (let i = 0; i < 5; i++) await say(room.uuid, i % 2 ? "bob" : "ann");
    assert.equal((await loopAlerts(room.uuid)).length, 2);
  });

  test("old messages fall out of the window", async () => {
    const { uuid } = await f.api.room();
    for (let i = 0; i < 4; i++) await say(uuid, i % 2 ? "bob" : "ann");
    clock.advance(10 * 60_000 + 1_000);
    await say(uuid, "ann");
    assert.equal((await info(uuid)).loop_guard.pair, null, "alone in the window: no pair");
    await say(uuid, "bob");
    assert.equal((await info(uuid)).loop_guard.pair.count, 2);
    assert.deepEqual(await loopAlerts(uuid), []);
  });
});

test("a run of posts reads the room's newest messages once: each post's guard starts from the window the last one left", async () => {
  const store = f.server.svc.store;
  const write = store.write;
  let reads = 0;
  store.write = <T>(rooms: readonly string[], fn: (w: StoreWriter) => Promise<T>, options?: WriteOptions) =>
    write.call(store, rooms, (w) => fn(Object.assign(Object.create(w) as StoreWriter, { recentSpeakers: (room: string, limit: number) => (reads++, w.recentSpeakers(room, limit)) })), options) as Promise<T>;
  try {
    const { uuid } = await f.api.room();
    const agents = ["ann", "bob", "cy", "dee"];
    for (let i = 0; i < 12; i++) assert.equal((await say(uuid, agents[i % 4]!)).status, 201);
    assert.equal(reads, 1, "only the first post read the room's messages");
    for (let i = 0; i < 3; i++) assert.equal((await say(uuid, "eve")).status, 201);
    assert.equal((await say(uuid, "eve")).status, 429, "the kept window counts a streak as the rows would");
    assert.equal(reads, 1);
    // Anything else that moves the head (here a task) gives the room another last leaf: the next
    // post reads the rows again.
    assert.equal((await f.api.post(`/api/rooms/${uuid}/tasks`, { agent_id: "fay", title: "Break the streak" })).status, 201);
    assert.equal((await say(uuid, "eve")).status, 429, "read again: eve's streak is still there");
    assert.equal(reads, 2);
    assert.equal((await say(uuid, "fay")).status, 201);
    assert.equal((await say(uuid, "eve")).status, 201, "fay spoke: the streak is over");
    assert.equal(reads, 2);
  } finally {
    store.write = write;
  }
});

test("0 turns each rule off", async () => {
  await withApi({ PARLEY_LOOP_GUARD_STREAK: "0", PARLEY_LOOP_GUARD_PAIR: "0" }, async (off) => {
    const { uuid } = await off.api.room();
    for (let i = 0; i < 25; i++) assert.equal((await off.api.say(uuid, "ann", `m${i}`)).status, 201);
    assert.deepEqual((await off.api.get(`/api/rooms/${uuid}`)).body.loop_guard, { streak: null, pair: null });
  });
});
