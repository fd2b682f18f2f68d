import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import readline from "node:readline";
import { ManualClock, startApi, withApi, type TestApi } from "../helpers/server";
import { streamsKey } from "../../lib/services/rate-limit";
import { testAgent } from "../helpers/agent";
import { waitUntil } from "../helpers/wait";
import { sweepTurns } from "../../lib/services/turns";
import { turnRuleViolations } from "../../lib/domain/turns";
import { rawSql } from "../helpers/db";

let f: TestApi;
// A second server whose clock the tests move (timeouts, delays, leases, expiry).
const clock = new ManualClock(Date.now());
let timed: TestApi;

before(async () => {
  f = await startApi();
  // The turn timer is off (1 h) on this one: the tests sweep by hand when they move the clock.
  timed = await startApi({ PARLEY_TURN_SWEEP_INTERVAL: "1h" }, { clock });
});
after(async () => {
  await f.close();
  await timed.close();
});

type Api = TestApi["api"];
const base = (room: string) => `/api/rooms/${room}`;
interface TurnView {
  id: number;
  round: number;
  slot: number;
  agent_id: string;
  phase: "dialogue" | "confirm";
  status: string;
  available_at: string;
  claim_by: string;
  lease_until: string | null;
  reason: string | null;
  closed_at: string | null;
}

async function turnsRoom(a: Api, turns: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const r = await a.post("/api/rooms", { mode: "turns", turns, ...extra });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body as { uuid: string; owner_token: string };
}
const state = async (a: Api, room: string) => (await a.get(`${base(room)}/turns/current`)).body;
/**
 * a's reply with my_next has been posted (b's turn is open) and its my_next waits. The wait opens
 * before the reply's transaction commits, so the wait alone does not say the reply is in.
 */
const replyParked = (room: string, idle: number) =>
  waitUntil("a's reply posted and its my_next parked", async () => f.server.svc.notifier.streamCount > idle && (await state(f.api, room)).current?.agent_id === "b");
const current = async (a: Api, room: string): Promise<TurnView> => {
  const s = await state(a, room);
  assert.ok(s.current, `no open turn: ${JSON.stringify(s)}`);
  return s.current;
};
const claim = (a: Api, room: string, tid: number, agent_id: string, extra: Record<string, unknown> = {}) =>
  a.post(`${base(room)}/turns/${tid}/claim`, { agent_id, ...extra });
const reply = (a: Api, room: string, tid: number, agent_id: string, lease_token: string, result: string, text = `${agent_id} says ${result}`) =>
  a.post(`${base(room)}/turns/${tid}/reply`, { agent_id, lease_token, text, result });
/** A "continue" reply with my_next. */
const reply2 = (a: Api, room: string, tid: number, agent_id: string, lease_token: string, text: string, my_next: unknown) =>
  a.post(`${base(room)}/turns/${tid}/reply`, { agent_id, lease_token, text, result: "continue", my_next });

/** The open turn's agent claims and replies; asserts that it was that agent's turn. */
async function take(a: Api, room: string, agent: string, result = "continue", text?: string) {
  const turn = await current(a, room);
  assert.equal(turn.agent_id, agent, `expected ${agent}'s turn, got ${JSON.stringify(turn)}`);
  const c = await claim(a, room, turn.id, agent);
  assert.equal(c.status, 200, JSON.stringify(c.body));
  const r = await reply(a, room, turn.id, agent, c.body.lease_token, result, text);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return { turn, claimed: c.body, replied: r.body };
}
const owner = (token: string) => ({ authorization: `Bearer ${token}` });
async function verdict(a: Api, room: string) {
  const v = await a.post(`${base(room)}/verify`, {});
  return v.body as { verdict: string; explanation: string; failures: { seq: number | null; type: string }[]; details: { projections: { turns: number } } };
}

describe("turns: creation and the protocol card", () => {
  test("a turns room opens with a kickoff card and the first turn; GET /turns lists turns; instructions explain the protocol", async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["ana", "ben", "cy"], first: "ben", max_rounds: 4, turn_timeout_s: 60, delay_s: 0 });
    const s = await state(f.api, room);
    assert.equal(s.status, "active");
    assert.equal(s.round, 1);
    assert.equal(s.max_rounds, 4);
    assert.deepEqual(s.participants.map((p: { agent_id: string; status: string }) => [p.agent_id, p.status]), [["ben", "active"], ["cy", "active"], ["ana", "active"]]);
    assert.equal(s.current.agent_id, "ben");
    assert.equal(s.current.phase, "dialogue");
    assert.equal(s.current.status, "ready");
    const msgs = (await f.api.get(`${base(room)}/messages`)).body.messages;
    assert.equal(msgs.length, 1);
    assert.equal(msgs[0].agent_id, "server");
    assert.match(msgs[0].text, /Turns protocol/);
    assert.match(msgs[0].text, /`ben`, `cy`, `ana`/);
    assert.match(msgs[0].text, /4 rounds/);
    const info = (await f.api.get(base(room))).body;
    assert.equal(info.mode, "turns");
    assert.equal(info.agent_count, 0, "the server's card is not an agent");
    const md = await fetch(`${f.url}/${room}`, { headers: { accept: "text/markdown" } }).then((r) => r.text());
    assert.match(md, /## This is a turns room/);
    assert.match(md, /turns\/mine\?agent_id=YOU&wait=30/);
    const all = (await f.api.get(`${base(room)}/turns`)).body;
    assert.equal(all.turns.length, 1);
  });

  test("validation: every limit ±1, required and unknown fields", async () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ mode: "turns" }, /turns: is required with mode "turns"/],
      [{ mode: "open", turns: { participants: ["a", "b"] } }, /turns: is only for mode "turns"/],
      [{ mode: "turns", turns: { participants: ["a"] } }, /turns\.participants: must list at least 2/],
      [{ mode: "turns", turns: { participants: ["a", "b", "c", "d", "e", "f", "g", "h", "i"] } }, /at most 8/],
      [{ mode: "turns", turns: { participants: ["a", "a"] } }, /must not list an agent twice/],
      [{ mode: "turns", turns: { participants: ["a", "server"] } }, /must not be "server"/],
      [{ mode: "turns", turns: { participants: "a,b" } }, /turns\.participants: must be an array/],
      [{ mode: "turns", turns: { participants: ["a", "b"], first: "c" } }, /turns\.first: must be one of the participants/],
      [{ mode: "turns", turns: { participants: ["a", "b"], max_rounds: 0 } }, /max_rounds: must be at least 1/],
      [{ mode: "turns", turns: { participants: ["a", "b"], max_rounds: 201 } }, /max_rounds: must be at most 200/],
      [{ mode: "turns", turns: { participants: ["a", "b"], max_rounds: 2.5 } }, /max_rounds: must be a whole number/],
      [{ mode: "turns", turns: { participants: ["a", "b"], turn_timeout_s: 9 } }, /turn_timeout_s: must be at least 10/],
      [{ mode: "turns", turns: { participants: ["a", "b"], turn_timeout_s: 86401 } }, /turn_timeout_s: must be at most 86400/],
      [{ mode: "turns", turns: { participants: ["a", "b"], delay_s: -1 } }, /delay_s: must be at least 0/],
      [{ mode: "turns", turns: { participants: ["a", "b"], delay_s: 3601 } }, /delay_s: must be at most 3600/],
      [{ mode: "turns", turns: { participants: ["a", "b"], absent_after: 0 } }, /absent_after: must be at least 1/],
      [{ mode: "turns", turns: { participants: ["a", "b"], absent_after: 11 } }, /absent_after: must be at most 10/],
      [{ mode: "turns", turns: { participants: ["a", "b"], policy: "vote" } }, /policy: must be "consensus" or "supervisor"/],
      [{ mode: "turns", turns: { participants: ["a", "b"], policy: "supervisor" } }, /supervisor: is required/],
      [{ mode: "turns", turns: { participants: ["a", "b"], policy: "supervisor", supervisor: "z" } }, /supervisor: must be one of the participants/],
      [{ mode: "turns", turns: { participants: ["a", "b"], supervisor: "a" } }, /supervisor: is only for policy "supervisor"/],
      [{ mode: "turns", turns: { participants: ["a", "b"], colour: "red" } }, /colour/],
    ];
    for (const [body, detail] of bad) {
      const r = await f.api.post("/api/rooms", body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, "validation_error");
      assert.match(r.body.detail, detail, JSON.stringify(body));
    }
    const edges = [
      { participants: ["a", "b"], max_rounds: 1, turn_timeout_s: 10, delay_s: 0, absent_after: 1 },
      { participants: ["a", "b", "c", "d", "e", "f", "g", "h"], max_rounds: 200, turn_timeout_s: 86400, delay_s: 3600, absent_after: 10, policy: "supervisor", supervisor: "h" },
    ];
    for (const turns of edges) assert.equal((await f.api.post("/api/rooms", { mode: "turns", turns })).status, 201, JSON.stringify(turns));
  });
});

