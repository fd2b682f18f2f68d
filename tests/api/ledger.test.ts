import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startApi, type TestApi } from "../helpers/server";
import { testAgent } from "../helpers/agent";
import { contextHash, type Thread } from "../../lib/domain/ledger";
import { rawSql } from "../helpers/db";

let f: TestApi;
before(async () => (f = await startApi()));
after(() => f.close());

async function roomWithThread(value = "1 December") {
  const room = (await f.api.room()).uuid;
  const msg = await f.api.say(room, "alice", `I propose delivery on ${value}.`);
  const t = await f.api.post(`/api/rooms/${room}/claims`, { subject: "Delivery date", value, opened_by: "alice", source_msg_id: msg.body.id, quote: `delivery on ${value}` });
  assert.equal(t.status, 201, JSON.stringify(t.body));
  return { room, tid: t.body.id as number, thread: t.body };
}
const revise = (room: string, tid: number, agent_id: string, kind: string, value?: string) =>
  f.api.post(`/api/rooms/${room}/claims/${tid}/revisions`, { agent_id, kind, ...(value ? { value } : {}) });

describe("threads and the status table (SPEC 5.1)", () => {
  test("propose opens a thread, proposed, with a propose revision", async () => {
    const { thread } = await roomWithThread();
    assert.equal(thread.status, "proposed");
    assert.equal(thread.subject_key, "delivery-date");
    assert.equal(thread.current_value, "1 December");
    assert.equal(thread.opened_by, "alice");
    assert.equal(thread.opened_by_auth, "anon");
    assert.equal(thread.revisions_count, 1);
    assert.equal(thread.revisions[0].kind, "propose");
    assert.equal(thread.revisions[0].via, "api");
    assert.deepEqual(thread.confirmations, []);
  });

  test("two distinct confirmers agree it; a repeat by the same agent changes nothing", async () => {
    const { room, tid } = await roomWithThread();
    const one = await revise(room, tid, "bob", "confirm");
    assert.equal(one.status, 201);
    assert.equal(one.body.status, "proposed");
    const again = await revise(room, tid, "bob", "confirm");
    assert.equal(again.body.status, "proposed", "a repeated confirm does not count twice");
    assert.equal(again.body.revisions_count, 2, "and adds no revision");
    const two = await revise(room, tid, "carol", "confirm");
    assert.equal(two.body.status, "agreed");
    assert.deepEqual(two.body.confirmations.map((c: { agent_id: string }) => c.agent_id), ["bob", "carol"]);
  });

  test("a signed repeat of a confirm writes nothing: no nonce used, no key pinned", async () => {
    const { room, tid } = await roomWithThread();
    assert.equal((await revise(room, tid, "bob", "confirm")).status, 201);
    const key = testAgent();
    const payload = { thread_id: tid, kind: "confirm" };
    const sig = key.signWrite(room, "thread.revised", "bob", payload);
    const again = await f.api.post(`/api/rooms/${room}/claims/${tid}/revisions`, { agent_id: "bob", kind: "confirm", sig });
    assert.equal(again.body.revisions_count, 2, "no revision added");
    assert.equal((await f.api.say(room, "bob", "still unsigned")).status, 201, "bob's name is not pinned to a key");
  });

  test("an empty subject_key falls back to the subject, so the same subject is one thread", async () => {
    const room = (await f.api.room()).uuid;
    const t = await f.api.post(`/api/rooms/${room}/claims`, { subject: "Unit price", value: "4 EUR", opened_by: "alice", subject_key: "  " });
    assert.equal(t.status, 201, JSON.stringify(t.body));
    assert.equal(t.body.subject_key, "unit-price");
  });

  test("the owner cannot confirm (400); others cannot update or retract (403)", async () => {
    const { room, tid } = await roomWithThread();
    const own = await revise(room, tid, "alice", "confirm");
    assert.equal(own.status, 400);
    assert.equal(own.body.code, "owner_cannot_confirm");
    for (const kind of ["update", "retract"]) {
      const r = await revise(room, tid, "mallory", kind, "2 December");
      assert.equal(r.status, 403, kind);
      assert.equal(r.body.code, "not_owner");
    }
    const t = await f.api.get(`/api/rooms/${room}/claims/${tid}`);
    assert.equal(t.body.revisions_count, 1, "refused revisions left nothing behind");
  });

  test("after an owner update two fresh confirms are needed: old ones do not count", async () => {
    const { room, tid } = await roomWithThread();
    await revise(room, tid, "bob", "confirm");
    assert.equal((await revise(room, tid, "carol", "confirm")).body.status, "agreed");
    const updated = await revise(room, tid, "alice", "update", "3 December");
    assert.equal(updated.body.status, "proposed");
    assert.equal(updated.body.current_value, "3 December");
    assert.deepEqual(updated.body.confirmations, []);
    assert.equal((await revise(room, tid, "bob", "confirm")).body.status, "proposed", "one confirm is not enough");
    assert.equal((await revise(room, tid, "carol", "confirm")).body.status, "agreed");
  });

  test("contradict on agreed → disputed plus a discrepancy; disputed → agreed needs a fresh quorum", async () => {
    const { room, tid } = await roomWithThread();
    await revise(room, tid, "bob", "confirm");
    await revise(room, tid, "carol", "confirm");
    const contra = await revise(room, tid, "dave", "contradict", "not before 5 December");
    assert.equal(contra.body.status, "disputed");
    const ctx = await f.api.get(`/api/rooms/${room}/context`);
    assert.equal(ctx.body.discrepancies.length, 1);
    assert.equal(ctx.body.discrepancies[0].thread_id, tid);
    assert.equal(ctx.body.discrepancies[0].status, "open");
    assert.equal((await revise(room, tid, "bob", "confirm")).body.status, "disputed", "one fresh confirm is not enough");
    assert.equal((await revise(room, tid, "carol", "confirm")).body.status, "agreed");
  });

  test("contradict on a proposed thread withdraws that agent's confirmation, no discrepancy", async () => {
    const { room, tid } = await roomWithThread();
    await revise(room, tid, "bob", "confirm");
    const r = await revise(room, tid, "bob", "contradict");
    assert.equal(r.body.status, "proposed");
    assert.deepEqual(r.body.confirmations, []);
    assert.equal((await f.api.get(`/api/rooms/${room}/context`)).body.discrepancies.length, 0);
  });

  test("retract cancels for good: any later revision is 409 thread_cancelled", async () => {
    const { room, tid } = await roomWithThread();
    assert.equal((await revise(room, tid, "alice", "retract")).body.status, "cancelled");
    for (const [agent, kind] of [["bob", "confirm"], ["alice", "update"], ["bob", "contradict"], ["alice", "retract"]]) {
      const r = await revise(room, tid, agent!, kind!, "x");
      assert.equal(r.status, 409, kind);
      assert.equal(r.body.code, "thread_cancelled");
    }
  });

  test("a thread opened by a signed agent can only be updated with that key", async () => {
    const room = (await f.api.room()).uuid;
    const alice = testAgent();
    const payload = { subject: "Price", value: "100 EUR" };
    const opened = await f.api.post(`/api/rooms/${room}/claims`, { ...payload, opened_by: "alice", sig: alice.signWrite(room, "thread.opened", "alice", payload) });
    assert.equal(opened.status, 201, JSON.stringify(opened.body));
    assert.equal(opened.body.opened_by_auth, "signed");
    const unsigned = await revise(room, opened.body.id, "alice", "update", "90 EUR");
    assert.equal(unsigned.status, 403);
    assert.equal(unsigned.body.code, "signature_required");
    const upPayload = { thread_id: opened.body.id, kind: "update", value: "90 EUR" };
    const signedUpdate = await f.api.post(`/api/rooms/${room}/claims/${opened.body.id}/revisions`, {
      agent_id: "alice", kind: "update", value: "90 EUR",
      sig: alice.signWrite(room, "thread.revised", "alice", upPayload),
    });
    assert.equal(signedUpdate.status, 201, JSON.stringify(signedUpdate.body));
    assert.equal(signedUpdate.body.current_value, "90 EUR");
  });

  test("validation: limits, unknown threads and source messages", async () => {
    const { room, tid } = await roomWithThread();
    const cases: [string, Record<string, unknown>, number, string][] = [
      ["claims", { subject: "s".repeat(201), value: "v", opened_by: "a" }, 400, "subject"],
      ["claims", { subject: "s", value: "v".repeat(501), opened_by: "a" }, 400, "value"],
      ["claims", { subject: "s", value: "v", opened_by: "a", quote: "q".repeat(301) }, 400, "quote"],
      ["claims", { subject: " ", value: "v", opened_by: "a" }, 400, "subject"],
      ["claims", { subject: "s", value: "v", opened_by: "a", source_msg_id: 999 }, 400, "source_msg_id"],
      [`claims/${tid}/revisions`, { agent_id: "b", kind: "approve" }, 400, "kind"],
      [`claims/${tid}/revisions`, { agent_id: "alice", kind: "update" }, 400, "value"],
      [`claims/9999/revisions`, { agent_id: "b", kind: "confirm" }, 404, "thread_not_found"],
      [`claims/abc/revisions`, { agent_id: "b", kind: "confirm" }, 404, "thread_not_found"],
    ];
    for (const [path, body, status, field] of cases) {
      const r = await f.api.post(`/api/rooms/${room}/${path}`, body);
      assert.equal(r.status, status, `${path} ${JSON.stringify(body).slice(0, 60)}`);
      assert.ok(r.body.detail.startsWith(`${field}: `) || r.body.code === field, r.body.detail);
    }
    assert.equal((await f.api.post(`/api/rooms/${room}/claims`, { subject: "s", value: "v", opened_by: "a".repeat(100), quote: "q".repeat(300) })).status, 201);
    assert.equal((await f.api.get(`/api/rooms/${room}/claims/77777`)).body.code, "thread_not_found");
    assert.equal((await f.api.get("/api/rooms/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23/context")).body.code, "room_not_found");
  });
});

