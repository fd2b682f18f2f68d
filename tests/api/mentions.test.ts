import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { rawSql } from "../helpers/db";
import fs from "node:fs";
import { startApi, tempDir, type TestApi } from "../helpers/server";
import { openSse } from "../helpers/sse";
import { waitUntil } from "../helpers/wait";

let f: TestApi;
before(async () => (f = await startApi()));
after(() => f.close());

const messagesOf = (room: string, query: string) => f.api.get(`/api/rooms/${room}/messages?${query}`);
const ids = (page: { messages: { id: number }[] }) => page.messages.map((m) => m.id);

/** Resolves once the server holds a long-poll or stream of that room: the next post is one it waits for. */
const waiting = (n = 1) => waitUntil(`${n} reader(s) waiting on the notifier`, () => f.server.svc.notifier.streamCount >= n);

async function post(room: string, agent: string, text: string): Promise<{ id: number; mentions: string[] }> {
  const r = await f.api.say(room, agent, text);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

describe("a message's mentions", () => {
  test("are the @name tokens of its text, punctuation after the name dropped, each once by the room's name key", async () => {
    const { uuid } = await f.api.room();
    const cases: [string, string[]][] = [
      ["hi @bob!", ["bob"]],
      ["(@Bob), @carol: and @BOB again.", ["Bob", "carol"]],
      ["**@dave**, \"@erin\" and @frank's idea?", ["dave", "erin", "frank"]],
      ["@gpt-4o: take the parser; @claude.code, the tests…", ["gpt-4o", "claude.code"]],
      ["«@zoë» and 「@太郎」、@日本語エージェント。", ["zoë", "太郎", "日本語エージェント"]],
      ["@bob,@carol", ["bob", "carol"]],
    ];
    for (const [text, mentions] of cases) assert.deepEqual((await post(uuid, "alice", text)).mentions, mentions, text);
  });

  test("width and case variants are one agent; names keep their NFKC form", async () => {
    const { uuid } = await f.api.room();
    assert.deepEqual((await post(uuid, "alice", "＠ＢＯＢ and @ｂｏｂ， and @Bob")).mentions, ["BOB"]);
    assert.deepEqual((await post(uuid, "alice", "@ｃａｒｏｌ: ready?")).mentions, ["carol"]);
    const page = (await messagesOf(uuid, "since=0&mentioning=bob")).body;
    assert.equal(page.messages.length, 1, "mentioning=bob finds ＠ＢＯＢ");
    assert.deepEqual(ids((await messagesOf(uuid, "since=0&mentioning=CAROL")).body), ids((await messagesOf(uuid, "since=0&mentioning=%EF%BD%83arol")).body));
  });

  test("an e-mail address, a URL path, a service name or an invisible character is not a mention", async () => {
    const { uuid } = await f.api.room();
    for (const text of [
      "write to bob@example.com",
      "or @dave@example.org",
      "see https://example.com/@erin and ?user=@frank",
      "@server, @owner and @arbiter are the service",
      "@bo\u200bb is not bob",
      "a lone @ and @!!!",
      `@${"x".repeat(101)} is longer than any name`,
    ]) {
      assert.deepEqual((await post(uuid, "alice", text)).mentions, [], text);
    }
  });

  test("an agent that has not spoken yet can be mentioned and finds it", async () => {
    const { uuid } = await f.api.room();
    await post(uuid, "alice", "@newcomer, welcome: the brief is above.");
    const page = (await messagesOf(uuid, "since=0&mentioning=newcomer")).body;
    assert.deepEqual(page.messages.map((m: { agent_id: string; mentions: string[] }) => [m.agent_id, m.mentions]), [["alice", ["newcomer"]]]);
  });

  test("are served everywhere a message is (lists, tail, SSE, export) and the verifier rebuilds them from the log", async () => {
    const { uuid } = await f.api.room();
    const sse = await openSse(`${f.url}/api/rooms/${uuid}/events`);
    const m = await post(uuid, "alice", "@bob and @carol: agreed?");
    assert.deepEqual(m.mentions, ["bob", "carol"]);
    assert.deepEqual((await messagesOf(uuid, "since=0")).body.messages[0].mentions, ["bob", "carol"]);
    assert.deepEqual((await messagesOf(uuid, "tail=1")).body.messages[0].mentions, ["bob", "carol"]);
    const frames = await sse.waitFor(2);
    await sse.close();
    assert.deepEqual(JSON.parse(frames[1]!.data).message.mentions, ["bob", "carol"]);
    const bundle = (await f.api.get(`/api/rooms/${uuid}/export`)).body;
    assert.deepEqual(bundle.projections.messages[0].mentions, ["bob", "carol"]);
    assert.equal("mentions" in bundle.events[1].payload, false, "derived from the text: never part of the signed payload");
    assert.equal((await f.api.post(`/api/rooms/${uuid}/verify`)).body.verdict, "CLEAN");
  });

  test("stored mentions that differ from the text are caught by verification", async () => {
    const { uuid } = await f.api.room();
    const m = await post(uuid, "alice", "@bob, your turn.");
    await rawSql(f.server.svc, "UPDATE messages SET mentions = ? WHERE room = ? AND seq = ?", ['["mallory"]', uuid, m.id]);
    const report = (await f.api.post(`/api/rooms/${uuid}/verify`)).body;
    assert.equal(report.verdict, "REFUTED");
    assert.deepEqual(report.failures.map((x: { seq: number; type: string }) => [x.seq, x.type]), [[m.id, "projection"]]);
  });
});

describe("GET /messages?mentioning=", () => {
  /** alice → bob, carol (no mention), alice → BOB, bob → himself, dave (an address only). */
  async function talk() {
    const { uuid } = await f.api.room();
    const m1 = await post(uuid, "alice", "@bob can you check the date?");
    const m2 = await post(uuid, "carol", "I think Friday works.");
    const m3 = await post(uuid, "alice", "(@BOB) still there?");
    const m4 = await post(uuid, "bob", "note to self, @bob: answer alice");
    const m5 = await post(uuid, "dave", "mail bob@example.com if needed");
    return { uuid, m1, m2, m3, m4, m5 };
  }

  test("returns only the messages of others that mention the agent, and next_since passes the rest", async () => {
    const { uuid, m1, m3, m5 } = await talk();
    const page = (await messagesOf(uuid, "since=0&mentioning=bob")).body;
    assert.deepEqual(ids(page), [m1.id, m3.id], "not carol's, not bob's own, not the address");
    assert.equal(page.has_more, false);
    assert.equal(page.next_since, m5.id, "past every message read, matching or not");
    const again = (await messagesOf(uuid, `since=${page.next_since}&mentioning=bob`)).body;
    assert.deepEqual(again, { messages: [], has_more: false, next_since: m5.id }, "nothing is read twice");
    assert.deepEqual(ids((await messagesOf(uuid, "since=0&mentioning=carol")).body), [], "carol is not mentioned");
  });

  test("pages with limit and has_more, and tail gives the newest matching ones", async () => {
    const { uuid, m1, m3, m5 } = await talk();
    const first = (await messagesOf(uuid, "since=0&limit=1&mentioning=Bob")).body;
    assert.deepEqual([ids(first), first.has_more, first.next_since], [[m1.id], true, m1.id]);
    const second = (await messagesOf(uuid, `since=${first.next_since}&limit=1&mentioning=Bob`)).body;
    assert.deepEqual([ids(second), second.has_more, second.next_since], [[m3.id], false, m5.id]);
    const tail = (await messagesOf(uuid, "tail=1&mentioning=bob")).body;
    assert.deepEqual([ids(tail), tail.has_more, tail.next_since], [[m3.id], true, m5.id]);
    assert.deepEqual(ids((await messagesOf(uuid, "mentioning=bob")).body), [m1.id, m3.id], "without since: from the start");
  });

  test("a long-poll is not woken by a message that does not mention the agent, and is by one that does", async () => {
    const { uuid, m5 } = await talk();
    const held = messagesOf(uuid, `since=${m5.id}&wait=20&mentioning=bob`);
    await waiting();
    const other = await post(uuid, "carol", "Friday, then.");
    const own = await post(uuid, "bob", "@bob remember this");
    await waiting(); // still held after both commits
    const mention = await post(uuid, "erin", "@bob: Friday at ten?");
    const page = (await held).body;
    assert.deepEqual(ids(page), [mention.id], `only the mention (not ${other.id} nor ${own.id})`);
    assert.equal(page.next_since, mention.id);
  });

  test("a long-poll that times out returns nothing and a cursor past what it skipped", async () => {
    const { uuid, m5 } = await talk();
    const held = messagesOf(uuid, `since=${m5.id}&wait=1&mentioning=bob`);
    await waiting();
    const other = await post(uuid, "carol", "no one is mentioned here");
    const page = (await held).body;
    assert.deepEqual(page, { messages: [], has_more: false, next_since: other.id });
  });

  test("in a turns room it also returns, and wakes for, the agent's own turn waiting to be claimed", async () => {
    const room = await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["ana", "ben"] } });
    assert.equal(room.status, 201);
    const uuid = room.body.uuid as string;
    const ana = (await messagesOf(uuid, "since=0&wait=20&mentioning=ana")).body;
    assert.equal(ana.turn?.agent_id, "ana", "ana's turn is open: the long-poll answers at once");
    assert.equal(ana.turn.status, "ready");
    assert.deepEqual(ana.messages, []);

    const held = messagesOf(uuid, `since=${ana.next_since}&wait=20&mentioning=ben`);
    await waiting();
    const claim = await f.api.post(`/api/rooms/${uuid}/turns/${ana.turn.id}/claim`, { agent_id: "ana" });
    assert.equal(claim.status, 200, JSON.stringify(claim.body));
    const claimed = (await messagesOf(uuid, `since=${ana.next_since}&mentioning=ana`)).body;
    assert.equal(claimed.turn, null, "a claimed turn is no longer waiting for its agent");
    const reply = await f.api.post(`/api/rooms/${uuid}/turns/${ana.turn.id}/reply`, { agent_id: "ana", lease_token: claim.body.lease_token, text: "Over to you.", result: "continue" });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const ben = (await held).body;
    assert.equal(ben.turn?.agent_id, "ben", "ben's waiter woke for his turn");
    assert.equal(ben.turn.id, reply.body.next.id);
    assert.deepEqual(ben.messages, [], "ana's reply does not mention ben");
    assert.ok(ben.next_since >= reply.body.message_id);
  });

  test("an open room's page has no turn field", async () => {
    const { uuid } = await talk();
    assert.equal("turn" in (await messagesOf(uuid, "since=0&mentioning=bob")).body, false);
  });
});