describe("turns: conversations", () => {
  test("three agents complete a conversation; consensus rejected once, then reached; verify CLEAN, then REFUTED after a turn row is edited", async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["ana", "ben", "cy"] });
    const first = await take(f.api, room, "ana");
    assert.equal(first.claimed.input_messages.length, 1, "ana's first turn hands over the kickoff card");
    assert.equal(first.replied.next.agent_id, "ben");
    const b = await take(f.api, room, "ben", "pass");
    assert.deepEqual(b.claimed.input_messages.map((m: { agent_id: string }) => m.agent_id), ["server", "ana"], "ben sees what came before his first turn");
    await take(f.api, room, "cy");
    // Round 2: ana's input is what ben and cy said since her last turn.
    const a2 = await take(f.api, room, "ana", "complete", "I think we are done.");
    assert.equal(a2.turn.round, 2);
    assert.deepEqual(a2.claimed.input_messages.map((m: { agent_id: string }) => m.agent_id), ["ben", "cy"]);
    assert.equal(a2.replied.next.phase, "confirm");
    assert.equal(a2.replied.next.agent_id, "ben");
    let s = await state(f.api, room);
    assert.deepEqual(s.proposal, { by: "ana", turn_id: a2.turn.id, pending: ["ben", "cy"], confirmed: [] });
    await take(f.api, room, "ben", "complete", "Agreed.");
    const rejected = await take(f.api, room, "cy", "continue", "Not yet: one open point.");
    assert.equal(rejected.replied.next.phase, "dialogue");
    assert.equal(rejected.replied.next.agent_id, "ana", "the dialogue resumes after the rejecter");
    assert.equal(rejected.replied.next.round, 3, "after the last slot the round advances");
    assert.equal((await state(f.api, room)).proposal, null);
    await take(f.api, room, "ana");
    await take(f.api, room, "ben", "complete", "Settled now?");
    s = await state(f.api, room);
    assert.deepEqual(s.proposal.pending, ["cy", "ana"]);
    await take(f.api, room, "cy", "complete");
    const done = await take(f.api, room, "ana", "complete");
    assert.equal(done.replied.room_status, "completed");
    assert.equal(done.replied.next, null);
    s = await state(f.api, room);
    assert.equal(s.status, "completed");
    assert.equal(s.current, null);
    // Completed rooms are read-only.
    assert.equal((await f.api.say(room, "ana", "one more thing")).body.code, "room_closed");

    const v = await verdict(f.api, room);
    assert.equal(v.verdict, "CLEAN", v.explanation + JSON.stringify(v.failures));
    assert.equal(v.details.projections.turns, 10);
    const bundle = (await f.api.get(`${base(room)}/export`)).body;
    const types = bundle.events.map((e: { type: string }) => e.type);
    for (const t of ["turn.opened", "turn.claimed", "turn.done", "completion.proposed", "completion.confirmed", "completion.rejected", "room.completed"]) {
      assert.ok(types.includes(t), `${t} is logged`);
    }
    // The rules are checked over the log itself: a log where the server broke them is caught even
    // when everything else about it is consistent.
    assert.deepEqual(turnRuleViolations(bundle.events), []);
    type E = { seq: number; type: string; actor: string; payload: Record<string, unknown>; server: Record<string, unknown> };
    const edited = (fn: (events: E[]) => void) => {
      const events = structuredClone(bundle.events) as E[];
      fn(events);
      return turnRuleViolations(events as never)[0]?.seq; // the first broken rule (later ones follow from it)
    };
    const opened = (bundle.events as E[]).filter((e) => e.type === "turn.opened");
    assert.deepEqual(edited((ev) => (ev.find((e) => e.seq === opened[1]!.seq)!.payload.agent_id = "cy")), opened[1]!.seq, "the wrong next speaker");
    // One time per transaction: a turn opens exactly when planned, not 1 ms off.
    const shifted = (iso: string) => new Date(Date.parse(iso) + 1).toISOString();
    assert.deepEqual(
      edited((ev) => {
        const e = ev.find((x) => x.seq === opened[1]!.seq)!;
        e.payload.available_at = shifted(e.payload.available_at as string);
        e.server.claim_by = shifted(e.server.claim_by as string);
      }),
      opened[1]!.seq,
      "a turn opening 1 ms off the plan",
    );
    const claimed = (bundle.events as E[]).find((e) => e.type === "turn.claimed")!;
    assert.deepEqual(edited((ev) => (ev.find((e) => e.seq === claimed.seq)!.actor = "ben")), claimed.seq, "a claim by another agent");
    const completed = (bundle.events as E[]).find((e) => e.type === "room.completed")!;
    assert.deepEqual(edited((ev) => ev.splice(ev.findLastIndex((e) => e.type === "completion.confirmed"), 1)), completed.seq, "completion without every confirmation");

    await rawSql(f.server.svc, "UPDATE turns SET agent_id = 'cy' WHERE room = ? AND id = ?", [room, a2.turn.id]);
    const refuted = await verdict(f.api, room);
    assert.equal(refuted.verdict, "REFUTED");
    assert.deepEqual(refuted.failures.map((f) => [f.seq, f.type]), [[a2.turn.id, "projection"]]);
  });

  test("the owner cannot reopen a completed room", async () => {
    const { uuid: room, owner_token } = await turnsRoom(f.api, { participants: ["a", "b"], policy: "supervisor", supervisor: "a" });
    await take(f.api, room, "a", "complete");
    const reopen = await f.api.post(`${base(room)}/reopen`, {}, owner(owner_token));
    assert.equal(reopen.status, 409);
    assert.equal(reopen.body.code, "room_closed");
  });

  test("supervisor policy: others' complete asks the supervisor; the supervisor may skip; its complete ends the room at once", async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["lead", "w1", "w2"], policy: "supervisor", supervisor: "lead" });
    await take(f.api, room, "lead");
    const w1 = await take(f.api, room, "w1", "complete");
    assert.equal(w1.replied.next.agent_id, "lead");
    assert.equal(w1.replied.next.phase, "confirm");
    const rejected = await take(f.api, room, "lead", "continue", "No, w2 has not spoken.");
    assert.equal(rejected.replied.next.agent_id, "w1", "the dialogue resumes after the rejecter");
    await take(f.api, room, "w1");
    const turn = await current(f.api, room);
    assert.equal(turn.agent_id, "w2");
    // Only the supervisor (or the owner) may skip.
    const notSup = await f.api.post(`${base(room)}/turns/${turn.id}/skip`, { agent_id: "w1" });
    assert.equal(notSup.status, 403);
    assert.equal(notSup.body.code, "forbidden");
    const skipped = await f.api.post(`${base(room)}/turns/${turn.id}/skip`, { agent_id: "lead" });
    assert.equal(skipped.status, 200, JSON.stringify(skipped.body));
    assert.equal(skipped.body.current.agent_id, "lead");
    const again = await f.api.post(`${base(room)}/turns/${turn.id}/skip`, { agent_id: "lead" });
    assert.equal(again.body.code, "invalid_transition");
    const s = await state(f.api, room);
    assert.equal(s.participants.find((p: { agent_id: string }) => p.agent_id === "w2").timeouts, 0, "a skip is not a timeout");
    const end = await take(f.api, room, "lead", "complete");
    assert.equal(end.replied.room_status, "completed");
    assert.equal((await verdict(f.api, room)).verdict, "CLEAN");
  });

  test("max_rounds → blocked; resume needs more rounds; the owner raises them and resumes", async () => {
    const { uuid: room, owner_token } = await turnsRoom(f.api, { participants: ["a", "b"], max_rounds: 2 });
    for (const agent of ["a", "b", "a"]) await take(f.api, room, agent);
    const last = await take(f.api, room, "b");
    assert.equal(last.replied.room_status, "blocked");
    let s = await state(f.api, room);
    assert.equal(s.reason, "max_rounds");
    assert.equal(s.current, null);
    const mine = (await f.api.get(`${base(room)}/turns/mine?agent_id=a`)).body;
    assert.equal(mine.turn, null);
    assert.equal(mine.room_status, "blocked");
    assert.equal((await f.api.post(`${base(room)}/turns/resume`, {})).body.code, "not_owner");
    const early = await f.api.post(`${base(room)}/turns/resume`, {}, owner(owner_token));
    assert.equal(early.status, 409);
    assert.match(early.body.detail, /raise max_rounds first/);
    const lower = await f.api.post(`${base(room)}/turns/max-rounds`, { max_rounds: 2 }, owner(owner_token));
    assert.equal(lower.status, 400);
    assert.match(lower.body.detail, /greater than the current 2/);
    assert.equal((await f.api.post(`${base(room)}/turns/max-rounds`, { max_rounds: "3" }, owner(owner_token))).status, 400);
    assert.equal((await f.api.post(`${base(room)}/turns/max-rounds`, { max_rounds: 201 }, owner(owner_token))).status, 400);
    const raised = await f.api.post(`${base(room)}/turns/max-rounds`, { max_rounds: 3 }, owner(owner_token));
    assert.equal(raised.status, 200, JSON.stringify(raised.body));
    assert.equal(raised.body.max_rounds, 3);
    const resumed = await f.api.post(`${base(room)}/turns/resume`, {}, owner(owner_token));
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.status, "active");
    assert.equal(resumed.body.current.agent_id, "a");
    assert.equal(resumed.body.current.round, 3);
    assert.equal((await f.api.post(`${base(room)}/turns/resume`, {}, owner(owner_token))).body.code, "invalid_transition");
    // A blocked result blocks the room with the agent's text as the reason.
    await take(f.api, room, "a", "blocked", "We need a human decision on the budget.");
    s = await state(f.api, room);
    assert.equal(s.status, "blocked");
    assert.equal(s.reason, "We need a human decision on the budget.");
    // A moderator note, then cancel: terminal and read-only.
    const note = await f.api.post(`${base(room)}/turns/note`, { text: "Budget approved: go on." }, owner(owner_token));
    assert.equal(note.status, 201, JSON.stringify(note.body));
    assert.equal(note.body.agent_id, "owner");
    assert.equal((await f.api.post(`${base(room)}/turns/note`, { text: "x" })).body.code, "not_owner");
    const resumed2 = await f.api.post(`${base(room)}/turns/resume`, {}, owner(owner_token));
    assert.equal(resumed2.body.current.agent_id, "b", "the dialogue goes on after the agent who blocked");
    const cancelled = await f.api.post(`${base(room)}/turns/cancel`, { reason: "enough" }, owner(owner_token));
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, "cancelled");
    assert.equal(cancelled.body.current, null);
    const all = (await f.api.get(`${base(room)}/turns`)).body.turns as TurnView[];
    assert.equal(all.at(-1)!.status, "cancelled");
    assert.equal((await f.api.post(`${base(room)}/turns/cancel`, {}, owner(owner_token))).body.code, "room_closed");
    assert.equal((await claim(f.api, room, all.at(-1)!.id, "b")).body.code, "room_closed");
    assert.equal((await f.api.get(`${base(room)}/turns/mine?agent_id=b`)).body.room_status, "cancelled");
    assert.equal((await verdict(f.api, room)).verdict, "CLEAN");
  });
});

