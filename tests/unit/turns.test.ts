import { describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  applyTurnEvent, healthAlerts, planAfterTurn, planKickoff, planResume, resumeRefusal, speakingOrder, type Outcome, type Step, type TurnsConfig,
  type TurnsProjection,
} from "../../lib/domain/turns";

const T0 = "2026-11-30T10:00:00.000Z";
const config = (over: Partial<TurnsConfig> = {}): TurnsConfig => ({
  participants: ["a", "b", "c"], max_rounds: 10, turn_timeout_s: 60, delay_s: 0, policy: "consensus", supervisor: null, absent_after: 2, ...over,
});

/** A room driven through the reducer: steps are applied as the service would append them. */
function room(over: Partial<TurnsConfig> = {}) {
  let seq = 1;
  const proj: TurnsProjection = { room: null, turns: [] };
  const apply = (steps: Step[]) => {
    for (const s of steps) applyTurnEvent(proj, { seq: ++seq, ts: T0, type: s.type, actor: "server", payload: s.payload, server: s.server ?? {} });
    return steps.map((s) => s.type);
  };
  applyTurnEvent(proj, { seq: 1, ts: T0, type: "room.created", actor: "server", payload: { turns: config(over) }, server: {} });
  apply(planKickoff(proj, T0));
  const open = () => proj.turns.find((t) => t.id === proj.room!.current)!;
  return {
    proj,
    open,
    /** Ends the open turn; returns the types of the events that follow. */
    end(outcome: Outcome | "continue" | "pass" | "complete" | "blocked" | "timeout" | "supervisor") {
      const o: Outcome = typeof outcome !== "string" ? outcome
        : outcome === "timeout" || outcome === "supervisor" ? { kind: "skip", reason: outcome }
          : { kind: "reply", result: outcome, text: `said ${outcome}`, message_id: ++seq };
      return apply(planAfterTurn(proj, open(), o, T0));
    },
    who: () => (proj.room!.current === null ? null : `${open().agent_id}:${open().phase}:${open().round}`),
    resume: () => apply(planResume(proj, T0)),
  };
}

