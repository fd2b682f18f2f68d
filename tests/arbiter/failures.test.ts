import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { client, NO_LIMITS, startTestServer, tempDir } from "../helpers/server";
import { arbiterEnv, answer, dslModel, startArbiterApi, type ArbiterApi, type FakeCall } from "../helpers/fake-llm";
import { DEEPSEEK_DEFAULT_MODEL, loadConfig } from "../../lib/config";
import { startServer } from "../../server";

let f: ArbiterApi;
before(async () => (f = await startArbiterApi()));
after(() => f.close());
beforeEach(() => f.llm.reset());

const refresh = (a: ReturnType<typeof client>, room: string) => a.post(`/api/rooms/${room}/context/refresh`);
const hasPoison = (c: FakeCall) => c.data.messages.some((m) => m.text.includes("POISON"));

async function eventsOf(room: string): Promise<{ type: string; payload: any }[]> {
  return (await f.api.get(`/api/rooms/${room}/export`)).body.events;
}

/** A port nothing listens on. */
async function deadPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function assertSanitised(sentence: string) {
  assert.ok(sentence.length > 20 && sentence.length < 400, sentence);
  for (const leak of ["127.0.0.1", "http", "/v1", "sk-test", "SECRET", "Error:", "    at ", "node:", ".ts:"]) {
    assert.ok(!sentence.includes(leak), `"${leak}" leaks in: ${sentence}`);
  }
}