describe("turns: who may speak", () => {
  test("not_your_turn, not_participant, wrong or stale tokens, duplicate replies, unknown turns and rooms", async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"] });
    const t1 = await current(f.api, room);
    const byB = await claim(f.api, room, t1.id, "b");
    assert.equal(byB.status, 403);
    assert.equal(byB.body.code, "not_your_turn");
    assert.match(byB.body.detail, /belongs to "a"/);
    const byZ = await claim(f.api, room, t1.id, "zed");
    assert.equal(byZ.status, 403);
    assert.equal(byZ.body.code, "not_participant");
    // /messages: a participant outside its claimed turn → 409; a non-participant → 403.
    const early = await f.api.say(room, "a", "may I?");
    assert.equal(early.status, 409);
    assert.equal(early.body.code, "not_your_turn");
    assert.match(early.body.detail, /turns\/mine/);
    assert.equal((await f.api.say(room, "zed", "hi")).status, 403);
    const c = await claim(f.api, room, t1.id, "a");
    assert.equal(c.status, 200);
    assert.ok(Date.parse(c.body.lease_until) > Date.now());
    // Within the claimed turn, extra messages are fine; b still may not post.
    assert.equal((await f.api.say(room, "a", "a long thought, part 1")).status, 201);
    assert.equal((await f.api.say(room, "b", "me too")).status, 409);
    // Wrong tokens and wrong agents → 403; bad input → 400.
    assert.equal((await reply(f.api, room, t1.id, "a", "not-the-token", "continue")).status, 403);
    assert.equal((await reply(f.api, room, t1.id, "b", c.body.lease_token, "continue")).body.code, "not_your_turn");
    for (const body of [
      { agent_id: "a", lease_token: c.body.lease_token, text: "x", result: "maybe" },
      { agent_id: "a", lease_token: c.body.lease_token, text: "   ", result: "continue" },
      { agent_id: "a", lease_token: c.body.lease_token, text: "x".repeat(10_001), result: "continue" },
      { agent_id: "a", lease_token: 42, text: "x", result: "continue" },
      { agent_id: "a", text: "x", result: "continue" },
    ]) {
      const r = await f.api.post(`${base(room)}/turns/${t1.id}/reply`, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, "validation_error");
    }
    assert.equal((await f.api.post(`${base(room)}/turns/${t1.id}/reply`, "{not json")).body.code, "invalid_json");
    assert.equal((await reply(f.api, room, t1.id, "a", c.body.lease_token, "continue", "x".repeat(10_000))).status, 200, "10,000 characters is the limit");
    const dup = await reply(f.api, room, t1.id, "a", c.body.lease_token, "continue");
    assert.equal(dup.status, 409);
    assert.equal(dup.body.code, "invalid_transition");
    assert.match(dup.body.detail, /already replied/);
    // The old token does not hold a's next turn.
    await take(f.api, room, "b");
    const t3 = await current(f.api, room);
    assert.equal((await reply(f.api, room, t3.id, "a", c.body.lease_token, "continue")).status, 403, "a stale token");
    // Unknown turns, rooms; an open-mode room has no turns.
    assert.equal((await claim(f.api, room, 99999, "a")).body.code, "turn_not_found");
    assert.equal((await claim(f.api, room, "abc" as unknown as number, "a")).body.code, "turn_not_found");
    assert.equal((await f.api.get(`${base(crypto.randomUUID())}/turns/current`)).body.code, "room_not_found");
    assert.equal((await f.api.get(`${base("nope")}/turns/current`)).body.code, "invalid_uuid");
    const open = (await f.api.room()).uuid;
    assert.equal((await f.api.get(`${base(open)}/turns/current`)).body.code, "turn_not_found");
    assert.equal((await f.api.say(open, "anyone", "open rooms are open")).status, 201);
    assert.equal((await f.api.get(`${base(room)}/turns/mine?agent_id=a&wait=31`)).status, 400);
    assert.equal((await f.api.get(`${base(room)}/turns/mine`)).status, 400);
    assert.equal((await f.api.get(`${base(room)}/turns/mine?agent_id=zed`)).body.code, "not_participant");
    // A pass in a confirm turn is refused with what to send instead.
    await take(f.api, room, "a", "complete");
    const confirm = await current(f.api, room);
    const cc = await claim(f.api, room, confirm.id, "b");
    const pass = await reply(f.api, room, confirm.id, "b", cc.body.lease_token, "pass");
    assert.equal(pass.status, 400);
    assert.match(pass.body.detail, /confirm turn/);
  });

  test("two OS processes race to claim the same turn 50 times: exactly one lease each time", async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"], max_rounds: 100 });
    const procs = [0, 1].map(() => spawn(process.execPath, ["--import", "tsx", "tests/helpers/turn-claimers.ts", f.url, room, "4"], { stdio: ["pipe", "pipe", "inherit"] }));
    const lines = procs.map((p) => readline.createInterface({ input: p.stdout! })[Symbol.asyncIterator]());
    for (const l of lines) assert.equal((await l.next()).value, "ready");
    try {
      for (let i = 0; i < 50; i++) {
        const turn = await current(f.api, room);
        for (const p of procs) p.stdin!.write(`${turn.id} ${turn.agent_id}\n`);
        const results = (await Promise.all(lines.map((l) => l.next()))).flatMap((r) => JSON.parse(r.value as string) as [number, string][]);
        assert.ok(results.every(([status]) => status === 200), JSON.stringify(results));
        const tokens = new Set(results.map(([, token]) => token));
        assert.equal(tokens.size, 1, `one lease for turn ${turn.id}: ${JSON.stringify(results)}`);
        const r = await reply(f.api, room, turn.id, turn.agent_id, [...tokens][0]!, "continue");
        assert.equal(r.status, 200);
      }
    } finally {
      for (const p of procs) p.stdin!.end();
    }
    const events = (await f.api.get(`${base(room)}/export`)).body.events as { type: string; payload: { turn_id?: number } }[];
    const claims = events.filter((e) => e.type === "turn.claimed").map((e) => e.payload.turn_id);
    assert.equal(claims.length, 50, "one turn.claimed event per turn");
    assert.equal(new Set(claims).size, 50);
    assert.equal((await verdict(f.api, room)).verdict, "CLEAN");
  });

  test("a turn hands over at most the newest 100 messages since the agent's last turn", async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"] });
    const t = await current(f.api, room);
    const c = await claim(f.api, room, t.id, "a");
    for (let i = 1; i <= 101; i++) assert.equal((await f.api.say(room, "a", `part ${i}`)).status, 201);
    await reply(f.api, room, t.id, "a", c.body.lease_token, "continue", "the end");
    const mine = (await f.api.get(`${base(room)}/turns/mine?agent_id=b`)).body;
    assert.equal(mine.input_messages.length, 100);
    assert.deepEqual([mine.input_messages[0].text, mine.input_messages.at(-1).text], ["part 3", "the end"]);
    const claimed = await claim(f.api, room, mine.turn.id, "b");
    assert.equal(claimed.body.input_messages.length, 100);
    await reply(f.api, room, mine.turn.id, "b", claimed.body.lease_token, "continue", "ok");
    const next = (await f.api.get(`${base(room)}/turns/mine?agent_id=a`)).body;
    assert.deepEqual(next.input_messages.map((m: { text: string }) => m.text), ["ok"], "only what came after a's last turn");
  });

  test("signed claims and replies pin the agent's key", async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["signer", "other"] });
    const agent = testAgent();
    const t = await current(f.api, room);
    const c = await claim(f.api, room, t.id, "signer", { sig: agent.signWrite(room, "turn.claimed", "signer", { turn_id: t.id }) });
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const reclaim = await claim(f.api, room, t.id, "signer");
    assert.equal(reclaim.body.code, "signature_required", "a re-claim under a pinned name must be signed too");
    const signedReclaim = await claim(f.api, room, t.id, "signer", { sig: agent.signWrite(room, "turn.claimed", "signer", { turn_id: t.id }) });
    assert.equal(signedReclaim.body.lease_token, c.body.lease_token);
    const payload = { text: "signed reply", turn_id: t.id, result: "continue" };
    const unsigned = await reply(f.api, room, t.id, "signer", c.body.lease_token, "continue", "signed reply");
    assert.equal(unsigned.body.code, "signature_required");
    const r = await f.api.post(`${base(room)}/turns/${t.id}/reply`, { agent_id: "signer", lease_token: c.body.lease_token, ...payload, sig: agent.signWrite(room, "message.posted", "signer", payload) });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const msg = (await f.api.get(`${base(room)}/messages?tail=1`)).body.messages[0];
    assert.equal(msg.auth, "signed");
    const v = await verdict(f.api, room);
    assert.equal(v.verdict, "CLEAN", v.explanation);
  });
});

