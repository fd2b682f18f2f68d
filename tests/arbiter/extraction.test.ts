import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { answer, startArbiterApi, type ArbiterApi } from "../helpers/fake-llm";

let f: ArbiterApi;
before(async () => (f = await startArbiterApi()));
after(() => f.close());
beforeEach(() => f.llm.reset());

const refresh = (room: string, query = "", headers?: Record<string, string>) => f.api.post(`/api/rooms/${room}/context/refresh${query}`, undefined, headers);

/** The ledger without the parts a rescan may legitimately change (none): threads, revisions, discrepancies. */
async function ledgerOf(room: string) {
  const ctx = (await f.api.get(`/api/rooms/${room}/context`)).body;
  const revisions = [];
  for (const t of ctx.threads) revisions.push(...(await f.api.get(`/api/rooms/${room}/claims/${t.id}/revisions`)).body);
  return { threads: ctx.threads, discrepancies: ctx.discrepancies, revisions, context_hash: ctx.context_hash };
}

describe("extraction through POST /context/refresh", () => {
  test("opens threads owned by the message authors and routes revisions: confirm by others, update by the owner", async () => {
    const { uuid: room } = await f.api.room();
    const m1 = (await f.api.say(room, "alice", "Hello all. PROPOSE delivery date: 1 December.")).body.id;
    await f.api.say(room, "bob", "Sounds fine to me.");
    let r = await refresh(room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.threads.length, 1);
    const t = r.body.threads[0];
    assert.equal(t.subject, "delivery date");
    assert.equal(t.subject_key, "delivery-date");
    assert.equal(t.current_value, "1 December");
    assert.equal(t.opened_by, "alice", "the thread is owned by the message's author, not by the arbiter");
    assert.equal(t.last_revision.via, "arbiter");
    assert.equal(t.last_revision.source_msg_id, m1);
    assert.equal(t.last_revision.quote, "PROPOSE delivery date: 1 December");
    assert.equal(r.body.extraction.calls, 1);
    assert.equal(r.body.extraction.applied, 1);

    await f.api.say(room, "bob", "CONFIRM delivery date.");
    await f.api.say(room, "alice", "Actually UPDATE delivery date: 3 December.");
    await f.api.say(room, "bob", "CONFIRM delivery date.");
    await f.api.say(room, "carol", "CONFIRM delivery date.");
    r = await refresh(room);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.extraction.calls, 1, "one call for the four new messages");
    const after = r.body.threads[0];
    assert.equal(after.current_value, "3 December");
    assert.equal(after.status, "agreed", "two fresh confirmations after the owner's update");
    assert.deepEqual(after.confirmations.map((c: { agent_id: string }) => c.agent_id), ["bob", "carol"]);
    const revs = (await f.api.get(`/api/rooms/${room}/claims/${t.id}/revisions`)).body;
    assert.deepEqual(revs.map((x: any) => [x.kind, x.author_agent_id, x.via]), [
      ["propose", "alice", "arbiter"],
      ["confirm", "bob", "arbiter"],
      ["update", "alice", "arbiter"],
      ["confirm", "bob", "arbiter"],
      ["confirm", "carol", "arbiter"],
    ]);

    const info = (await f.api.get(`/api/rooms/${room}`)).body;
    assert.equal(info.arbiter.calls, 2);
    assert.ok(info.arbiter.tokens > 0);
    assert.equal(info.arbiter.items, 5);
    assert.equal(info.arbiter.last_extracted_msg_id, r.body.last_extracted_msg_id);
    assert.equal(info.last_extraction_error, null);
  });

  test("a thread proposed and confirmed in the same batch gets both (subject_key reference)", async () => {
    const { uuid: room } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE price: 100 EUR.");
    await f.api.say(room, "bob", "CONFIRM price.");
    await f.api.say(room, "carol", "CONFIRM price.");
    const r = await refresh(room);
    assert.equal(r.body.extraction.calls, 1);
    assert.equal(r.body.threads[0].status, "agreed");
    assert.equal(r.body.threads[0].revisions_count, 3);
  });

  test("the arbiter cannot do for an author what the author may not do by API", async () => {
    const { uuid: room } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE venue: Lisbon.");
    await refresh(room);
    const tid = (await f.api.get(`/api/rooms/${room}/context`)).body.threads[0].id;
    const m = (await f.api.say(room, "mallory", "The venue is Porto now, and I agree with Lisbon too.")).body.id;
    const m2 = (await f.api.say(room, "alice", "I confirm Lisbon myself.")).body.id;
    f.llm.script(
      answer({
        revisions: [
          { thread_id: tid, kind: "update", value: "Porto", source_msg_id: m, quote: "The venue is Porto now" },
          { thread_id: tid, kind: "retract", source_msg_id: m, quote: "The venue is Porto now" },
          { thread_id: tid, kind: "confirm", source_msg_id: m2, quote: "I confirm Lisbon myself" },
        ],
      }),
    );
    const r = await refresh(room);
    assert.equal(r.status, 200);
    assert.equal(r.body.threads[0].current_value, "Lisbon");
    assert.equal(r.body.threads[0].status, "proposed");
    const reasons = r.body.extraction.skipped_items.map((s: { reason: string }) => s.reason);
    assert.deepEqual(reasons, ["not_owner", "not_owner", "owner_cannot_confirm"]);
    assert.equal(r.body.extraction.applied, 0);
  });

  test("batching: 40 messages take far fewer calls than messages", async () => {
    const { uuid: room } = await f.api.room();
    for (let i = 0; i < 40; i++) await f.api.say(room, `agent-${i % 4}`, `PROPOSE item ${i}: ${i * 10} units.`);
    const r = await refresh(room);
    assert.equal(r.status, 200);
    assert.equal(r.body.threads.length, 40, "every message's thread is there");
    assert.ok(r.body.extraction.calls <= 2, `calls: ${r.body.extraction.calls}`);
    assert.equal(r.body.extraction.calls, r.body.extraction.batches);
    // Each batch carried several new messages.
    assert.ok(f.llm.calls.every((c) => c.data.messages.length >= 15), f.llm.calls.map((c) => c.data.messages.length).join(","));
  });

  test("a small token budget splits batches, truncates long messages and keeps every message", async () => {
    const small = await startArbiterApi({ PARLEY_ARBITER_TOKEN_BUDGET: "1500" }, { llm: f.llm });
    try {
      const a = small.api;
      const { uuid: room } = await a.room();
      await a.say(room, "alice", `PROPOSE long one: yes. ${"blah ".repeat(1900)}`);
      for (let i = 0; i < 12; i++) await a.say(room, "bob", `PROPOSE topic ${i}: ${"x".repeat(200)}.`);
      const r = await a.post(`/api/rooms/${room}/context/refresh`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.threads.length, 13);
      assert.ok(f.llm.count >= 3, `several calls under a small budget: ${f.llm.count}`);
      for (const c of f.llm.calls) assert.ok((c.system.length + c.user.length) / 4 <= 1500 * 1.1, `prompt of ${(c.system.length + c.user.length) / 4} tokens`);
      assert.ok(f.llm.calls[0]!.data.messages[0]!.text.endsWith("[…truncated]"));
    } finally {
      await small.close();
    }
  });

  test("incremental: nothing new → no call, 200", async () => {
    const { uuid: room } = await f.api.room();
    let r = await refresh(room);
    assert.equal(r.status, 200);
    assert.equal(f.llm.count, 0, "an empty room needs no call");
    await f.api.say(room, "alice", "PROPOSE colour: blue.");
    r = await refresh(room);
    assert.equal(f.llm.count, 1);
    r = await refresh(room);
    assert.equal(r.status, 200);
    assert.equal(f.llm.count, 1, "no second call when nothing is new");
    assert.equal(r.body.extraction.messages, 0);
    assert.equal(r.body.extraction.calls, 0);
    // Ledger events (not messages) after the watermark do not count as new.
    await f.api.post(`/api/rooms/${room}/claims`, { subject: "Size", value: "L", opened_by: "bob" });
    await refresh(room);
    assert.equal(f.llm.count, 1);
  });

  test("a full rescan, twice, leaves an identical ledger without duplicates", async () => {
    const { uuid: room, owner_token } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE delivery date: 1 December.");
    await f.api.say(room, "bob", "CONFIRM delivery date.");
    await f.api.say(room, "carol", "PROPOSE price: 100 EUR.");
    await f.api.say(room, "alice", "CONTRADICT price: 80 EUR.");
    await f.api.say(room, "carol", "UPDATE price: 90 EUR.");
    await f.api.say(room, "dave", "CONFIRM delivery date.");
    await refresh(room);
    const first = await ledgerOf(room);
    assert.equal(first.threads.length, 2);
    const auth = { authorization: `Bearer ${owner_token}` };
    for (let i = 0; i < 2; i++) {
      const r = await refresh(room, "?full=true", auth);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.extraction.full, true);
      assert.equal(r.body.extraction.messages, 6);
      assert.equal(r.body.extraction.applied, 0, "nothing new applied on a rescan");
      assert.deepEqual(await ledgerOf(room), first);
    }
  });

  test("full=true needs the owner token: 403 not_owner otherwise", async () => {
    const { uuid: room, owner_token } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE x: 1.");
    let r = await refresh(room, "?full=true");
    assert.equal(r.status, 403);
    assert.equal(r.body.code, "not_owner");
    r = await refresh(room, "?full=true", { authorization: "Bearer not-the-token" });
    assert.equal(r.status, 403);
    assert.equal(f.llm.count, 0);
    r = await refresh(room, "?full=true", { authorization: `Bearer ${owner_token}` });
    assert.equal(r.status, 200);
    r = await refresh(room, "?full=maybe");
    assert.equal(r.status, 400);
  });

  test("the request carries the model, the key, JSON mode and the data section", async () => {
    const { uuid: room } = await f.api.room();
    await f.api.say(room, "alice", "first message");
    await f.api.say(room, "bob", "second message");
    await refresh(room);
    await f.api.say(room, "carol", "PROPOSE z: 3.");
    await refresh(room);
    const call = f.llm.calls.at(-1)!;
    assert.equal(call.body.model, "fake-model");
    assert.equal(call.authorization, "Bearer sk-test-SECRET-key-0123456789");
    assert.deepEqual(call.body.response_format, { type: "json_object" });
    assert.deepEqual(call.data.messages.map((m) => m.text), ["PROPOSE z: 3."]);
    assert.deepEqual(call.data.context.map((m) => m.text), ["first message", "second message"], "preceding messages as context");
    assert.equal(call.data.open_threads.length, 0);
    assert.ok(/JSON/.test(call.system));
  });

  test("every open thread is shown to the model, not just the first ones", async () => {
    const { uuid: room } = await f.api.room();
    for (let i = 0; i < 80; i++) await f.api.post(`/api/rooms/${room}/claims`, { subject: `Topic ${i}`, value: `v${i}`, opened_by: "alice" });
    await f.api.say(room, "bob", "PROPOSE topic 79: other.");
    const r = await refresh(room);
    assert.equal(f.llm.calls[0]!.data.open_threads.length, 80);
    assert.equal(r.body.threads.length, 80, "no duplicate thread");
    assert.equal(r.body.threads[79].last_revision.kind, "contradict");
  });

  test("verify stays CLEAN after an arbiter session", async () => {
    const { uuid: room, owner_token } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE delivery date: 1 December.");
    await f.api.say(room, "bob", "CONFIRM delivery date.");
    await f.api.say(room, "carol", "CONFIRM delivery date.");
    await refresh(room);
    await f.api.say(room, "bob", "CONTRADICT delivery date: 2 December.");
    await refresh(room);
    await refresh(room, "?full=true", { authorization: `Bearer ${owner_token}` });
    const ctx = (await f.api.get(`/api/rooms/${room}/context`)).body;
    assert.equal(ctx.threads[0].status, "disputed");
    assert.equal(ctx.discrepancies.length, 1);
    const v = await f.api.post(`/api/rooms/${room}/verify`);
    assert.equal(v.body.verdict, "CLEAN", JSON.stringify(v.body));
  });

  test("items must quote their source message; a misattributed item is refused", async () => {
    const { uuid: room } = await f.api.room();
    await f.api.say(room, "alice", "PROPOSE budget: 5k.");
    await refresh(room);
    const tid = (await f.api.get(`/api/rooms/${room}/context`)).body.threads[0].id;
    const hello = (await f.api.say(room, "bob", "hello everyone")).body.id;
    f.llm.script(answer({ revisions: [{ thread_id: tid, kind: "confirm", source_msg_id: hello, quote: "I agree with the budget" }] }));
    const r = await refresh(room);
    assert.equal(r.body.threads[0].confirmations.length, 0);
    assert.match(r.body.extraction.skipped_items[0].reason, /quote does not appear in message/);
  });
});
