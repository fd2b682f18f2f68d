import { eventFromRow } from "../../lib/store/rows";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startApi, withApi, type TestApi } from "../helpers/server";
import { waitUntil } from "../helpers/wait";
import { eventLeafHash, ZERO_HASH_HEX } from "../../lib/log/event";
import { base64ToBytes, bytesToHex, hexToBytes, utf8 } from "../../lib/log/bytes";
import { rootOf } from "../../lib/log/merkle";
import { parseCheckpoint, verifyCheckpoint } from "../../lib/log/checkpoint";
import { nobleVerify } from "../../lib/log/ed25519";
import { testAgent } from "../helpers/agent";

const CAP = 100;
let f: TestApi;
before(async () => (f = await startApi({ PARLEY_ROOM_MESSAGE_CAP: String(CAP) })));
after(() => f.close());

/** Recomputes every leaf hash and prev link of a room from its stored events. */
async function checkChain(room: string) {
  const rows = await f.server.svc.store.listEvents(room, 0, 100_000);
  let prev = ZERO_HASH_HEX;
  rows.forEach((row, i) => {
    assert.equal(row.seq, i + 1, "seq has no gaps");
    assert.equal(row.prev, prev, `prev of ${row.seq} links to ${row.seq - 1}`);
    const leaf = bytesToHex(eventLeafHash(eventFromRow(row)));
    assert.equal(row.leafHash, leaf, `leaf hash of ${row.seq}`);
    prev = leaf;
  });
  const head = (await f.server.svc.store.getRoom(room))!;
  assert.equal(head.headSize, rows.length);
  assert.equal(head.headRoot, Buffer.from(rootOf(rows.map((r) => hexToBytes(r.leafHash)))).toString("base64"));
  return rows;
}

describe("POST /api/rooms/{id}/messages", () => {
  test("stores the message and answers with a receipt signed by the server key", async () => {
    const room = await f.api.room();
    const r = await f.api.say(room.uuid, "  ann  ", "Hello **world**", { memory_root: "abc" });
    assert.equal(r.status, 201);
    assert.equal(r.body.id, 2);
    assert.equal(r.body.agent_id, "ann", "agent_id is trimmed");
    assert.equal(r.body.text, "Hello **world**");
    assert.equal(r.body.auth, "anon");
    assert.equal(r.body.memory_root, "abc");
    assert.equal(r.body.reply_to, null);
    assert.equal(r.body.receipt.seq, 2);
    assert.equal(r.body.receipt.leaf_hash, r.body.hash);

    const key = await f.api.get("/api/server-key");
    assert.equal(key.body.alg, "ed25519");
    const compat = await f.api.get("/api/arbiter/pubkey");
    assert.deepEqual(compat.body, key.body);
    const verified = verifyCheckpoint(r.body.receipt.checkpoint, { keyName: key.body.key_name, pubkey: hexToBytes(key.body.pubkey_hex) }, nobleVerify);
    assert.equal(verified.ok, true, "checkpoint verifies with @noble/ed25519");
    const parsed = parseCheckpoint(r.body.receipt.checkpoint)!;
    assert.equal(parsed.size, 2);
    assert.equal(parsed.origin, `localhost/room/${room.uuid}`);
    const tampered = r.body.receipt.checkpoint.replace("\n2\n", "\n3\n");
    assert.equal(verifyCheckpoint(tampered, { keyName: key.body.key_name, pubkey: hexToBytes(key.body.pubkey_hex) }, nobleVerify).ok, false);
    assert.ok(nobleVerify(hexToBytes(key.body.pubkey_hex), utf8(parsed.body), parsed.signatures[0]!.signature));
    assert.equal(bytesToHex(base64ToBytes((await f.server.svc.store.getRoom(room.uuid))!.headRoot)), bytesToHex(parsed.root));
    await checkChain(room.uuid);
  });

  test("text and agent_id limits, exactly and one over", async () => {
    const room = await f.api.room();
    assert.equal((await f.api.say(room.uuid, "a", "t".repeat(10_000))).status, 201);
    assert.equal((await f.api.say(room.uuid, "a".repeat(100), "ok")).status, 201);
    const cases: [Record<string, unknown>, string][] = [
      [{ agent_id: "a", text: "t".repeat(10_001) }, "text"],
      [{ agent_id: "a", text: "" }, "text"],
      [{ agent_id: "a", text: " \n\t " }, "text"],
      [{ agent_id: "a".repeat(101), text: "x" }, "agent_id"],
      [{ agent_id: "   ", text: "x" }, "agent_id"],
      [{ agent_id: "a\u0007b", text: "x" }, "agent_id"],
      [{ agent_id: 7, text: "x" }, "agent_id"],
      [{ agent_id: "Server", text: "x" }, "agent_id"],
      [{ agent_id: "arbiter", text: "x" }, "agent_id"],
      [{ agent_id: "a", text: ["x"] }, "text"],
      [{ text: "x" }, "agent_id"],
      [{ agent_id: "a", text: "x", reply_to: "2" }, "reply_to"],
      [{ agent_id: "a", text: "x", reply_to: 0 }, "reply_to"],
      [{ agent_id: "a", text: "x", reply_to: 9999 }, "reply_to"],
      [{ agent_id: "a", text: "x", memory_root: 5 }, "memory_root"],
    ];
    for (const [body, field] of cases) {
      const r = await f.api.post(`/api/rooms/${room.uuid}/messages`, body);
      assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
      assert.equal(r.body.code, "validation_error");
      assert.ok(r.body.detail.startsWith(`${field}: `), r.body.detail);
    }
    const info = await f.api.get(`/api/rooms/${room.uuid}`);
    assert.equal(info.body.message_count, 2, "rejected posts stored nothing");
    await checkChain(room.uuid);
  });

  test("reply_to an existing message is kept", async () => {
    const room = await f.api.room();
    const first = await f.api.say(room.uuid, "a", "question");
    const reply = await f.api.say(room.uuid, "b", "answer", { reply_to: first.body.id });
    assert.equal(reply.status, 201);
    assert.equal(reply.body.reply_to, first.body.id);
  });

  test("unknown and malformed rooms (expired ones: expiry.test.ts)", async () => {
    const unknown = await f.api.say("3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23", "a", "x");
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.code, "room_not_found");
    const bad = await f.api.say("nope", "a", "x");
    assert.equal(bad.status, 400);
    assert.equal(bad.body.code, "invalid_uuid");
  });

  test("60 concurrent posts into a room at cap−20: exactly the cap is stored, the rest 429 room_full", async () => {
    const room = await f.api.room();
    for (let i = 0; i < CAP - 20; i++) await f.api.say(room.uuid, `seed${i % 5}`, `seed ${i}`);
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => f.api.say(room.uuid, `racer${i}`, `race ${i}`)));
    const created = results.filter((r) => r.status === 201);
    const full = results.filter((r) => r.status === 429);
    assert.equal(created.length, 20);
    assert.equal(full.length, 40);
    for (const r of full) assert.equal(r.body.code, "room_full");
    const info = await f.api.get(`/api/rooms/${room.uuid}`);
    assert.equal(info.body.message_count, CAP);
    const rows = await checkChain(room.uuid);
    assert.equal(rows.length, CAP + 1);
    assert.deepEqual(new Set(created.map((r) => r.body.id)).size, 20, "every winner got its own seq");
  });
});

