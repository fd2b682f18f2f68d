import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { client, startTestServer, tempDir } from "../helpers/server";
import { arbiterEnv, answer, dslModel, startFakeLlm, type FakeCall, type FakeLlm } from "../helpers/fake-llm";
import type { RunningServer } from "../../server";
import { Arbiter } from "../../lib/arbiter";
import { openAiProvider } from "../../lib/arbiter/client";
import { loadConfig } from "../../lib/config";
import { createServices } from "../../lib/services";
import { postMessage } from "../../lib/services/messages";
import { createRoom } from "../../lib/services/rooms";
import { loadOrCreateServerKey } from "../../lib/services/server-key";
import { openSqliteStore } from "../../lib/store/sqlite";

let llm: FakeLlm;
let server: RunningServer;
let api: ReturnType<typeof client>;

before(async () => {
  llm = await startFakeLlm();
  server = await startTestServer(arbiterEnv(llm));
  api = client(server.url);
});
after(async () => {
  await server.close();
  await llm.close();
});
beforeEach(() => llm.reset());

const refresh = (a: ReturnType<typeof client>, room: string) => a.post(`/api/rooms/${room}/context/refresh`);
const hasPoison = (c: FakeCall) => c.data.messages.some((m) => m.text.includes("POISON"));

async function eventsOf(room: string): Promise<{ type: string; payload: any }[]> {
  return (await api.get(`/api/rooms/${room}/export`)).body.events;
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
    const { uuid: room } = await api.room();
    await api.say(room, "alice", "PROPOSE a: 1.");
    const bad = (await api.say(room, "bob", "POISON: this one always breaks the model.")).body.id;
    for (let i = 0; i < 6; i++) await api.say(room, "carol", `PROPOSE later ${i}: ${i}.`);
    llm.setHandler((c) => (hasPoison(c) ? { content: "I am sorry, I cannot help with that." } : dslModel(c)));
    const r = await refresh(api, room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.extraction.failed_messages, [bad]);
    assert.equal(r.body.threads.length, 7, "every other message was extracted");
    assert.ok(r.body.last_extracted_msg_id > bad, "the watermark moved past the poison message");
    assert.ok(llm.count < 25, `isolating one message costs a bounded number of calls (${llm.count})`);
    const failed = (await eventsOf(room)).filter((e) => e.type === "arbiter.failed");
    assert.equal(failed.length, 1);
    assert.equal(failed[0]!.payload.msg_id, bad);
    assertSanitised(failed[0]!.payload.reason);
    const info = (await api.get(`/api/rooms/${room}`)).body;
    assert.equal(info.arbiter.calls, llm.count, "failed calls are counted too");
    // Nothing is retried for it later: the next refresh has nothing new.
    const again = await refresh(api, room);
    assert.equal(again.body.extraction.calls, 0);
  });

  test("a request the provider refuses (HTTP 400) for one message is poison too, not an outage", async () => {
    const { uuid: room } = await api.room();
    await api.say(room, "alice", "PROPOSE a: 1.");
    const bad = (await api.say(room, "bob", "POISON too long for the provider")).body.id;
    await api.say(room, "carol", "PROPOSE c: 3.");
    llm.setHandler((c) => (hasPoison(c) ? { status: 400, body: { error: { message: "context length exceeded", type: "invalid_request_error" } } } : dslModel(c)));
    const r = await refresh(api, room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.extraction.failed_messages, [bad]);
    assert.equal(r.body.threads.length, 2);
  });

  test("a provider that refuses every request, or a model that never answers JSON, is an outage: nothing is skipped", async () => {
    for (const reply of [{ status: 400, body: { error: { message: "Unsupported parameter: 'max_tokens'" } } }, { content: "I only speak prose." }]) {
      llm.reset();
      llm.setHandler(() => reply);
      const { uuid: room } = await api.room();
      await api.say(room, "alice", "PROPOSE a: 1.");
      await api.say(room, "bob", "PROPOSE b: 2.");
      const r = await refresh(api, room);
      assert.equal(r.status, 502, JSON.stringify(r.body));
      assert.equal(r.body.code, "arbiter_failed");
      assertSanitised(r.body.detail);
      assert.ok(!r.body.detail.includes("max_tokens") && !r.body.detail.includes("prose"), "nothing the provider said is repeated");
      const info = (await api.get(`/api/rooms/${room}`)).body;
      assert.equal(info.arbiter.last_extracted_msg_id, 0, "no message was skipped as poison");
      assert.equal((await eventsOf(room)).filter((e) => e.type === "arbiter.failed").length, 0);
    }
  });

  test("an outage answers 502 arbiter_failed, keeps the watermark and records a sanitised sentence", async () => {
    const { uuid: room } = await api.room();
    await api.say(room, "alice", "PROPOSE a: 1.");
    await refresh(api, room);
    const before = (await api.get(`/api/rooms/${room}`)).body;
    await api.say(room, "bob", "PROPOSE b: 2.");
    llm.reset();
    llm.setHandler(() => ({ status: 503 }));
    const r = await refresh(api, room);
    assert.equal(r.status, 502);
    assert.equal(r.body.code, "arbiter_failed");
    assertSanitised(r.body.detail);
    assert.match(r.body.detail, /HTTP 503/);
    assert.equal(llm.count, 3, "one attempt and two retries");
    const info = (await api.get(`/api/rooms/${room}`)).body;
    assert.equal(info.arbiter.last_extracted_msg_id, before.arbiter.last_extracted_msg_id, "the watermark stays");
    assert.equal(info.last_extraction_error, r.body.detail);
    assert.equal(info.arbiter.calls, before.arbiter.calls + 3);
    const ctx = (await api.get(`/api/rooms/${room}/context`)).body;
    assert.equal(ctx.last_extraction_error, r.body.detail);
    assert.equal(ctx.threads.length, 1);
    // Everything else still works during the outage.
    assert.equal((await api.say(room, "carol", "still talking")).status, 201);
    // The provider comes back: the same messages are extracted and the error clears.
    llm.setHandler(dslModel);
    const ok = await refresh(api, room);
    assert.equal(ok.status, 200);
    assert.equal(ok.body.threads.length, 2);
    assert.equal(ok.body.last_extraction_error, null);
  });

  test("an outage in the middle of a run keeps what was applied and stops there", async () => {
    const small = await startTestServer(arbiterEnv(llm, { PARLEY_ARBITER_BATCH_MESSAGES: "2" }));
    try {
      const a = client(small.url);
      const { uuid: room } = await a.room();
      const ids = [];
      for (let i = 0; i < 6; i++) ids.push((await a.say(room, "alice", `PROPOSE t${i}: ${i}.`)).body.id);
      llm.setHandler((c) => (c.n <= 1 ? dslModel(c) : { status: 500 }));
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
    const { uuid: room } = await api.room();
    await api.say(room, "alice", "PROPOSE a: 1.");
    llm.setHandler(() => ({ hangup: true }));
    const r = await refresh(api, room);
    assert.equal(r.status, 502);
    assertSanitised(r.body.detail);
  });

  test("a provider slower than PARLEY_ARBITER_TIMEOUT is an outage that says so", async () => {
    const slow = await startTestServer(arbiterEnv(llm, { PARLEY_ARBITER_TIMEOUT: "150ms", PARLEY_ARBITER_RETRIES: "1" }));
    try {
      const a = client(slow.url);
      const { uuid: room } = await a.room();
      await a.say(room, "alice", "PROPOSE a: 1.");
      llm.setHandler((c) => ({ ...(dslModel(c) as { content: string }), delayMs: 1_000 }));
      const r = await refresh(a, room);
      assert.equal(r.status, 502);
      assert.match(r.body.detail, /did not answer in time/);
      assert.equal(llm.count, 2);
    } finally {
      await slow.close();
    }
  });

  test("malformed output, then corrected after one corrective retry", async () => {
    const { uuid: room } = await api.room();
    const m = (await api.say(room, "alice", "PROPOSE delivery date: 1 December.")).body.id;
    const good = answer({ threads: [{ subject: "Delivery date", value: "1 December", source_msg_id: m, quote: "PROPOSE delivery date: 1 December" }] });
    llm.script({ content: "Sure! Here is what I found: the delivery date is 1 December." }, good);
    let r = await refresh(api, room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.threads.length, 1);
    assert.equal(r.body.extraction.corrected, 1);
    assert.equal(llm.count, 2);
    assert.equal(llm.calls[1]!.corrective, true);
    const conversation = llm.calls[1]!.body.messages;
    assert.equal(conversation[2].role, "assistant");
    assert.match(conversation[3].content, /no JSON object/);

    // A schema error: the retry names the field that was wrong.
    const { uuid: room2 } = await api.room();
    const m2 = (await api.say(room2, "bob", "PROPOSE price: 5 EUR.")).body.id;
    llm.reset();
    llm.script(
      answer({ threads: [{ subject: "Price", source_msg_id: m2, quote: "PROPOSE price: 5 EUR" }], revisions: [{ thread_id: 1, kind: "agree", source_msg_id: m2 }] }),
      answer({ threads: [{ subject: "Price", value: "5 EUR", source_msg_id: m2, quote: "PROPOSE price: 5 EUR" }] }),
    );
    r = await refresh(api, room2);
    assert.equal(r.body.threads[0].current_value, "5 EUR");
    assert.match(llm.calls[1]!.body.messages[3].content, /threads\.0\.value/);
  });

  test("a corrected answer with one bad item keeps the good ones", async () => {
    const { uuid: room } = await api.room();
    const m = (await api.say(room, "alice", "PROPOSE a: 1. PROPOSE b: 2.")).body.id;
    const mixed = answer({ threads: [{ subject: "A", value: "1", source_msg_id: m, quote: "PROPOSE a: 1" }, { subject: "B", source_msg_id: m, quote: "PROPOSE b: 2" }] });
    llm.script(mixed, mixed);
    const r = await refresh(api, room);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.threads.map((t: any) => t.subject), ["A"]);
    assert.match(r.body.extraction.skipped_items[0].reason, /value/);
  });

  test("truncated JSON is salvaged: the incomplete last item is dropped, the rest applied, no extra call", async () => {
    const { uuid: room } = await api.room();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await api.say(room, "alice", `PROPOSE topic ${i}: value ${i}.`)).body.id);
    const full = JSON.stringify({
      threads: ids.map((id, i) => ({ subject: `Topic ${i}`, value: `value ${i}`, source_msg_id: id, quote: `PROPOSE topic ${i}: value ${i}` })),
      revisions: [],
    });
    const cut = full.indexOf('"Topic 2"') + 4; // inside the third thread's subject string
    llm.script({ content: full.slice(0, cut), finish_reason: "length" });
    const r = await refresh(api, room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.threads.map((t: any) => t.subject), ["Topic 0", "Topic 1"]);
    assert.equal(r.body.extraction.salvaged, 1);
    assert.equal(llm.count, 1, "no corrective retry was needed");
  });

  test("the next provider in the fallback order answers when the first fails", async () => {
    const dataDir = tempDir();
    const config = loadConfig({ PARLEY_DATA_DIR: dataDir, ...arbiterEnv(llm), PARLEY_RATE_POSTS_PER_MINUTE: "0", PARLEY_RATE_AGENT_POSTS_PER_MINUTE: "0", PARLEY_RATE_ROOMS_PER_HOUR: "0" });
    const store = openSqliteStore(dataDir);
    const svc = createServices(config, store, loadOrCreateServerKey(config.keyFile, config.keyName));
    const caller = { ip: "test", origin: "http://localhost" };
    const primary = openAiProvider({ name: "custom", baseUrl: `http://127.0.0.1:${await deadPort()}/v1`, apiKey: "k", model: "m" }, 2_000);
    const fallback = openAiProvider({ name: "deepseek", baseUrl: llm.baseUrl, apiKey: "k", model: "fallback-model" }, 2_000);
    const arbiter = new Arbiter(svc, [primary, fallback]);
    try {
      const room = createRoom(svc, caller, { description: "", is_public: false, protocol_mode: "standard", mode: "open" }).uuid;
      await postMessage(svc, caller, room, { agent_id: "alice", text: "PROPOSE x: 1." });
      const summary = await arbiter.run(room, { full: false });
      assert.equal(summary.applied, 1);
      assert.equal(llm.count, 1);
      assert.equal(llm.calls[0]!.body.model, "fallback-model");
      assert.equal(summary.calls, 2, "every attempt counts as a call");
    } finally {
      await arbiter.stop();
      store.close();
    }
  });
});