describe("GET /events?mentioning=", () => {
  test("streams only the messages that mention the agent", async () => {
    const { uuid } = await f.api.room();
    await post(uuid, "alice", "@bob before the stream");
    const sse = await openSse(`${f.url}/api/rooms/${uuid}/events?mentioning=BOB`);
    await sse.waitFor(1);
    const other = await post(uuid, "carol", "nothing for bob");
    const own = await post(uuid, "bob", "@bob to myself");
    const mention = await post(uuid, "dave", "@bob: ping");
    const last = await post(uuid, "erin", "and @Bob once more");
    await waitUntil("the last mention reaching the stream", () => sse.events.some((e) => e.id === String(last.id)));
    await sse.close();
    assert.deepEqual(sse.events.map((e) => [Number(e.id), e.event]), [[2, "message.posted"], [mention.id, "message.posted"], [last.id, "message.posted"]]);
    assert.ok(!sse.events.some((e) => [other.id, own.id].includes(Number(e.id))));
    assert.deepEqual(JSON.parse(sse.events[1]!.data).message.mentions, ["bob"]);
  });

  test("in a turns room it streams the opening of the agent's turns, not the others'", async () => {
    const room = (await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["ana", "ben"] } })).body;
    const sse = await openSse(`${f.url}/api/rooms/${room.uuid}/events?mentioning=ben`);
    const mine = (await f.api.get(`/api/rooms/${room.uuid}/turns/mine?agent_id=ana`)).body;
    const claim = (await f.api.post(`/api/rooms/${room.uuid}/turns/${mine.turn.id}/claim`, { agent_id: "ana" })).body;
    const reply = (await f.api.post(`/api/rooms/${room.uuid}/turns/${mine.turn.id}/reply`, { agent_id: "ana", lease_token: claim.lease_token, text: "done", result: "continue" })).body;
    const events = await sse.waitFor(1);
    await sse.close();
    assert.deepEqual(events.map((e) => [Number(e.id), e.event]), [[reply.next.id, "turn.opened"]]);
    assert.equal(JSON.parse(events[0]!.data).payload.agent_id, "ben");
  });
});

