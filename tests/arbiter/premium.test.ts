import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { client, startTestServer } from "../helpers/server";
import { arbiterEnv, dslModel, startFakeLlm, type FakeCall, type FakeLlm } from "../helpers/fake-llm";
import type { RunningServer } from "../../server";

let llm: FakeLlm;
let server: RunningServer;
let api: ReturnType<typeof client>;

before(async () => {
  llm = await startFakeLlm();
  server = await startTestServer(arbiterEnv(llm, { PARLEY_ARBITER_COALESCE: "300ms" }));
  api = client(server.url);
});
after(async () => {
  await server.close();
  await llm.close();
});
beforeEach(() => {
  llm.reset();
  llm.latencyMs = 0;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 5_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const watermark = async (room: string) => (await api.get(`/api/rooms/${room}/context`)).body.last_extracted_msg_id as number;

/** Counts overlapping calls. */
function tracking() {
  let inflight = 0;
  const stats = { max: 0 };
  const handler = async (c: FakeCall) => {
    inflight++;
    stats.max = Math.max(stats.max, inflight);
    try {
      await sleep(llm.latencyMs);
      return dslModel(c);
    } finally {
      inflight--;
    }
  };
  return { handler, stats };
}

describe("premium rooms extract in the background", () => {
  test("messages that arrive within the window go into one call", async () => {
    const { uuid: room } = await api.room({ protocol_mode: "premium" });
    // Posted together, so a loaded machine cannot stretch them past the window.
    const posted = await Promise.all(Array.from({ length: 6 }, (_, i) => api.say(room, `agent-${i % 3}`, `PROPOSE item ${i}: ${i}.`)));
    const last = Math.max(...posted.map((p) => p.body.id as number));
    await until("the ledger to reflect the last message", async () => (await watermark(room)) >= last);
    assert.equal(llm.count, 1);
    assert.equal(llm.calls[0]!.data.messages.length, 6);
    const ctx = (await api.get(`/api/rooms/${room}/context`)).body;
    assert.equal(ctx.threads.length, 6);
    assert.equal(ctx.arbiter_active, true);
    const info = (await api.get(`/api/rooms/${room}`)).body;
    assert.equal(info.arbiter.calls, 1);
    assert.equal(info.arbiter.items, 6);
    await sleep(400);
    assert.equal(llm.count, 1, "the arbiter's own appends do not start another call");
  });

  test("one extraction at a time: messages during a call go into the next one", async () => {
    const { handler, stats } = tracking();
    llm.setHandler(handler);
    llm.latencyMs = 600;
    const { uuid: room } = await api.room({ protocol_mode: "premium" });
    await api.say(room, "alice", "PROPOSE first: 1.");
    await until("the first call", async () => llm.count === 1);
    const posted = await Promise.all(Array.from({ length: 3 }, (_, i) => api.say(room, "bob", `PROPOSE during ${i}: ${i}.`)));
    const last = Math.max(...posted.map((p) => p.body.id as number));
    // A refresh while the worker runs waits for it instead of overlapping.
    const refreshed = await api.post(`/api/rooms/${room}/context/refresh`);
    assert.equal(refreshed.status, 200);
    await until("the ledger to reflect the last message", async () => (await watermark(room)) >= last);
    await sleep(500);
    assert.equal(stats.max, 1, "never two calls at once for one room");
    assert.equal(llm.count, 2, "the three messages posted during the first call share the second");
    assert.equal(llm.calls[1]!.data.messages.length, 3);
    assert.equal((await api.get(`/api/rooms/${room}/context`)).body.threads.length, 4);
  });

  test("standard rooms extract only on refresh", async () => {
    const { uuid: room } = await api.room();
    await api.say(room, "alice", "PROPOSE x: 1.");
    await sleep(600);
    assert.equal(llm.count, 0);
    const ctx = (await api.get(`/api/rooms/${room}/context`)).body;
    assert.equal(ctx.arbiter_active, false);
    assert.equal(ctx.threads.length, 0);
  });

  test("an outage in the background is recorded on the room and blocks nothing", async () => {
    llm.setHandler(() => ({ status: 503 }));
    const { uuid: room } = await api.room({ protocol_mode: "premium" });
    await api.say(room, "alice", "PROPOSE x: 1.");
    const info = await until("the error to be recorded", async () => {
      const body = (await api.get(`/api/rooms/${room}`)).body;
      return body.last_extraction_error ? body : undefined;
    });
    assert.match(info.last_extraction_error, /HTTP 503/);
    assert.equal(info.arbiter.last_extracted_msg_id, 0);
    assert.equal((await api.say(room, "bob", "still here")).status, 201);
    llm.setHandler(dslModel);
    const r = await api.post(`/api/rooms/${room}/context/refresh`);
    assert.equal(r.status, 200);
    assert.equal(r.body.threads.length, 1);
  });

  test("closing the server stops pending timers and calls", async () => {
    const other = await startTestServer(arbiterEnv(llm, { PARLEY_ARBITER_COALESCE: "200ms" }));
    const a = client(other.url);
    const { uuid: room } = await a.room({ protocol_mode: "premium" });
    await a.say(room, "alice", "PROPOSE x: 1.");
    await other.close();
    await sleep(400);
    assert.equal(llm.count, 0);

    // And a call in flight is abandoned, not applied to a closed store.
    llm.latencyMs = 5_000;
    const third = await startTestServer(arbiterEnv(llm, { PARLEY_ARBITER_COALESCE: "10ms" }));
    const b = client(third.url);
    const { uuid: room3 } = await b.room({ protocol_mode: "premium" });
    await b.say(room3, "alice", "PROPOSE x: 1.");
    await until("the call", async () => llm.count === 1);
    const t0 = Date.now();
    await third.close();
    assert.ok(Date.now() - t0 < 2_000, "close does not wait for the provider");
  });
});

describe("without an arbiter", () => {
  let bare: RunningServer;
  let b: ReturnType<typeof client>;
  before(async () => {
    bare = await startTestServer();
    b = client(bare.url);
  });
  after(() => bare.close());

  test("premium rooms are refused with 503 and refresh answers 503 arbiter_unavailable; the rest works", async () => {
    const premium = await b.post("/api/rooms", { protocol_mode: "premium" });
    assert.equal(premium.status, 503);
    assert.equal(premium.body.code, "arbiter_unavailable");
    const { uuid: room, owner_token } = await b.room();
    await b.say(room, "alice", "hello");
    for (const query of ["", "?full=true"]) {
      const r = await b.post(`/api/rooms/${room}/context/refresh${query}`, undefined, { authorization: `Bearer ${owner_token}` });
      assert.equal(r.status, 503);
      assert.equal(r.body.code, "arbiter_unavailable");
    }
    assert.equal((await b.get(`/api/rooms/${room}/context`)).status, 200);
    assert.equal((await b.post(`/api/rooms/${room}/claims`, { subject: "X", value: "1", opened_by: "alice" })).status, 201);
  });

  test("refresh of an unknown room is 404, of a malformed id 400", async () => {
    assert.equal((await b.post("/api/rooms/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23/context/refresh")).status, 404);
    assert.equal((await b.post("/api/rooms/nope/context/refresh")).status, 400);
  });
});
