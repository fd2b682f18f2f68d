import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startApi, withApi, type TestApi } from "../helpers/server";

let f: TestApi;
before(async () => {
  f = await startApi({
    PARLEY_RATE_ROOMS_PER_HOUR: "3",
    PARLEY_RATE_POSTS_PER_MINUTE: "8",
    PARLEY_RATE_AGENT_POSTS_PER_MINUTE: "3",
    PARLEY_RATE_REQUESTS_PER_MINUTE: "0",
    PARLEY_TRUST_PROXY: "1",
  });
});
after(() => f.close());

const from = (ip: string) => ({ "x-forwarded-for": ip });

test("room creation is limited per client with Retry-After", async () => {
  for (let i = 0; i < 3; i++) assert.equal((await f.api.post("/api/rooms", {}, from("10.0.0.1"))).status, 201);
  const limited = await f.api.post("/api/rooms", {}, from("10.0.0.1"));
  assert.equal(limited.status, 429);
  assert.equal(limited.body.code, "rate_limited");
  assert.ok(Number(limited.headers.get("retry-after")) >= 1);
  assert.equal((await f.api.post("/api/rooms", {}, from("10.0.0.2"))).status, 201, "another client has its own bucket");
});

test("posts are limited per (room, agent) and per client", async () => {
  const room = (await f.api.post("/api/rooms", {}, from("10.0.1.1"))).body.uuid;
  const say = (agent: string, ip: string) => f.api.post(`/api/rooms/${room}/messages`, { agent_id: agent, text: "hi" }, from(ip));
  for (let i = 0; i < 3; i++) assert.equal((await say("ann", "10.0.1.2")).status, 201);
  const agentLimited = await say("ann", "10.0.1.3");
  assert.equal(agentLimited.status, 429);
  assert.equal(agentLimited.body.code, "rate_limited");
  for (let i = 0; i < 5; i++) assert.equal((await say(`agent${i}`, "10.0.1.2")).status, 201);
  const clientLimited = await say("zed", "10.0.1.2");
  assert.equal(clientLimited.status, 429);
  const info = await f.api.get(`/api/rooms/${room}`);
  assert.equal(info.body.message_count, 8, "limited posts stored nothing");
});

test("X-Forwarded-For is ignored unless PARLEY_TRUST_PROXY is set", async () => {
  await withApi({ PARLEY_RATE_ROOMS_PER_HOUR: "1" }, async ({ api: c }) => {
    assert.equal((await c.post("/api/rooms", {}, from("10.9.0.1"))).status, 201);
    assert.equal((await c.post("/api/rooms", {}, from("10.9.0.2"))).status, 429, "both came from the same socket peer");
  });
});

test("the general request budget applies to reads", async () => {
  await withApi({ PARLEY_RATE_REQUESTS_PER_MINUTE: "2" }, async ({ api: c }) => {
    assert.equal((await c.get("/health")).status, 200);
    assert.equal((await c.get("/health")).status, 200);
    const r = await c.get("/health");
    assert.equal(r.status, 429);
    assert.equal(r.body.code, "rate_limited");
  });
});

test("concurrent requests of several clients over their budgets: each client gets exactly its budget, taken together", async () => {
  await withApi({ PARLEY_RATE_REQUESTS_PER_MINUTE: "5", PARLEY_TRUST_PROXY: "1" }, async ({ api: c }) => {
    const clients = ["10.7.0.1", "10.7.0.2", "10.7.0.3"];
    // Six at once from each (new buckets), then three more from each (the buckets exist now).
    for (const [round, each, budget] of [[1, 6, 5], [2, 3, 0]] as const) {
      const answers = await Promise.all(clients.flatMap((ip) => Array.from({ length: each }, () => c.get("/health", from(ip)).then((r) => ({ ip, r })))));
      for (const ip of clients) {
        const mine = answers.filter((a) => a.ip === ip).map((a) => a.r);
        assert.equal(mine.filter((r) => r.status === 200).length, budget, `round ${round}, ${ip}: ${budget} answered`);
        for (const r of mine.filter((r) => r.status !== 200)) {
          assert.equal(r.status, 429);
          assert.equal(r.body.code, "rate_limited");
          assert.ok(Number(r.headers.get("retry-after")) >= 1);
        }
      }
    }
  });
});
