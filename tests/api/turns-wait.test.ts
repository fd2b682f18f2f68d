import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startApi, TEST_BACKEND, type JsonResponse, type TestApi } from "../helpers/server";
import { testDatabase } from "../helpers/pg";
import { waitUntil } from "../helpers/wait";

// What wakes a waiting GET /turns/mine: the other agent's claim does not answer it, its own turn,
// the room's end and the room's deletion do; a head no turns write left (a note, another instance's
// commit) is read from the store. A wait that missed its wake-up would end only by its own
// timeout, which is longer than each test's.

let f: TestApi;
before(async () => {
  f = await startApi();
});
after(() => f.close());

type Api = TestApi["api"];
const base = (room: string) => `/api/rooms/${room}`;
const texts = (body: { input_messages: { text: string }[] }) => body.input_messages.map((m) => m.text);

async function turnsRoom(a: Api, participants = ["a", "b"]) {
  const r = await a.post("/api/rooms", { mode: "turns", turns: { participants } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body as { uuid: string; owner_token: string };
}
const currentTurn = async (a: Api, room: string) => (await a.get(`${base(room)}/turns/current`)).body.current as { id: number; agent_id: string };
const owner = (token: string) => ({ authorization: `Bearer ${token}` });
/** The room's log and projections (turns included) verify: what the writes stored is what the replay makes. */
const verdict = async (a: Api, room: string) => (await a.post(`${base(room)}/verify`, {})).body.verdict as string;

/** A GET turns/mine?wait=25 for `agent`, parked on `on` before this resolves; `settled` says whether it has answered. */
async function parkedWait(on: TestApi, room: string, agent: string) {
  const idle = on.server.svc.notifier.streamCount;
  const state = { settled: false };
  const answer = on.api.get(`${base(room)}/turns/mine?agent_id=${agent}&wait=25`).then((r) => {
    state.settled = true;
    return r;
  });
  await waitUntil(`${agent}'s wait being parked`, () => on.server.svc.notifier.streamCount > idle || state.settled);
  assert.equal(state.settled, false, "parked, not answered at once");
  return { answer: answer as Promise<JsonResponse>, state };
}

/** Claims the open turn of `agent` (asserting it is theirs); the lease token. */
async function claimOpen(a: Api, room: string, agent: string) {
  const turn = await currentTurn(a, room);
  assert.equal(turn.agent_id, agent);
  const c = await a.post(`${base(room)}/turns/${turn.id}/claim`, { agent_id: agent });
  assert.equal(c.status, 200, JSON.stringify(c.body));
  return { turn, token: c.body.lease_token as string, claimed: c.body };
}
async function replyOpen(a: Api, room: string, agent: string, text: string, result = "continue") {
  const { turn, token } = await claimOpen(a, room, agent);
  const r = await a.post(`${base(room)}/turns/${turn.id}/reply`, { agent_id: agent, lease_token: token, text, result });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

describe("turns: what wakes a waiting my_turn", () => {
  test("the other agent's claim leaves it waiting; the reply that opens its turn answers it with that reply", { timeout: 20_000 }, async () => {
    const { uuid: room } = await turnsRoom(f.api);
    const b = await parkedWait(f, room, "b");
    const { turn, token } = await claimOpen(f.api, room, "a");
    // Another round trip: the claim's commit has been judged by the time this answers.
    assert.equal((await currentTurn(f.api, room)).id, turn.id);
    assert.equal(b.state.settled, false, "a's claim is not b's turn");
    const r = await f.api.post(`${base(room)}/turns/${turn.id}/reply`, { agent_id: "a", lease_token: token, text: "over to you", result: "continue" });
    assert.equal(r.status, 200);
    const mine = (await b.answer).body;
    assert.equal(mine.turn.agent_id, "b");
    assert.equal(mine.turn.id, r.body.next.id);
    assert.equal(mine.room_status, "active");
    assert.equal(texts(mine).at(-1), "over to you");
    // The claim hands over the same messages my_turn did, as the room's messages show them.
    const claimed = await f.api.post(`${base(room)}/turns/${mine.turn.id}/claim`, { agent_id: "b" });
    assert.deepEqual(claimed.body.input_messages, mine.input_messages);
    const page = (await f.api.get(`${base(room)}/messages?since=0`)).body.messages as { id: number }[];
    assert.deepEqual(mine.input_messages, page, "the kickoff card and a's reply, exactly as read");
    // a's next turn (handed over from what the writes kept): b's reply, as read.
    const a = await parkedWait(f, room, "a");
    const back = await f.api.post(`${base(room)}/turns/${mine.turn.id}/reply`, { agent_id: "b", lease_token: claimed.body.lease_token, text: "back to you, @a", result: "continue" });
    assert.equal(back.status, 200);
    const next = (await a.answer).body;
    const read = (await f.api.get(`${base(room)}/messages?since=${r.body.message_id}`)).body.messages;
    assert.equal(next.turn.id, back.body.next.id);
    assert.deepEqual(next.input_messages, read);
    assert.deepEqual(next.input_messages.map((m: { text: string; mentions: string[] }) => [m.text, m.mentions]), [["back to you, @a", ["a"]]]);
  });

  test("a moderator note is read, not mistaken for a turn; the note is in the input of the turn that follows, also after my_turn answered", { timeout: 20_000 }, async () => {
    const { uuid: room, owner_token } = await turnsRoom(f.api);
    const b = await parkedWait(f, room, "b");
    const note = await f.api.post(`${base(room)}/turns/note`, { text: "keep it short" }, owner(owner_token));
    assert.equal(note.status, 201, JSON.stringify(note.body));
    assert.equal((await currentTurn(f.api, room)).agent_id, "a");
    assert.equal(b.state.settled, false, "a note is not b's turn");
    await replyOpen(f.api, room, "a", "done, b");
    const mine = (await b.answer).body;
    assert.equal(mine.turn.agent_id, "b");
    assert.deepEqual(texts(mine).slice(-2), ["keep it short", "done, b"]);
    // A note between my_turn's answer and the claim: the claim hands it over too.
    await f.api.post(`${base(room)}/turns/note`, { text: "one more thing" }, owner(owner_token));
    const claimed = await f.api.post(`${base(room)}/turns/${mine.turn.id}/claim`, { agent_id: "b" });
    assert.equal(claimed.status, 200);
    assert.deepEqual(texts(claimed.body).slice(-3), ["keep it short", "done, b", "one more thing"]);
  });

  test("the owner's cancel answers every waiting agent with the room's end", { timeout: 20_000 }, async () => {
    const { uuid: room, owner_token } = await turnsRoom(f.api, ["a", "b", "c"]);
    const b = await parkedWait(f, room, "b");
    const c = await parkedWait(f, room, "c");
    assert.equal((await f.api.post(`${base(room)}/turns/cancel`, { reason: "enough" }, owner(owner_token))).status, 200);
    for (const w of [b, c]) {
      const body = (await w.answer).body;
      assert.equal(body.turn, null);
      assert.equal(body.room_status, "cancelled");
      assert.match(body.detail, /cancelled/);
    }
    assert.equal(await verdict(f.api, room), "CLEAN");
  });

  test("a room that reaches max_rounds answers the waiting agent with blocked", { timeout: 20_000 }, async () => {
    const r = await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["a", "b"], max_rounds: 1 } });
    const room = r.body.uuid as string;
    await replyOpen(f.api, room, "a", "first");
    const a = await parkedWait(f, room, "a");
    await replyOpen(f.api, room, "b", "second");
    const body = (await a.answer).body;
    assert.equal(body.turn, null);
    assert.equal(body.room_status, "blocked");
    assert.equal(await verdict(f.api, room), "CLEAN");
  });

  test("deleting the room ends a waiting my_turn with 404 room_not_found", { timeout: 20_000 }, async () => {
    const { uuid: room, owner_token } = await turnsRoom(f.api);
    const b = await parkedWait(f, room, "b");
    assert.equal((await f.api.del(`${base(room)}`, owner(owner_token))).status, 200);
    const answer = await b.answer;
    assert.equal(answer.status, 404);
    assert.equal(answer.body.code, "room_not_found");
  });

  test("a turn's input is whole also when it is more than the server keeps in memory (four replies of 10,000 characters)", { timeout: 20_000 }, async () => {
    const agents = ["a", "b", "c", "d", "e"];
    const { uuid: room } = await turnsRoom(f.api, agents);
    const replies: number[] = [];
    for (const agent of agents) replies.push((await replyOpen(f.api, room, agent, `${agent} `.repeat(5_000))).message_id as number);
    const mine = (await f.api.get(`${base(room)}/turns/mine?agent_id=a`)).body;
    assert.equal(mine.turn.agent_id, "a");
    const read = (await f.api.get(`${base(room)}/messages?since=${replies[0]}`)).body.messages;
    assert.deepEqual(mine.input_messages, read);
    assert.deepEqual(mine.input_messages.map((m: { agent_id: string }) => m.agent_id), ["b", "c", "d", "e"]);
    const claimed = await f.api.post(`${base(room)}/turns/${mine.turn.id}/claim`, { agent_id: "a" });
    assert.deepEqual(claimed.body.input_messages, read);
  });

  test("a wait on one room is not answered by turns of another", { timeout: 20_000 }, async () => {
    const { uuid: one } = await turnsRoom(f.api);
    const { uuid: two } = await turnsRoom(f.api);
    const b = await parkedWait(f, one, "b");
    await replyOpen(f.api, two, "a", "elsewhere");
    assert.equal((await currentTurn(f.api, two)).agent_id, "b");
    assert.equal(b.state.settled, false);
    await replyOpen(f.api, one, "a", "here");
    assert.deepEqual(texts((await b.answer).body).at(-1), "here");
  });
});