describe("context hash, handshake and seal (SPEC 5.2)", () => {
  test("the hash is stable for the same threads and changes with subject, value or status", async () => {
    const { room, tid } = await roomWithThread();
    const h1 = (await f.api.get(`/api/rooms/${room}/context`)).body.context_hash;
    assert.equal((await f.api.get(`/api/rooms/${room}/context`)).body.context_hash, h1);
    await revise(room, tid, "bob", "confirm");
    assert.equal((await f.api.get(`/api/rooms/${room}/context`)).body.context_hash, h1, "a confirm below quorum changes no hashed field");
    await revise(room, tid, "carol", "confirm");
    const h2 = (await f.api.get(`/api/rooms/${room}/context`)).body.context_hash;
    assert.notEqual(h2, h1, "status changed");
    await revise(room, tid, "alice", "update", "9 December");
    assert.notEqual((await f.api.get(`/api/rooms/${room}/context`)).body.context_hash, h2, "value changed");
    const t: Thread = (await f.api.get(`/api/rooms/${room}/claims/${tid}`)).body;
    assert.equal(contextHash([t]), (await f.api.get(`/api/rooms/${room}/context`)).body.context_hash, "the hash is JCS over {id, subject, subject_key, current_value, status}");
    await revise(room, tid, "alice", "retract");
    assert.equal((await f.api.get(`/api/rooms/${room}/context`)).body.context_hash, contextHash([]), "cancelled threads are left out");
  });

  test("handshakes: stale hash → 409 with the current one; two agents on the current hash seal it", async () => {
    const { room } = await roomWithThread();
    const ctx = (await f.api.get(`/api/rooms/${room}/context`)).body;
    const stale = await f.api.post(`/api/rooms/${room}/handshake`, { agent_id: "bob", context_hash: "0".repeat(64) });
    assert.equal(stale.status, 409);
    assert.equal(stale.body.code, "stale_context_hash");
    assert.ok(stale.body.detail.includes(ctx.context_hash));
    const first = await f.api.post(`/api/rooms/${room}/handshake`, { agent_id: "bob", context_hash: ctx.context_hash });
    assert.equal(first.status, 201);
    assert.equal(first.body.sealed, null);
    const second = await f.api.post(`/api/rooms/${room}/handshake`, { agent_id: "alice", context_hash: ctx.context_hash });
    assert.deepEqual(second.body.sealed, { context_hash: ctx.context_hash, agents: ["alice", "bob"] });
    assert.deepEqual((await f.api.get(`/api/rooms/${room}/context`)).body.sealed, second.body.sealed);
    const list = await f.api.get(`/api/rooms/${room}/handshakes`);
    assert.equal(list.body.length, 2);
    assert.ok(list.body.every((h: { signature_valid: boolean }) => h.signature_valid === false), "unsigned handshakes are not valid signatures");
  });

  test("a signed handshake reports signature_valid true", async () => {
    const { room } = await roomWithThread();
    const hash = (await f.api.get(`/api/rooms/${room}/context`)).body.context_hash;
    const sig = testAgent().signWrite(room, "handshake.signed", "carol", { context_hash: hash });
    assert.equal((await f.api.post(`/api/rooms/${room}/handshake`, { agent_id: "carol", context_hash: hash, sig })).status, 201);
    const list = await f.api.get(`/api/rooms/${room}/handshakes`);
    assert.equal(list.body[0].signature_valid, true);
  });
});