describe("turns: time (manual clock)", () => {
  test("delay_s is respected: a claim before available_at → 409 turn_not_ready with the time; mine waits for it", async () => {
    const { uuid: room } = await turnsRoom(timed.api, { participants: ["a", "b"], delay_s: 30, turn_timeout_s: 60 });
    const { replied } = await take(timed.api, room, "a");
    const next = replied.next as TurnView;
    assert.equal(Date.parse(next.available_at), clock.now() + 30_000);
    assert.equal(Date.parse(next.claim_by), clock.now() + 90_000, "the claim window starts when the turn opens");
    const early = await claim(timed.api, room, next.id, "b");
    assert.equal(early.status, 409);
    assert.equal(early.body.code, "turn_not_ready");
    assert.match(early.body.detail, new RegExp(next.available_at.replace(/[.]/g, "\\.")));
    const notYet = (await timed.api.get(`${base(room)}/turns/mine?agent_id=b`)).body;
    assert.match(notYet.detail, /opens at/);
    clock.advance(29_999);
    assert.equal((await claim(timed.api, room, next.id, "b")).body.code, "turn_not_ready");
    clock.advance(1);
    const mine = (await timed.api.get(`${base(room)}/turns/mine?agent_id=b`)).body;
    assert.equal(mine.turn.id, next.id);
    assert.deepEqual(mine.input_messages.map((m: { agent_id: string }) => m.agent_id), ["server", "a"]);
    assert.equal((await claim(timed.api, room, next.id, "b")).status, 200);
  });

  test("timeouts skip, make participants absent and block with too few; the owner reinstates and resumes; leases run out → 409", async () => {
    const { uuid: room, owner_token } = await turnsRoom(timed.api, { participants: ["a", "b", "c"], turn_timeout_s: 10, absent_after: 2 });
    // a does not claim in time: skipped, and b's turn opens.
    const t1 = await current(timed.api, room);
    clock.advance(9_999);
    await sweepTurns(timed.server.svc);
    assert.equal((await current(timed.api, room)).id, t1.id, "not before the timeout");
    clock.advance(1);
    await sweepTurns(timed.server.svc);
    let s = await state(timed.api, room);
    assert.equal(s.current.agent_id, "b");
    assert.equal(s.participants[0].timeouts, 1);
    const t1After = (await timed.api.get(`${base(room)}/turns`)).body.turns.find((t: TurnView) => t.id === t1.id);
    assert.deepEqual([t1After.status, t1After.reason], ["skipped", "timeout"]);
    // b claims but never replies: its lease runs out; a reply then → 409 lease_expired.
    const c = await claim(timed.api, room, s.current.id, "b");
    clock.advance(10_000);
    const late = await reply(timed.api, room, s.current.id, "b", c.body.lease_token, "continue");
    assert.equal(late.status, 409);
    assert.equal(late.body.code, "lease_expired");
    const reclaim = await claim(timed.api, room, s.current.id, "b");
    assert.equal(reclaim.status, 409, "a lease that ran out is not handed out again");
    assert.equal((await state(timed.api, room)).current.agent_id, "b", "reads never write: the skip is the timer's");
    await sweepTurns(timed.server.svc);
    s = await state(timed.api, room);
    assert.equal(s.current.agent_id, "c");
    const afterSkip = await reply(timed.api, room, s.current.id - 0, "b", c.body.lease_token, "continue");
    assert.equal(afterSkip.status, 403, "b's old token does not hold c's turn");
    await take(timed.api, room, "c");
    // a times out a second time in a row → absent; the rotation goes on without it.
    clock.advance(10_000);
    await sweepTurns(timed.server.svc);
    s = await state(timed.api, room);
    assert.equal(s.participants[0].status, "absent");
    assert.equal(s.current.agent_id, "b");
    const health = (await timed.api.get(`${base(room)}/health`)).body;
    assert.ok(health.alerts.some((x: { type: string; agent_id: string }) => x.type === "absent_participant" && x.agent_id === "a"));
    await take(timed.api, room, "b");
    assert.equal((await current(timed.api, room)).agent_id, "c", "absent a is not asked");
    // c times out twice → absent; fewer than 2 active → blocked.
    clock.advance(10_000);
    await sweepTurns(timed.server.svc);
    await take(timed.api, room, "b");
    clock.advance(10_000);
    await sweepTurns(timed.server.svc);
    s = await state(timed.api, room);
    assert.equal(s.status, "blocked");
    assert.equal(s.reason, "not_enough_participants");
    const refused = await timed.api.post(`${base(room)}/turns/resume`, {}, owner(owner_token));
    assert.equal(refused.status, 409);
    assert.match(refused.body.detail, /reinstate/);
    assert.equal((await timed.api.post(`${base(room)}/turns/reinstate`, { agent_id: "b" }, owner(owner_token))).body.code, "invalid_transition");
    assert.equal((await timed.api.post(`${base(room)}/turns/reinstate`, { agent_id: "zed" }, owner(owner_token))).body.code, "not_participant");
    const back = await timed.api.post(`${base(room)}/turns/reinstate`, { agent_id: "a" }, owner(owner_token));
    assert.equal(back.status, 200, JSON.stringify(back.body));
    const resumed = await timed.api.post(`${base(room)}/turns/resume`, {}, owner(owner_token));
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.current.agent_id, "a", "after c (who had the last turn), the next active participant");
    const v = await verdict(timed.api, room);
    assert.equal(v.verdict, "CLEAN", v.explanation);
  });

  test("the monitor flags a stalled turn, an expired lease, an A,B,A,B loop and the last rounds", async () => {
    const { uuid: room } = await turnsRoom(timed.api, { participants: ["a", "b"], turn_timeout_s: 10, max_rounds: 4 });
    assert.deepEqual((await timed.api.get(`${base(room)}/health`)).body.alerts, []);
    for (let i = 0; i < 2; i++) {
      await take(timed.api, room, "a", "continue", "I insist on 10.");
      await take(timed.api, room, "b", "continue", "I insist on 12!");
    }
    let health = (await timed.api.get(`${base(room)}/health`)).body;
    assert.equal(health.status, "active");
    assert.deepEqual(health.alerts.map((x: { type: string }) => x.type).sort(), ["near_max_rounds", "repeated_loop"]);
    // The monitor only reads: a turn past its claim deadline shows as stalled until the sweeper runs.
    clock.advance(10_001);
    health = (await timed.api.get(`${base(room)}/health`)).body;
    assert.ok(health.alerts.some((x: { type: string }) => x.type === "stalled_turn"), JSON.stringify(health.alerts));
    assert.equal(health.current.status, "ready");
    await sweepTurns(timed.server.svc);
    const t = await current(timed.api, room);
    assert.equal(t.agent_id, "b");
    await claim(timed.api, room, t.id, "b");
    clock.advance(10_001);
    health = (await timed.api.get(`${base(room)}/health`)).body;
    assert.ok(health.alerts.some((x: { type: string }) => x.type === "expired_lease"), JSON.stringify(health.alerts));
  });

  test("a room its owner closed stands still: no timeouts until it is reopened", async () => {
    const { uuid: room, owner_token } = await turnsRoom(timed.api, { participants: ["a", "b"], turn_timeout_s: 10 });
    const t = await current(timed.api, room);
    assert.equal((await timed.api.post(`${base(room)}/close`, {}, owner(owner_token))).status, 200);
    clock.advance(60_000);
    await sweepTurns(timed.server.svc);
    assert.equal((await timed.api.get(`${base(room)}/turns`)).body.turns.length, 1, "nothing was skipped while closed");
    assert.equal((await claim(timed.api, room, t.id, "a")).body.code, "room_closed");
    assert.equal((await timed.api.post(`${base(room)}/reopen`, {}, owner(owner_token))).status, 200);
    await sweepTurns(timed.server.svc);
    assert.equal((await current(timed.api, room)).agent_id, "b", "reopened: the overdue turn is skipped");
  });

  test("an expired room answers 410 on every turns route", async () => {
    const { uuid: room } = await turnsRoom(timed.api, { participants: ["a", "b"] });
    const t = await current(timed.api, room);
    clock.advance(73 * 3_600_000);
    for (const r of [
      await timed.api.get(`${base(room)}/turns/current`),
      await timed.api.get(`${base(room)}/turns/mine?agent_id=a`),
      await timed.api.post(`${base(room)}/turns/mine`, { agent_id: "a", claim: true }),
      await claim(timed.api, room, t.id, "a"),
      await reply(timed.api, room, t.id, "a", "x", "continue"),
      await timed.api.get(`${base(room)}/health`),
    ]) {
      assert.equal(r.status, 410);
      assert.equal(r.body.code, "room_expired");
    }
    assert.equal((await sweepTurns(timed.server.svc)).skipped, 0, "the sweeper leaves expired rooms alone");
  });
});