describe("turns: a waiting my_turn across instances", { skip: TEST_BACKEND !== "postgres" && "two instances share a PostgreSQL database only" }, () => {
  let one: TestApi;
  let two: TestApi;
  before(async () => {
    const url = await testDatabase();
    one = await startApi({ PARLEY_DATABASE_URL: url });
    two = await startApi({ PARLEY_DATABASE_URL: url });
  });
  after(async () => {
    await one?.close();
    await two?.close();
  });

  test("an agent waiting on one instance is answered by the other agent's reply on the other, and not by its claim", { timeout: 20_000 }, async () => {
    const { uuid: room } = await turnsRoom(one.api);
    const b = await parkedWait(one, room, "b");
    const { turn, token } = await claimOpen(two.api, room, "a");
    assert.equal((await currentTurn(one.api, room)).id, turn.id);
    const r = await two.api.post(`${base(room)}/turns/${turn.id}/reply`, { agent_id: "a", lease_token: token, text: "from the other side", result: "continue" });
    assert.equal(r.status, 200);
    const mine = (await b.answer).body;
    assert.equal(mine.turn.id, r.body.next.id);
    assert.equal(texts(mine).at(-1), "from the other side");
    // And back: b on the first instance, a waiting on the second.
    const a = await parkedWait(two, room, "a");
    await replyOpen(one.api, room, "b", "and back");
    assert.equal(texts((await a.answer).body).at(-1), "and back");
  });

  test("without a wait, my_turn on one instance answers a turn the other opened just before", { timeout: 20_000 }, async () => {
    const { uuid: room } = await turnsRoom(one.api);
    // Read on the first instance, so that it holds the room (and its state) in memory.
    assert.equal((await one.api.get(`${base(room)}/turns/mine?agent_id=b`)).body.turn, null);
    for (let round = 0; round < 5; round++) {
      const replied = await replyOpen(two.api, room, "a", `round ${round} from a`);
      const mine = (await one.api.get(`${base(room)}/turns/mine?agent_id=b`)).body;
      assert.equal(mine.turn?.id, replied.next.id, "b's turn, not the state before a's reply");
      assert.equal(texts(mine).at(-1), `round ${round} from a`);
      await replyOpen(one.api, room, "b", `round ${round} from b`);
    }
  });
});