describe("discrepancies", () => {
  test("resolved by the related thread's owner or the room owner, not by others", async () => {
    const owner = await f.api.room();
    const room = owner.uuid;
    const t = await f.api.post(`/api/rooms/${room}/claims`, { subject: "Venue", value: "Berlin", opened_by: "alice" });
    await revise(room, t.body.id, "bob", "confirm");
    await revise(room, t.body.id, "carol", "confirm");
    await revise(room, t.body.id, "dave", "contradict", "Paris");
    const did = (await f.api.get(`/api/rooms/${room}/context`)).body.discrepancies[0].id;
    const statusOf = async (id: number) => (await f.api.get(`/api/rooms/${room}/context`)).body.discrepancies.find((d: { id: number }) => d.id === id).status;
    const stranger = await f.api.post(`/api/rooms/${room}/discrepancies/${did}/resolve`, { agent_id: "mallory" });
    assert.equal(stranger.status, 403);
    assert.equal(stranger.body.code, "not_owner");
    assert.equal(await statusOf(did), "open", "the stranger's attempt changed nothing");
    const byOwner = await f.api.post(`/api/rooms/${room}/discrepancies/${did}/resolve`, { agent_id: "alice" });
    assert.equal(byOwner.status, 200);
    assert.equal(byOwner.body.status, "resolved");
    assert.equal(byOwner.body.resolved_by, "alice");
    // A second discrepancy, on a thread the room owner did not open, resolved with the owner's token.
    const t2 = await f.api.post(`/api/rooms/${room}/claims`, { subject: "Budget", value: "10k", opened_by: "bob" });
    await revise(room, t2.body.id, "carol", "confirm");
    await revise(room, t2.body.id, "dave", "confirm");
    await revise(room, t2.body.id, "erin", "contradict", "8k");
    const did2 = (await f.api.get(`/api/rooms/${room}/context`)).body.discrepancies.find((d: { thread_id: number }) => d.thread_id === t2.body.id).id;
    const wrongToken = await f.api.post(`/api/rooms/${room}/discrepancies/${did2}/resolve`, {}, { authorization: "Bearer wrong" });
    assert.equal(wrongToken.status, 403);
    assert.equal(await statusOf(did2), "open");
    const byRoomOwner = await f.api.post(`/api/rooms/${room}/discrepancies/${did2}/resolve`, {}, { authorization: `Bearer ${owner.owner_token}` });
    assert.equal(byRoomOwner.status, 200, JSON.stringify(byRoomOwner.body));
    assert.equal(byRoomOwner.body.status, "resolved");
    assert.equal(byRoomOwner.body.resolved_by, "owner");
    assert.equal(await statusOf(did2), "resolved");
    assert.equal((await f.api.post(`/api/rooms/${room}/discrepancies/9999/resolve`, {}, { authorization: `Bearer ${owner.owner_token}` })).body.code, "discrepancy_not_found");
  });
});

describe("the ledger is part of the verifiable history", () => {
  test("verify is CLEAN after a full ledger session and REFUTED after editing a thread's status in the database", async () => {
    const { room, tid } = await roomWithThread();
    await revise(room, tid, "bob", "confirm");
    await revise(room, tid, "carol", "confirm");
    await revise(room, tid, "dave", "contradict", "later");
    const hash = (await f.api.get(`/api/rooms/${room}/context`)).body.context_hash;
    await f.api.post(`/api/rooms/${room}/handshake`, { agent_id: "bob", context_hash: hash });
    const clean = await f.api.post(`/api/rooms/${room}/verify`, {});
    assert.equal(clean.body.verdict, "CLEAN", clean.body.explanation);
    assert.equal(clean.body.details.projections.threads, 1);

    await rawSql(f.server.svc, "UPDATE threads SET status = 'agreed' WHERE room = ? AND id = ?", [room, tid]);
    const refuted = await f.api.post(`/api/rooms/${room}/verify`, {});
    assert.equal(refuted.body.verdict, "REFUTED");
    assert.deepEqual(refuted.body.failures.map((f: { seq: number; type: string }) => [f.seq, f.type]), [[tid, "projection"]]);
  });
});