describe("turns: long-poll", () => {
  // A wait the reply did not wake would still end with b's turn (it is re-read after the wait),
  // so a missed wake-up fails by the test timeout, which is shorter than the wait.
  test("mine?wait holds until it is the agent's turn", { timeout: 15_000 }, async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"] });
    const idle = f.server.svc.notifier.streamCount;
    const waiting = f.api.get(`${base(room)}/turns/mine?agent_id=b&wait=30`);
    await waitUntil("b's wait being parked", () => f.server.svc.notifier.streamCount > idle);
    await take(f.api, room, "a", "continue", "over to you");
    const mine = (await waiting).body;
    assert.equal(mine.turn.agent_id, "b");
    assert.deepEqual(mine.input_messages.map((m: { text: string }) => m.text).at(-1), "over to you");
    const none = (await f.api.get(`${base(room)}/turns/mine?agent_id=a&wait=1`)).body;
    assert.equal(none.turn, null);
    assert.match(none.detail, /Not your turn yet/);
  });
});

describe("turns: my_turn with claim, one request (POST /turns/mine)", () => {
  const mine = (a: Api, room: string, body: unknown) => a.post(`${base(room)}/turns/mine`, body);
  const head = async (a: Api, room: string) => (await a.get(base(room))).body.head.size as number;

  test("a waiting claim is answered with the lease once the other agent's reply opens the turn, and the reply takes it", { timeout: 15_000 }, async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"] });
    const idle = f.server.svc.notifier.streamCount;
    const waiting = mine(f.api, room, { agent_id: "b", wait: 30, claim: true });
    await waitUntil("b's wait being parked", () => f.server.svc.notifier.streamCount > idle);
    await take(f.api, room, "a", "continue", "over to you");
    const got = await waiting;
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.equal(got.body.turn.agent_id, "b");
    assert.equal(got.body.turn.status, "claimed");
    assert.equal(typeof got.body.lease_token, "string");
    assert.equal(got.body.turn.lease_until, got.body.lease_until);
    assert.equal(got.body.input_messages.at(-1).text, "over to you");
    assert.match(got.body.detail, /^It is your turn \(\d+\)\. Round 1 of \d+\. You hold its lease until /);
    assert.doesNotMatch(got.body.detail, /Claim it/, "the detail says what is left to do");
    // The receipt is the claim's: the newest event, turn.claimed by b.
    assert.equal(got.body.receipt.seq, await head(f.api, room));
    const claimed = (await f.api.get(`${base(room)}/export`)).body.events.at(-1);
    assert.deepEqual([claimed.type, claimed.actor, claimed.seq], ["turn.claimed", "b", got.body.receipt.seq]);
    const r = await reply(f.api, room, got.body.turn.id, "b", got.body.lease_token, "continue");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.next.agent_id, "a");
    assert.equal((await verdict(f.api, room)).verdict, "CLEAN");
  });

  test("the reply that opens a waiting claim's turn claims it in its own transaction: one checkpoint for both", { timeout: 15_000 }, async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"] });
    const idle = f.server.svc.notifier.streamCount;
    const waiting = mine(f.api, room, { agent_id: "b", wait: 30, claim: true });
    await waitUntil("b's wait being parked", () => f.server.svc.notifier.streamCount > idle);
    const { replied } = await take(f.api, room, "a", "continue", "over to you");
    // The reply's answer already shows b's turn claimed, with the lease b is handed.
    assert.deepEqual([replied.next.agent_id, replied.next.status], ["b", "claimed"]);
    const got = (await waiting).body;
    assert.equal(got.turn.id, replied.next.id);
    assert.equal(got.lease_until, replied.next.lease_until);
    assert.equal(got.input_messages.at(-1).text, "over to you");
    const events = (await f.api.get(`${base(room)}/export`)).body.events as { seq: number; type: string; actor: string; checkpoint?: string }[];
    const claimEvent = events.at(-1)!;
    assert.deepEqual([claimEvent.type, claimEvent.actor, claimEvent.seq], ["turn.claimed", "b", got.receipt.seq]);
    // One transaction: the claim's receipt carries the reply's checkpoint (one per room and commit).
    assert.equal(got.receipt.checkpoint, replied.receipt.checkpoint);
    assert.equal(events.filter((e) => e.type === "turn.claimed" && e.actor === "b").length, 1, "b's wake-up claimed nothing more");
    const r = await reply(f.api, room, got.turn.id, "b", got.lease_token, "continue");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual([r.body.next.agent_id, r.body.next.status], ["a", "ready"], "nobody waited for a's next turn: it is left for a's own claim");
    const v = await verdict(f.api, room);
    assert.equal(v.verdict, "CLEAN", v.explanation);
  });

  test("no claim is made ahead for a wait without claim, one that went away, or an agent whose key is pinned", { timeout: 20_000 }, async () => {
    const parked = async (before: number) => waitUntil("the wait being parked", () => f.server.svc.notifier.streamCount > before);
    // A wait without claim: the turn is left ready.
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"] });
    let idle = f.server.svc.notifier.streamCount;
    const plain = f.api.get(`${base(room)}/turns/mine?agent_id=b&wait=30`);
    await parked(idle);
    let { replied } = await take(f.api, room, "a");
    assert.deepEqual([replied.next.agent_id, replied.next.status], ["b", "ready"]);
    assert.equal((await plain).body.lease_token, undefined);
    // A waiting claim whose caller went away: nobody to hand the lease to, so none is made.
    const b = await take(f.api, room, "b");
    assert.equal(b.replied.next.agent_id, "a");
    await take(f.api, room, "a");
    idle = f.server.svc.notifier.streamCount;
    const gone = new AbortController();
    const abandoned = fetch(`${f.url}${base(room)}/turns/mine`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ agent_id: "a", wait: 30, claim: true }), signal: gone.signal }).catch(() => "aborted");
    await parked(idle);
    gone.abort();
    assert.equal(await abandoned, "aborted");
    await waitUntil("the server dropping the wait", () => f.server.svc.notifier.streamCount === idle);
    ({ replied } = await take(f.api, room, "b"));
    assert.deepEqual([replied.next.agent_id, replied.next.status], ["a", "ready"]);

    // A pinned agent signs its claims: its unsigned waiting claim is not made for it, and is refused when it wakes.
    const { uuid: signed } = await turnsRoom(f.api, { participants: ["signer", "other"] });
    const agent = testAgent();
    const t = await current(f.api, signed);
    const c = await claim(f.api, signed, t.id, "signer", { sig: agent.signWrite(signed, "turn.claimed", "signer", { turn_id: t.id }) });
    assert.equal(c.status, 200, JSON.stringify(c.body));
    const payload = { text: "signed", turn_id: t.id, result: "continue" };
    const r = await f.api.post(`${base(signed)}/turns/${t.id}/reply`, { agent_id: "signer", lease_token: c.body.lease_token, ...payload, sig: agent.signWrite(signed, "message.posted", "signer", payload) });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    idle = f.server.svc.notifier.streamCount;
    const unsigned = mine(f.api, signed, { agent_id: "signer", wait: 30, claim: true });
    await parked(idle);
    ({ replied } = await take(f.api, signed, "other"));
    assert.deepEqual([replied.next.agent_id, replied.next.status], ["signer", "ready"]);
    const refused = await unsigned;
    assert.deepEqual([refused.status, refused.body.code], [403, "signature_required"]);
    const v = await verdict(f.api, signed);
    assert.equal(v.verdict, "CLEAN", v.explanation);
  });

  test("a reply with my_next waits for the agent's next turn and hands it over claimed: one request a turn", { timeout: 15_000 }, async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"] });
    const idle = f.server.svc.notifier.streamCount;
    const first = (await mine(f.api, room, { agent_id: "a", claim: true })).body;
    const bWaits = mine(f.api, room, { agent_id: "b", wait: 30, claim: true });
    await waitUntil("b's wait being parked", () => f.server.svc.notifier.streamCount > idle);
    const aReplies = reply2(f.api, room, first.turn.id, "a", first.lease_token, "a one", { wait: 30, claim: true });
    const b = (await bWaits).body;
    assert.deepEqual([b.turn.agent_id, b.turn.status, b.input_messages.at(-1).text], ["b", "claimed", "a one"]);
    await waitUntil("a's my_next being parked", () => f.server.svc.notifier.streamCount > idle);
    const bReplies = reply2(f.api, room, b.turn.id, "b", b.lease_token, "b one", { wait: 30, claim: true });
    const a = await aReplies;
    assert.equal(a.status, 200, JSON.stringify(a.body));
    // The reply's own answer, then a's next turn as my_turn with claim gives it.
    assert.deepEqual([a.body.turn.id, a.body.turn.status, a.body.next.id], [first.turn.id, "done", b.turn.id]);
    const next = a.body.my_next;
    assert.deepEqual([next.turn.agent_id, next.turn.status, next.turn.round, next.room_status], ["a", "claimed", 2, "active"]);
    assert.deepEqual(next.input_messages.map((m: { text: string }) => m.text), ["b one"]);
    assert.match(next.detail, /^It is your turn \(\d+\)\. Round 2 of \d+\. You hold its lease until /);
    const events = (await f.api.get(`${base(room)}/export`)).body.events as { seq: number; type: string; actor: string }[];
    assert.deepEqual([events.at(-1)!.type, events.at(-1)!.actor, events.at(-1)!.seq], ["turn.claimed", "a", next.receipt.seq]);
    // The token takes the turn; a reply without my_next answers at once, as before.
    const plain = await reply(f.api, room, next.turn.id, "a", next.lease_token, "continue", "a two");
    assert.equal(plain.status, 200, JSON.stringify(plain.body));
    assert.equal(plain.body.my_next, undefined);
    const bNext = (await bReplies).body.my_next;
    assert.deepEqual([bNext.turn.agent_id, bNext.turn.status, bNext.input_messages.at(-1).text], ["b", "claimed", "a two"]);
    // Without a wait (or claim) my_next is my_turn's answer at once: b's turn is open, a's is not.
    const now = await reply2(f.api, room, bNext.turn.id, "b", bNext.lease_token, "b two", { claim: true });
    assert.deepEqual([now.body.my_next.turn, now.body.my_next.lease_token], [null, undefined]);
    assert.match(now.body.my_next.detail, /Not your turn yet\. It is "a"'s turn/);
    const v = await verdict(f.api, room);
    assert.equal(v.verdict, "CLEAN", v.explanation);
  });

  test("my_next: wrong input writes nothing; a reply that ends the room answers it at once", { timeout: 10_000 }, async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"], max_rounds: 1 });
    const t = (await mine(f.api, room, { agent_id: "a", claim: true })).body;
    const before = await head(f.api, room);
    for (const [myNext, field] of [
      [{ wait: 31 }, "my_next.wait"],
      [{ wait: -1 }, "my_next.wait"],
      [{ wait: "30" }, "my_next.wait"],
      [{ claim: "yes" }, "my_next.claim"],
      [{ when: 1 }, "my_next"],
      ["soon", "my_next"],
    ] as const) {
      const r = await reply2(f.api, room, t.turn.id, "a", t.lease_token, "a", myNext);
      assert.deepEqual([r.status, r.body.code], [400, "validation_error"], JSON.stringify(myNext));
      assert.match(r.body.detail, new RegExp(`^${field}`), `${JSON.stringify(myNext)}: ${r.body.detail}`);
    }
    // A signed reply cannot take an unsigned claim of the next turn.
    const agent = testAgent();
    const payload = { text: "signed", turn_id: t.turn.id, result: "continue" };
    const signed = await f.api.post(`${base(room)}/turns/${t.turn.id}/reply`, {
      agent_id: "a", lease_token: t.lease_token, ...payload, sig: agent.signWrite(room, "message.posted", "a", payload), my_next: { wait: 30, claim: true },
    });
    assert.deepEqual([signed.status, signed.body.code], [400, "validation_error"]);
    assert.match(signed.body.detail, /^my_next\.claim: a signed reply cannot claim/);
    assert.equal(await head(f.api, room), before, "nothing was written");
    assert.equal((await current(f.api, room)).status, "claimed", "the turn is still a's");

    // max_rounds 1: b's reply ends the room, which answers a's waiting my_next, and b's own at once.
    const idle = f.server.svc.notifier.streamCount;
    const a = reply2(f.api, room, t.turn.id, "a", t.lease_token, "a", { wait: 30, claim: true });
    await replyParked(room, idle);
    const b = (await mine(f.api, room, { agent_id: "b", claim: true })).body;
    const bReply = await reply2(f.api, room, b.turn.id, "b", b.lease_token, "b", { wait: 30, claim: true });
    assert.deepEqual([bReply.status, bReply.body.room_status, bReply.body.my_next.room_status, bReply.body.my_next.turn], [200, "blocked", "blocked", null]);
    const aAnswer = (await a).body;
    assert.deepEqual([aAnswer.turn.status, aAnswer.my_next.room_status, aAnswer.my_next.turn, aAnswer.my_next.lease_token], ["done", "blocked", null, undefined]);
    assert.match(aAnswer.my_next.detail, /blocked \(max_rounds\)/);
  });

  test("a room deleted while a reply's my_next waits: the reply stays answered, and my_next says why no turn came", { timeout: 10_000 }, async () => {
    const { uuid: room, owner_token } = await turnsRoom(f.api, { participants: ["a", "b"] });
    const t = (await mine(f.api, room, { agent_id: "a", claim: true })).body;
    const idle = f.server.svc.notifier.streamCount;
    const a = reply2(f.api, room, t.turn.id, "a", t.lease_token, "a, then the room goes", { wait: 30, claim: true });
    await replyParked(room, idle);
    const deleted = await f.api.del(base(room), { authorization: `Bearer ${owner_token}` });
    assert.deepEqual([deleted.status, deleted.body.deleted], [200, room]);
    const answer = await a;
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.deepEqual([answer.body.turn.status, answer.body.my_next.turn, answer.body.my_next.lease_token], ["done", null, undefined]);
    assert.match(answer.body.my_next.detail, new RegExp(`^Your reply was posted \\(message ${answer.body.message_id}\\), but your next turn could not be taken: `));
    assert.equal((await f.api.get(base(room))).status, 404, "the room is gone");
  });

  test("a waiting my_next or POST /turns/mine holds a stream slot of its caller: over the cap it is refused before the reply is posted", { timeout: 15_000 }, async () => {
    await withApi({ PARLEY_MAX_STREAMS_PER_CLIENT: "1" }, async (g) => {
      const { uuid: room } = await turnsRoom(g.api, { participants: ["a", "b"] });
      const slots = () => g.server.svc.limiter.held(streamsKey("127.0.0.1"));
      const t = (await mine(g.api, room, { agent_id: "a", claim: true })).body;
      const bWaits = mine(g.api, room, { agent_id: "b", wait: 30, claim: true });
      await waitUntil("b's wait holding the slot", () => slots() === 1);
      const before = await head(g.api, room);
      const refused = await reply2(g.api, room, t.turn.id, "a", t.lease_token, "a", { wait: 30, claim: true });
      assert.deepEqual([refused.status, refused.body.code], [429, "rate_limited"]);
      assert.equal(await head(g.api, room), before, "the reply was not posted");
      assert.deepEqual([(await mine(g.api, room, { agent_id: "a", wait: 5 })).status], [429], "nor may a second wait start");
      // Without a wait it needs no slot; b's wait answers and gives its slot back.
      const r = await reply2(g.api, room, t.turn.id, "a", t.lease_token, "a", { claim: true });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal((await bWaits).body.turn.status, "claimed");
      await waitUntil("the slot being released", () => slots() === 0);
    });
  });

  test("wrong input, the wrong agent and a turn not yet open write nothing; a live re-claim gives the same token; without claim it is GET's answer", async () => {
    const { uuid: room } = await turnsRoom(f.api, { participants: ["a", "b"] });
    const before = await head(f.api, room);
    for (const [body, field] of [
      [{ agent_id: "a", wait: 31, claim: true }, "wait"],
      [{ agent_id: "a", wait: -1, claim: true }, "wait"],
      [{ agent_id: "a", wait: 1.5, claim: true }, "wait"],
      [{ agent_id: "a", wait: "5", claim: true }, "wait"],
      [{ agent_id: "a", claim: "yes" }, "claim"],
      [{ agent_id: "a", claim: 1 }, "claim"],
      [{ wait: 0, claim: true }, "agent_id"],
      [{ agent_id: "", claim: true }, "agent_id"],
      [{ agent_id: 7, claim: true }, "agent_id"],
      [{ agent_id: "a", claim: true, sig: "x" }, "sig"],
    ] as const) {
      const r = await mine(f.api, room, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, "validation_error");
      assert.match(r.body.detail, new RegExp(`^${field}`), `${JSON.stringify(body)}: ${r.body.detail}`);
    }
    assert.equal((await mine(f.api, room, "{not json")).body.code, "invalid_json");
    const stranger = await mine(f.api, room, { agent_id: "zed", claim: true });
    assert.deepEqual([stranger.status, stranger.body.code], [403, "not_participant"]);
    const unknown = await mine(f.api, crypto.randomUUID(), { agent_id: "a", claim: true });
    assert.deepEqual([unknown.status, unknown.body.code], [404, "room_not_found"]);
    const notYet = await mine(f.api, room, { agent_id: "b", claim: true });
    assert.equal(notYet.status, 200);
    assert.equal(notYet.body.turn, null);
    assert.equal(notYet.body.lease_token, undefined, "nothing claimed");
    assert.match(notYet.body.detail, /Not your turn yet/);
    assert.equal(await head(f.api, room), before, "nothing was written");

    // Without claim (or claim false) it is my_turn's answer, as GET gives it.
    const viaGet = (await f.api.get(`${base(room)}/turns/mine?agent_id=a`)).body;
    assert.deepEqual((await mine(f.api, room, { agent_id: "a" })).body, viaGet);
    assert.deepEqual((await mine(f.api, room, { agent_id: "a", claim: false, wait: 0 })).body, viaGet);
    assert.equal(await head(f.api, room), before);

    // The longest wait is accepted; the turn is open, so the answer is at once, claimed.
    const first = await mine(f.api, room, { agent_id: "a", wait: 30, claim: true });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(await head(f.api, room), before + 1, "one event: the claim");
    const again = await mine(f.api, room, { agent_id: "a", claim: true });
    assert.equal(again.body.lease_token, first.body.lease_token, "a live re-claim returns the same token");
    assert.equal(again.body.receipt, null, "and writes nothing");
    assert.equal(await head(f.api, room), before + 1);
    // Concurrent claims of one open turn: one lease.
    await reply(f.api, room, first.body.turn.id, "a", first.body.lease_token, "continue");
    const race = await Promise.all(Array.from({ length: 8 }, () => mine(f.api, room, { agent_id: "b", claim: true })));
    assert.deepEqual(race.map((r) => r.status), Array(8).fill(200));
    assert.equal(new Set(race.map((r) => r.body.lease_token)).size, 1);
    const events = (await f.api.get(`${base(room)}/export`)).body.events as { type: string; actor: string }[];
    assert.equal(events.filter((e) => e.type === "turn.claimed" && e.actor === "b").length, 1);
  });
});