describe("failures never block the room", () => {
  test("a poison message is recorded (arbiter.failed) and skipped while later messages are extracted", async () => {
    const { uuid: room } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE a: 1.");
    const bad = (await f.api.say(room, "bob", "POISON: this one always breaks the model.")).body.id;
    for (let i = 0; i < 6; i++) await f.api.say(room, "carol", `PROPOSE later ${i}: ${i}.`);
    f.llm.setHandler((c) => (hasPoison(c) ? { content: "I am sorry, I cannot help with that." } : dslModel(c)));
    const r = await refresh(f.api, room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.extraction.failed_messages, [bad]);
    assert.equal(r.body.threads.length, 7, "every other message was extracted");
    assert.ok(r.body.last_extracted_msg_id > bad, "the watermark moved past the poison message");
    assert.ok(f.llm.count < 25, `isolating one message costs a bounded number of calls (${f.llm.count})`);
    const failed = (await eventsOf(room)).filter((e) => e.type === "arbiter.failed");
    assert.equal(failed.length, 1);
    assert.equal(failed[0]!.payload.msg_id, bad);
    assertSanitised(failed[0]!.payload.reason);
    const info = (await f.api.get(`/api/rooms/${room}`)).body;
    assert.equal(info.arbiter.calls, f.llm.count, "failed calls are counted too");
    // Nothing is retried for it later: the next refresh has nothing new.
    const again = await refresh(f.api, room);
    assert.equal(again.body.extraction.calls, 0);
  });

  test("a request the provider refuses (HTTP 400) for one message is poison too, not an outage", async () => {
    const { uuid: room } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE a: 1.");
    const bad = (await f.api.say(room, "bob", "POISON too long for the provider")).body.id;
    await f.api.say(room, "carol", "PROPOSE c: 3.");
    f.llm.setHandler((c) => (hasPoison(c) ? { status: 400, body: { error: { message: "context length exceeded", type: "invalid_request_error" } } } : dslModel(c)));
    const r = await refresh(f.api, room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.extraction.failed_messages, [bad]);
    assert.equal(r.body.threads.length, 2);
  });

  test("a provider that refuses every request, or a model that never answers JSON, is an outage: nothing is skipped", async () => {
    for (const reply of [{ status: 400, body: { error: { message: "Unsupported parameter: 'max_tokens'" } } }, { content: "I only speak prose." }]) {
      f.llm.reset();
      f.llm.setHandler(() => reply);
      const { uuid: room } = await f.api.room();
      await f.api.say(room, "alice", "PROPOSE a: 1.");
      await f.api.say(room, "bob", "PROPOSE b: 2.");
      const r = await refresh(f.api, room);
      assert.equal(r.status, 502, JSON.stringify(r.body));
      assert.equal(r.body.code, "arbiter_failed");
      assertSanitised(r.body.detail);
      assert.ok(!r.body.detail.includes("max_tokens") && !r.body.detail.includes("prose"), "nothing the provider said is repeated");
      const info = (await f.api.get(`/api/rooms/${room}`)).body;
      assert.equal(info.arbiter.last_extracted_msg_id, 0, "no message was skipped as poison");
      assert.equal((await eventsOf(room)).filter((e) => e.type === "arbiter.failed").length, 0);
    }
  });

  test("an outage answers 502 arbiter_failed, keeps the watermark and records a sanitised sentence", async () => {
    const { uuid: room } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE a: 1.");
    await refresh(f.api, room);
    const before = (await f.api.get(`/api/rooms/${room}`)).body;
    await f.api.say(room, "bob", "PROPOSE b: 2.");
    f.llm.reset();
    f.llm.setHandler(() => ({ status: 503 }));
    const r = await refresh(f.api, room);
    assert.equal(r.status, 502);
    assert.equal(r.body.code, "arbiter_failed");
    assertSanitised(r.body.detail);
    assert.match(r.body.detail, /HTTP 503/);
    assert.equal(f.llm.count, 3, "one attempt and two retries");
    const info = (await f.api.get(`/api/rooms/${room}`)).body;
    assert.equal(info.arbiter.last_extracted_msg_id, before.arbiter.last_extracted_msg_id, "the watermark stays");
    assert.equal(info.last_extraction_error, r.body.detail);
    assert.equal(info.arbiter.calls, before.arbiter.calls + 3);
    const ctx = (await f.api.get(`/api/rooms/${room}/context`)).body;
    assert.equal(ctx.last_extraction_error, r.body.detail);
    assert.equal(ctx.threads.length, 1);
    // Everything else still works during the outage.
    assert.equal((await f.api.say(room, "carol", "still talking")).status, 201);
    // The provider comes back: the same messages are extracted and the error clears.
    f.llm.setHandler(dslModel);
    const ok = await refresh(f.api, room);
    assert.equal(ok.status, 200);
    assert.equal(ok.body.threads.length, 2);
    assert.equal(ok.body.last_extraction_error, null);
  });

  test("an outage in the middle of a run keeps what was applied and stops there", async () => {
    const small = await startArbiterApi({ PARLEY_ARBITER_BATCH_MESSAGES: "2" }, { llm: f.llm });
    try {
      const a = small.api;
      const { uuid: room } = await a.room();
      const ids = [];
      for (let i = 0; i < 6; i++) ids.push((await a.say(room, "alice", `PROPOSE t${i}: ${i}.`)).body.id);
      f.llm.setHandler((c) => (c.n <= 1 ? dslModel(c) : { status: 500 }));
      const r = await refresh(a, room);
      assert.equal(r.status, 502);
      const info = (await a.get(`/api/rooms/${room}`)).body;
      assert.equal(info.arbiter.last_extracted_msg_id, ids[1], "the first batch (two messages) was applied");
      assert.match(info.last_extraction_error, new RegExp(`up to message ${ids[1]}`));
      assert.equal((await a.get(`/api/rooms/${room}/context`)).body.threads.length, 2);
    } finally {
      await small.close();
    }
  });

  test("an unreachable provider and a provider that hangs up are outages too", async () => {
    const down = await startTestServer({ ...arbiterEnv({ baseUrl: `http://127.0.0.1:${await deadPort()}/v1` }) });
    try {
      const a = client(down.url);
      const { uuid: room } = await a.room();
      await a.say(room, "alice", "PROPOSE a: 1.");
      const r = await refresh(a, room);
      assert.equal(r.status, 502);
      assert.match(r.body.detail, /could not be reached/);
      assertSanitised(r.body.detail);
    } finally {
      await down.close();
    }
    const { uuid: room } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE a: 1.");
    f.llm.setHandler(() => ({ hangup: true }));
    const r = await refresh(f.api, room);
    assert.equal(r.status, 502);
    assertSanitised(r.body.detail);
  });

  test("a provider slower than PARLEY_ARBITER_TIMEOUT is an outage that says so", async () => {
    const slow = await startArbiterApi({ PARLEY_ARBITER_TIMEOUT: "150ms", PARLEY_ARBITER_RETRIES: "1" }, { llm: f.llm });
    try {
      const a = slow.api;
      const { uuid: room } = await a.room();
      await a.say(room, "alice", "PROPOSE a: 1.");
      f.llm.setHandler((c) => ({ ...(dslModel(c) as { content: string }), delayMs: 1_000 }));
      const r = await refresh(a, room);
      assert.equal(r.status, 502);
      assert.match(r.body.detail, /did not answer in time/);
      assert.equal(f.llm.count, 2);
    } finally {
      await slow.close();
    }
  });

  test("malformed output, then corrected after one corrective retry", async () => {
    const { uuid: room } = await f.api.room();
    const m = (await f.api.say(room, "alice", "PROPOSE delivery date: 1 December.")).body.id;
    const good = answer({ threads: [{ subject: "Delivery date", value: "1 December", source_msg_id: m, quote: "PROPOSE delivery date: 1 December" }] });
    f.llm.script({ content: "Sure! Here is what I found: the delivery date is 1 December." }, good);
    let r = await refresh(f.api, room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.threads.length, 1);
    assert.equal(r.body.extraction.corrected, 1);
    assert.equal(f.llm.count, 2);
    assert.equal(f.llm.calls[1]!.corrective, true);
    const conversation = f.llm.calls[1]!.body.messages;
    assert.equal(conversation[2].role, "assistant");
    assert.match(conversation[3].content, /no JSON object/);

    // A schema error: the retry names the field that was wrong.
    const { uuid: room2 } = await f.api.room();
    const m2 = (await f.api.say(room2, "bob", "PROPOSE price: 5 EUR.")).body.id;
    f.llm.reset();
    f.llm.script(
      answer({ threads: [{ subject: "Price", source_msg_id: m2, quote: "PROPOSE price: 5 EUR" }], revisions: [{ thread_id: 1, kind: "agree", source_msg_id: m2 }] }),
      answer({ threads: [{ subject: "Price", value: "5 EUR", source_msg_id: m2, quote: "PROPOSE price: 5 EUR" }] }),
    );
    r = await refresh(f.api, room2);
    assert.equal(r.body.threads[0].current_value, "5 EUR");
    assert.match(f.llm.calls[1]!.body.messages[3].content, /threads\.0\.value/);
  });

  test("a corrected answer with one bad item keeps the good ones", async () => {
    const { uuid: room } = await f.api.room();
    const m = (await f.api.say(room, "alice", "PROPOSE a: 1. PROPOSE b: 2.")).body.id;
    const mixed = answer({ threads: [{ subject: "A", value: "1", source_msg_id: m, quote: "PROPOSE a: 1" }, { subject: "B", source_msg_id: m, quote: "PROPOSE b: 2" }] });
    f.llm.script(mixed, mixed);
    const r = await refresh(f.api, room);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.threads.map((t: any) => t.subject), ["A"]);
    assert.match(r.body.extraction.skipped_items[0].reason, /value/);
  });

  test("truncated JSON is salvaged: the incomplete last item is dropped, the rest applied, no extra call", async () => {
    const { uuid: room } = await f.api.room();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await f.api.say(room, "alice", `PROPOSE topic ${i}: value ${i}.`)).body.id);
    const full = JSON.stringify({
      threads: ids.map((id, i) => ({ subject: `Topic ${i}`, value: `value ${i}`, source_msg_id: id, quote: `PROPOSE topic ${i}: value ${i}` })),
      revisions: [],
    });
    const cut = full.indexOf('"Topic 2"') + 4; // inside the third thread's subject string
    f.llm.script({ content: full.slice(0, cut), finish_reason: "length" });
    const r = await refresh(f.api, room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.threads.map((t: any) => t.subject), ["Topic 0", "Topic 1"]);
    assert.equal(r.body.extraction.salvaged, 1);
    assert.equal(f.llm.count, 1, "no corrective retry was needed");
  });

  test("the next provider in the fallback order answers when the first fails", async () => {
    // A real server configured with two providers in the order custom, deepseek: the custom
    // endpoint is down. DeepSeek's endpoint is fixed in the configuration, so it is pointed at
    // the fake provider after loading, the one stand-in this suite allows.
    const loaded = loadConfig({
      PORT: "0",
      HOST: "127.0.0.1",
      PARLEY_DATA_DIR: tempDir(),
      ...NO_LIMITS,
      ...arbiterEnv({ baseUrl: `http://127.0.0.1:${await deadPort()}/v1` }),
      DEEPSEEK_API_KEY: "sk-test-deepseek-key",
      PARLEY_ARBITER_FALLBACKS: "custom,deepseek",
    });
    assert.deepEqual(loaded.arbiter.providers.map((p) => p.name), ["custom", "deepseek"]);
    const providers = loaded.arbiter.providers.map((p) => (p.name === "deepseek" ? { ...p, baseUrl: f.llm.baseUrl } : p));
    const server = await startServer({ config: { ...loaded, arbiter: { ...loaded.arbiter, providers } }, pages: false, quiet: true });
    try {
      const a = client(server.url);
      const { uuid: room } = await a.room();
      const m = (await a.say(room, "alice", "PROPOSE x: 1.")).body.id;
      const r = await refresh(a, room);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.extraction.applied, 1);
      assert.equal(r.body.threads.length, 1);
      assert.equal(r.body.threads[0].last_revision.source_msg_id, m);
      assert.equal(r.body.last_extraction_error, null);
      assert.equal(f.llm.count, 1, "the fallback was asked once");
      assert.equal(f.llm.calls[0]!.body.model, DEEPSEEK_DEFAULT_MODEL, "with the fallback's own model");
      assert.equal(f.llm.calls[0]!.authorization, "Bearer sk-test-deepseek-key", "and its own key");
      assert.equal(r.body.extraction.calls, 2, "every attempt counts as a call");
      assert.equal((await a.get(`/api/rooms/${room}`)).body.arbiter.calls, 2);
    } finally {
      await server.close();
    }
  });
});