describe("GET /api/rooms/{id}/messages", () => {
  let room: string;
  before(async () => {
    room = (await f.api.room()).uuid;
    for (let i = 1; i <= 7; i++) await f.api.say(room, i % 2 ? "odd" : "even", `m${i}`);
  });

  test("without since: the oldest page; since pages forward exclusively", async () => {
    const first = await f.api.get(`/api/rooms/${room}/messages?limit=3`);
    assert.deepEqual(first.body.messages.map((m: { text: string }) => m.text), ["m1", "m2", "m3"]);
    assert.equal(first.body.has_more, true);
    const next = await f.api.get(`/api/rooms/${room}/messages?since=${first.body.next_since}&limit=3`);
    assert.deepEqual(next.body.messages.map((m: { text: string }) => m.text), ["m4", "m5", "m6"]);
    const last = await f.api.get(`/api/rooms/${room}/messages?since=${next.body.next_since}&limit=3`);
    assert.deepEqual(last.body.messages.map((m: { text: string }) => m.text), ["m7"]);
    assert.equal(last.body.has_more, false);
    const empty = await f.api.get(`/api/rooms/${room}/messages?since=${last.body.next_since}`);
    assert.deepEqual(empty.body.messages, []);
    assert.equal(empty.body.next_since, last.body.next_since, "the cursor never goes backwards");
  });

  test("tail gives the newest N, oldest first", async () => {
    const r = await f.api.get(`/api/rooms/${room}/messages?tail=2`);
    assert.deepEqual(r.body.messages.map((m: { text: string }) => m.text), ["m6", "m7"]);
    assert.equal(r.body.has_more, true);
  });

  test("limit: below 1 is 400, non-numbers are 400; wait above 30 is 400", async () => {
    for (const q of ["limit=0", "limit=-1", "limit=x", "since=-1", "since=1.5", "wait=31", "wait=-1", "wait=soon", "tail=0"]) {
      const r = await f.api.get(`/api/rooms/${room}/messages?${q}`);
      assert.equal(r.status, 400, q);
      assert.equal(r.body.code, "validation_error");
    }
    assert.equal((await f.api.get(`/api/rooms/${room}/messages?wait=30&since=0`)).status, 200);
  });

  test("limit above 500 is clamped to 500: a room of 502 messages answers limit=501 with 500 and has_more", async () => {
    // This file's server caps rooms at CAP messages, so the big room lives on its own server.
    await withApi({ PARLEY_ROOM_MESSAGE_CAP: "1000" }, async (big) => {
      const { uuid } = await big.api.room();
      for (let i = 1; i <= 502; i++) assert.equal((await big.api.say(uuid, "a", `m${i}`)).status, 201);
      const r = await big.api.get(`/api/rooms/${uuid}/messages?since=0&limit=501`);
      assert.equal(r.status, 200);
      assert.equal(r.body.messages.length, 500);
      assert.equal(r.body.messages.at(-1).text, "m500");
      assert.equal(r.body.has_more, true);
    });
  });

  // Delivery time is measured by `npm run bench`. Here a long-poll that waits when it should not
  // fails by the test timeout, which is shorter than the poll's wait.
  test("long-poll returns at once when something newer exists", { timeout: 10_000 }, async () => {
    const r = await f.api.get(`/api/rooms/${room}/messages?since=0&wait=30`);
    assert.equal(r.status, 200);
    assert.equal(r.body.messages.length, 7);
  });

  test("long-poll wakes on a post and returns the new message", { timeout: 15_000 }, async () => {
    const head = (await f.api.get(`/api/rooms/${room}/messages?tail=1`)).body.next_since;
    const idle = f.server.svc.notifier.streamCount;
    const poll = f.api.get(`/api/rooms/${room}/messages?since=${head}&wait=30`);
    await waitUntil("the long-poll being parked", () => f.server.svc.notifier.streamCount > idle);
    assert.equal((await f.api.say(room, "late", "wake up")).status, 201);
    const r = await poll;
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.messages.map((m: { text: string }) => m.text), ["wake up"]);
  });

  test("a long-poll whose client goes away stops waiting at once, and the next post is answered as usual", { timeout: 15_000 }, async () => {
    const head = (await f.api.get(`/api/rooms/${room}/messages?tail=1`)).body.next_since;
    const idle = f.server.svc.notifier.streamCount;
    const gone = new AbortController();
    const abandoned = fetch(`${f.url}/api/rooms/${room}/messages?since=${head}&wait=30`, { signal: gone.signal }).catch(() => "aborted");
    await waitUntil("the long-poll being parked", () => f.server.svc.notifier.streamCount > idle);
    gone.abort();
    assert.equal(await abandoned, "aborted");
    // Long before its 30 s: the wait heard the connection close.
    await waitUntil("the server dropping the wait", () => f.server.svc.notifier.streamCount === idle);
    const poll = f.api.get(`/api/rooms/${room}/messages?since=${head}&wait=30`);
    await waitUntil("the next long-poll being parked", () => f.server.svc.notifier.streamCount > idle);
    assert.equal((await f.api.say(room, "late", "after the one that left")).status, 201);
    assert.deepEqual((await poll).body.messages.map((m: { text: string }) => m.text), ["after the one that left"]);
  });

  test("long-polls woken by a post answer from the commit, with no store read: the page a read gives afterwards", { timeout: 15_000 }, async () => {
    const own = (await f.api.room()).uuid;
    assert.equal((await f.api.say(own, "ann", "first")).status, 201);
    const head = (await f.api.get(`/api/rooms/${own}/messages?tail=1`)).body.next_since as number;
    const store = f.server.svc.store;
    const listMessages = store.listMessages;
    let reads = 0;
    store.listMessages = async (room, since, limit) => {
      if (room === own) reads++;
      return listMessages.call(store, room, since, limit);
    };
    try {
      const idle = f.server.svc.notifier.streamCount;
      const polls = Array.from({ length: 5 }, () => f.api.get(`/api/rooms/${own}/messages?since=${head}&wait=30&limit=2`));
      await waitUntil("the long-polls being parked", () => f.server.svc.notifier.streamCount >= idle + 5);
      // A signed reply that mentions someone: every field a message has, from the commit.
      const payload = { text: "@bob signed ＠ｃａｒｏｌ wake up", reply_to: head };
      const sig = testAgent().signMessage(own, "dora", payload);
      const posted = await f.api.say(own, "dora", payload.text, { sig, reply_to: head });
      assert.equal(posted.status, 201);
      const answers = await Promise.all(polls);
      assert.equal(reads, 0, "no store read for the woken long-polls");
      const fresh = await f.api.get(`/api/rooms/${own}/messages?since=${head}&limit=2`);
      assert.equal(reads, 1);
      for (const a of answers) {
        assert.equal(a.status, 200);
        assert.deepEqual(a.body, fresh.body, "the same page as the store's");
      }
      assert.equal(fresh.body.messages[0].auth, "signed");
      assert.deepEqual(fresh.body.messages[0].mentions, ["bob", "carol"]);
    } finally {
      store.listMessages = listMessages;
    }
  });

  test("long-poll with nothing new returns an empty page after the wait", async () => {
    const head = (await f.api.get(`/api/rooms/${room}/messages?tail=1`)).body.next_since;
    const r = await f.api.get(`/api/rooms/${room}/messages?since=${head}&wait=0.3`);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.messages, []);
    assert.equal(r.body.next_since, head);
  });
});
