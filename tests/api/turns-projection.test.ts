import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { applyTurnEvent, cloneProjection, planAfterTurn, planKickoff, turnsTouchedBy, type TurnsProjection } from "../../lib/domain/turns";

// The copies the turns service works on (the kept state is shared between requests, so a write
// must never change what it was handed) and the turns each event's projection write covers.

const T0 = "2026-12-01T10:00:00.000Z";
const config = { participants: ["a", "b", "c"], max_rounds: 3, turn_timeout_s: 60, delay_s: 0, policy: "consensus" as const, supervisor: null, absent_after: 2 };

/** A room with its first turn open and claimed, and a completion proposal pending. */
function projection(): TurnsProjection {
  const proj: TurnsProjection = { room: null, turns: [] };
  applyTurnEvent(proj, { seq: 1, ts: T0, type: "room.created", actor: "owner", payload: { turns: config }, server: {} });
  let seq = 2;
  for (const step of planKickoff(proj, T0)) applyTurnEvent(proj, { seq: seq++, ts: T0, type: step.type, actor: "server", payload: step.payload, server: step.server ?? {} });
  applyTurnEvent(proj, { seq: seq++, ts: T0, type: "turn.claimed", actor: "a", payload: { turn_id: 2 }, server: { lease_until: "2026-12-01T10:01:00.000Z", lease_hash: "00" } });
  applyTurnEvent(proj, { seq: seq++, ts: T0, type: "completion.proposed", actor: "server", payload: { by: "a", turn_id: 2, pending: ["b", "c"] }, server: {} });
  return proj;
}

describe("turns: projection copies", () => {
  test("a copy equals the projection and shares nothing the reducer changes", () => {
    const proj = projection();
    const before = structuredClone(proj);
    const copy = cloneProjection(proj);
    assert.deepEqual(copy, proj);
    copy.room!.round = 9;
    copy.room!.current = null;
    copy.room!.participants[0]!.timeouts = 5;
    copy.room!.config.participants.push("z");
    copy.room!.proposal!.pending.pop();
    copy.room!.proposal!.confirmed.push("b");
    copy.turns[0]!.status = "done";
    assert.deepEqual(proj, before, "the original is unchanged");
    assert.deepEqual(cloneProjection({ room: null, turns: [] }), { room: null, turns: [] });
  });

  test("planning after a turn leaves the projection it was given as it was", () => {
    const proj = projection();
    const before = structuredClone(proj);
    const steps = planAfterTurn(proj, proj.turns[0]!, { kind: "reply", result: "continue", text: "go on", message_id: 5 }, T0);
    assert.deepEqual(steps.map((s) => s.type), ["turn.done", "turn.opened"]);
    assert.deepEqual(proj, before);
  });

  test("the turns an event touches: the one it names, every open one on cancel, none otherwise", () => {
    const proj = projection();
    const [open] = proj.turns;
    const closed = { ...open!, id: 1, status: "done" as const };
    const turns = [closed, open!];
    assert.deepEqual(turnsTouchedBy({ type: "turn.done", payload: { turn_id: 2 } }, turns), [open]);
    assert.deepEqual(turnsTouchedBy({ type: "turn.skipped", payload: { turn_id: 1 } }, turns), [closed]);
    assert.deepEqual(turnsTouchedBy({ type: "room.cancelled", payload: {} }, turns), [open]);
    assert.deepEqual(turnsTouchedBy({ type: "turn.opened", payload: { round: 1 } }, turns), []);
    assert.deepEqual(turnsTouchedBy({ type: "room.blocked", payload: { reason: "max_rounds" } }, turns), []);
    assert.deepEqual(turnsTouchedBy({ type: "turn.done", payload: { turn_id: "2" } }, turns), [], "an id that is not a number names no turn");
  });
});