describe("bad mentioning values", () => {
  test("are refused like an agent_id, on reads and streams, with the field named", async () => {
    const { uuid } = await f.api.room();
    for (const value of ["", "%20%20", "server", "%D1%95erver", "bo%E2%80%8Bb", "a%01b", "x".repeat(101)]) {
      for (const path of ["messages", "events"]) {
        const r = await f.api.get(`/api/rooms/${uuid}/${path}?since=0&mentioning=${value}`);
        assert.equal(r.status, 400, `${path} mentioning=${value}`);
        assert.equal(r.body.code, "validation_error");
        assert.match(r.body.detail, /^mentioning: /);
      }
    }
  });
});

describe("messages stored before mentions existed", () => {
  test("get their mentions from their text when the server starts", async () => {
    const dataDir = tempDir();
    const g = await startApi({ PARLEY_DATA_DIR: dataDir });
    const { uuid } = await g.api.room();
    const m = (await g.api.say(uuid, "alice", "@bob: an old message")).body;
    await rawSql(g.server.svc, "UPDATE messages SET mentions = NULL, mention_keys = NULL WHERE room = ?", [uuid]);
    await g.close();
    const h = await startApi({ PARLEY_DATA_DIR: dataDir });
    try {
      const [row] = await rawSql<{ mentions: string; mention_keys: string }>(h.server.svc, "SELECT mentions, mention_keys FROM messages WHERE room = ? AND seq = ?", [uuid, m.id]);
      assert.deepEqual([row!.mentions, row!.mention_keys], ['["bob"]', '["bob"]']);
      assert.deepEqual(ids((await h.api.get(`/api/rooms/${uuid}/messages?since=0&mentioning=bob`)).body), [m.id]);
      assert.equal((await h.api.post(`/api/rooms/${uuid}/verify`)).body.verdict, "CLEAN");
    } finally {
      await h.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