describe("turns domain", () => {
  test("speaking order rotates to the first speaker", () => {
    assert.deepEqual(speakingOrder(["a", "b", "c"], "b"), ["b", "c", "a"]);
    assert.deepEqual(speakingOrder(["a", "b", "c"]), ["a", "b", "c"]);
  });

  test("rotation: continue and pass go to the next participant; the round advances after the last slot; past max_rounds the room blocks", () => {
    const r = room({ max_rounds: 2 });
    assert.equal(r.who(), "a:dialogue:1");
    r.end("continue");
    r.end("pass");
    assert.equal(r.who(), "c:dialogue:1");
    r.end("continue");
    assert.equal(r.who(), "a:dialogue:2");
    r.end("continue");
    r.end("continue");
    assert.deepEqual(r.end("continue"), ["turn.done", "room.blocked"]);
    assert.equal(r.proj.room!.status, "blocked");
    assert.equal(r.proj.room!.reason, "max_rounds");
    assert.equal(r.who(), null);
  });

  test("consensus: every other active participant confirms in order after the proposer; a rejection resumes after the rejecter", () => {
    const r = room();
    r.end("continue");
    assert.deepEqual(r.end("complete"), ["turn.done", "completion.proposed", "turn.opened"]);
    assert.deepEqual(r.proj.room!.proposal!.pending, ["c", "a"]);
    assert.equal(r.who(), "c:confirm:1");
    r.end("complete");
    assert.equal(r.who(), "a:confirm:1");
    assert.deepEqual(r.end("continue"), ["turn.done", "completion.rejected", "turn.opened"]);
    assert.equal(r.proj.room!.proposal, null);
    assert.equal(r.who(), "b:dialogue:1", "after a (slot 0) comes b in the same round");
    r.end("complete");
    r.end("complete");
    assert.deepEqual(r.end("complete"), ["turn.done", "completion.confirmed", "room.completed"]);
    assert.equal(r.proj.room!.status, "completed");
  });

  test("a confirm turn that times out is asked again last; one who goes absent is no longer asked", () => {
    const r = room({ absent_after: 2 });
    r.end("complete"); // a proposes: b, c confirm
    assert.equal(r.who(), "b:confirm:1");
    r.end("timeout");
    assert.deepEqual(r.proj.room!.proposal!.pending, ["c", "b"]);
    assert.equal(r.who(), "c:confirm:1");
    r.end("complete");
    assert.equal(r.who(), "b:confirm:1");
    assert.deepEqual(r.end("timeout"), ["turn.skipped", "participant.absent", "room.completed"], "b is absent: a and c agreed");
  });

  test("timeouts: absent after absent_after in a row (a reply resets the count); fewer than 2 active blocks", () => {
    const r = room({ absent_after: 2 });
    r.end("timeout"); // a: 1
    r.end("continue"); // b
    r.end("continue"); // c
    assert.deepEqual(r.end("timeout"), ["turn.skipped", "participant.absent", "turn.opened"]);
    assert.equal(r.proj.room!.participants[0]!.status, "absent");
    assert.equal(r.who(), "b:dialogue:2");
    r.end("timeout"); // b: 1
    r.end("continue"); // c resets nothing of b
    assert.equal(r.who(), "b:dialogue:3", "absent a is skipped in the rotation");
    r.end("continue"); // b replies: its count resets
    assert.equal(r.proj.room!.participants[1]!.timeouts, 0);
    r.end("timeout"); // c: 1
    r.end("timeout"); // b: 1
    assert.deepEqual(r.end("timeout"), ["turn.skipped", "participant.absent", "room.blocked"]);
    assert.equal(r.proj.room!.reason, "not_enough_participants");
    assert.match(resumeRefusal(r.proj.room!)!, /reinstate/);
  });

  test("supervisor: its complete ends the room at once; others' complete asks only it; a supervisor's skip is not a timeout", () => {
    const r = room({ policy: "supervisor", supervisor: "b" });
    r.end("complete");
    assert.deepEqual(r.proj.room!.proposal!.pending, ["b"]);
    assert.equal(r.who(), "b:confirm:1");
    r.end("continue");
    assert.equal(r.who(), "c:dialogue:1");
    r.end("supervisor");
    assert.equal(r.proj.room!.participants[2]!.timeouts, 0);
    assert.equal(r.who(), "a:dialogue:2");
    r.end("continue");
    assert.deepEqual(r.end("complete"), ["turn.done", "room.completed"]);
  });

  test("a supervisor who went absent: proposals fall back to the other participants", () => {
    const r = room({ policy: "supervisor", supervisor: "a", absent_after: 1 });
    r.end("timeout"); // a absent
    assert.equal(r.proj.room!.participants[0]!.status, "absent");
    r.end("complete"); // b proposes
    assert.deepEqual(r.proj.room!.proposal!.pending, ["c"]);
  });

  test("blocked result blocks with the text; resume continues after the last speaker", () => {
    const r = room();
    r.end("continue");
    assert.deepEqual(r.end({ kind: "reply", result: "blocked", text: "need a human", message_id: 99 }), ["turn.done", "room.blocked"]);
    assert.equal(r.proj.room!.reason, "need a human");
    assert.equal(resumeRefusal(r.proj.room!), null);
    assert.deepEqual(r.resume(), ["room.resumed", "turn.opened"]);
    assert.equal(r.who(), "c:dialogue:1");
  });

  test("delay_s: the next turn opens later and its claim window starts then", () => {
    const r = room({ delay_s: 30, turn_timeout_s: 60 });
    r.end("continue");
    assert.equal(r.open().available_at, "2026-11-30T10:00:30.000Z");
    assert.equal(r.open().claim_by, "2026-11-30T10:01:30.000Z");
  });

  test("health: loops need the same texts alternating between two agents", () => {
    const r = room();
    const replies = (texts: [string, string][]) => texts.map(([agent_id, text]) => ({ agent_id, text }));
    const loop = replies([["a", "Ten!"], ["b", "twelve"], ["a", "ten"], ["b", "Twelve."]]);
    assert.deepEqual(healthAlerts(r.proj.room!, r.open(), loop, T0).map((x) => x.type), ["repeated_loop"]);
    const moving = replies([["a", "ten"], ["b", "twelve"], ["a", "eleven"], ["b", "twelve"]]);
    assert.deepEqual(healthAlerts(r.proj.room!, r.open(), moving, T0), []);
    const three = replies([["a", "x"], ["b", "x"], ["c", "x"], ["b", "x"]]);
    assert.deepEqual(healthAlerts(r.proj.room!, r.open(), three, T0), []);
  });
});
