import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { client, startTestServer } from "../helpers/server";
import { dslModel, startArbiterApi, type ArbiterApi, type FakeCall } from "../helpers/fake-llm";
import type { RunningServer } from "../../server";

let f: ArbiterApi;
before(async () => (f = await startArbiterApi({ PARLEY_ARBITER_COALESCE: "300ms" })));
after(() => f.close());
beforeEach(() => {
  f.llm.reset();
  f.llm.latencyMs = 0;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until fn answers; the timeout only bounds a test that would otherwise hang. */
async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 5_000): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const watermark = async (room: string, a = f.api) => (await a.get(`/api/rooms/${room}/context`)).body.last_extracted_msg_id as number;
const texts = (c: FakeCall) => c.data.messages.map((m) => m.text);

/**
 * "Nothing else happens" without a sleep: posts a distinguishable message to a premium room and
 * waits until the arbiter has extracted it. Its coalesce window opens after whatever the test
 * wants to rule out, so an unwanted call would have been made before this one; the caller then
 * asserts on the calls the fake saw. Returns the sentinel call.
 */
async function sentinel(room: string, a = f.api, text = "SENTINEL. PROPOSE sentinel: 1."): Promise<FakeCall> {
  const id = (await a.say(room, "sentinel", text)).body.id as number;
  await until("the sentinel to be extracted", async () => (await watermark(room, a)) >= id);
  const seen = f.llm.calls.filter((c) => texts(c).includes(text));
  assert.equal(seen.length, 1, "the sentinel went to the provider once");
  return seen[0]!;
}

/** Counts overlapping calls. */
function tracking() {
  let inflight = 0;
  const stats = { max: 0 };
  const handler = async (c: FakeCall) => {
    inflight++;
    stats.max = Math.max(stats.max, inflight);
    try {
      await sleep(f.llm.latencyMs);
      return dslModel(c);
    } finally {
      inflight--;
    }
  };
  return { handler, stats };
}

describe("premium rooms extract in the background", () => {
  test("messages that arrive within the window go into one call", async () => {
    // A window of its own, wide enough that six concurrent posts land in it on a loaded machine.
    const wide = await startArbiterApi({ PARLEY_ARBITER_COALESCE: "2s" }, { llm: f.llm });
    try {
      const a = wide.api;
      const { uuid: room } = await a.room({ protocol_mode: "premium" });
      // Posted together, so a loaded machine cannot stretch them past the window.
      const posted = await Promise.all(Array.from({ length: 6 }, (_, i) => a.say(room, `agent-${i % 3}`, `PROPOSE item ${i}: ${i}.`)));
      const last = Math.max(...posted.map((p) => p.body.id as number));
      await until("the ledger to reflect the last message", async () => (await watermark(room, a)) >= last);
      assert.equal(f.llm.count, 1);
      assert.equal(f.llm.calls[0]!.data.messages.length, 6);
      const ctx = (await a.get(`/api/rooms/${room}/context`)).body;
      assert.equal(ctx.threads.length, 6);
      assert.equal(ctx.arbiter_active, true);
      const info = (await a.get(`/api/rooms/${room}`)).body;
      assert.equal(info.arbiter.calls, 1);
      assert.equal(info.arbiter.items, 6);
      // The arbiter's own appends (the six threads) do not start another call: the next call is
      // the sentinel's, carrying the sentinel alone.
      const next = await sentinel(room, a);
      assert.equal(f.llm.count, 2, "the arbiter's own appends do not start another call");
      assert.equal(next, f.llm.calls[1]);
      assert.deepEqual(texts(next), ["SENTINEL. PROPOSE sentinel: 1."]);
    } finally {
      await wide.close();
    }
  });

  test("one extraction at a time: messages during a call go into the next one", async () => {
    const { handler, stats } = tracking();
    f.llm.setHandler(handler);
    f.llm.latencyMs = 600;
    const { uuid: room } = await f.api.room({ protocol_mode: "premium" });
    await f.api.say(room, "alice", "PROPOSE first: 1.");
    await until("the first call", async () => f.llm.count === 1);
    const posted = await Promise.all(Array.from({ length: 3 }, (_, i) => f.api.say(room, "bob", `PROPOSE during ${i}: ${i}.`)));
    const last = Math.max(...posted.map((p) => p.body.id as number));
    // A refresh while the worker runs waits for it instead of overlapping.
    const refreshed = await f.api.post(`/api/rooms/${room}/context/refresh`);
    assert.equal(refreshed.status, 200);
    await until("the ledger to reflect the last message", async () => (await watermark(room)) >= last);
    assert.equal((await f.api.get(`/api/rooms/${room}/context`)).body.threads.length, 4);
    // No third call for the same messages: the next one is the sentinel's, alone.
    const next = await sentinel(room);
    assert.equal(stats.max, 1, "never two calls at once for one room");
    assert.equal(f.llm.count, 3, "the three messages posted during the first call share the second");
    assert.deepEqual(texts(f.llm.calls[0]!), ["PROPOSE first: 1."]);
    assert.equal(f.llm.calls[1]!.data.messages.length, 3);
    assert.equal(next, f.llm.calls[2]);
    assert.deepEqual(texts(next), ["SENTINEL. PROPOSE sentinel: 1."]);
  });

  test("standard rooms extract only on refresh", async () => {
    const { uuid: room } = await f.api.room();
    await f.api.say(room, "alice", "STANDARD. PROPOSE x: 1.");
    // A premium room's message posted afterwards is extracted in the background; a background
    // run of the standard room would have been due first.
    const { uuid: premium } = await f.api.room({ protocol_mode: "premium" });
    const next = await sentinel(premium);
    assert.equal(f.llm.count, 1, "the only call is the premium room's");
    assert.equal(next, f.llm.calls[0]);
    assert.ok(!f.llm.calls.some((c) => texts(c).includes("STANDARD. PROPOSE x: 1.")));
    const ctx = (await f.api.get(`/api/rooms/${room}/context`)).body;
    assert.equal(ctx.arbiter_active, false);
    assert.equal(ctx.threads.length, 0);
    assert.equal(ctx.last_extracted_msg_id, 0);
  });

  test("an outage in the background is recorded on the room and blocks nothing", async () => {
    f.llm.setHandler(() => ({ status: 503 }));
    const { uuid: room } = await f.api.room({ protocol_mode: "premium" });
    await f.api.say(room, "alice", "PROPOSE x: 1.");
    const info = await until("the error to be recorded", async () => {
      const body = (await f.api.get(`/api/rooms/${room}`)).body;
      return body.last_extraction_error ? body : undefined;
    });
    assert.match(info.last_extraction_error, /HTTP 503/);
    assert.equal(info.arbiter.last_extracted_msg_id, 0);
    assert.equal((await f.api.say(room, "bob", "still here")).status, 201);
    f.llm.setHandler(dslModel);
    const r = await f.api.post(`/api/rooms/${room}/context/refresh`);
    assert.equal(r.status, 200);
    assert.equal(r.body.threads.length, 1);
  });

  test("closing the server stops pending timers and calls", async () => {
    const other = await startArbiterApi({ PARLEY_ARBITER_COALESCE: "200ms" }, { llm: f.llm });
    const { uuid: room } = await other.api.room({ protocol_mode: "premium" });
    await other.api.say(room, "alice", "PENDING. PROPOSE x: 1.");
    // The post is heard (is the room premium, anything to extract?) while the server closes: what
    // that finds of the closed store is no fault to report.
    const reported: string[] = [];
    const consoleError = console.error;
    console.error = (...args: unknown[]) => {
      reported.push(args.map(String).join(" "));
      consoleError(...args);
    };
    let next: unknown;
    try {
      await other.close();
      // The closed server's timer (200 ms) was due before the sentinel's (300 ms, armed later).
      const { uuid: live } = await f.api.room({ protocol_mode: "premium" });
      next = await sentinel(live);
    } finally {
      console.error = consoleError;
    }
    assert.deepEqual(reported.filter((line) => line.startsWith("arbiter worker")), []);
    assert.equal(f.llm.count, 1, "the closed server made no call");
    assert.equal(next, f.llm.calls[0]);
    assert.ok(!f.llm.calls.some((c) => texts(c).includes("PENDING. PROPOSE x: 1.")));

    // And a call in flight is abandoned, not applied to a closed store: the provider would
    // answer well before the server's own timeout, so only closing can cut the call short.
    f.llm.reset();
    f.llm.latencyMs = 3_000;
    const third = await startArbiterApi({ PARLEY_ARBITER_COALESCE: "10ms", PARLEY_ARBITER_TIMEOUT: "60s" }, { llm: f.llm });
    const dataDir = third.server.svc.config.dataDir;
    const { uuid: room3 } = await third.api.room({ protocol_mode: "premium" });
    await third.api.say(room3, "alice", "PROPOSE x: 1.");
    await until("the call", async () => f.llm.count === 1);
    await third.close();
    await until("the provider to see the call abandoned", async () => f.llm.aborted === 1);
    assert.equal(f.llm.count, 1, "no retry after closing");
    assert.equal(f.llm.calls[0]!.aborted, true);
    // Reopened on the same data, the room shows nothing applied from that call.
    const reopened = await startTestServer({ PARLEY_DATA_DIR: dataDir });
    try {
      const ctx = (await client(reopened.url).get(`/api/rooms/${room3}/context`)).body;
      assert.equal(ctx.last_extracted_msg_id, 0);
      assert.equal(ctx.threads.length, 0);
      assert.equal(ctx.last_extraction_error, null);
    } finally {
      await reopened.close();
    }
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
    assert.equal((await b.post("/api/rooms/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23/context/refresh")).body.code, "room_not_found");
    assert.equal((await b.post("/api/rooms/nope/context/refresh")).body.code, "invalid_uuid");
  });
});
