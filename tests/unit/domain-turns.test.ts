// Table tests of a turns room's chat rule: a participant may post only in its claimed, unexpired turn.
import { test } from "node:test";
import assert from "node:assert/strict";
import { newTurnsRoom, postRefusal, type Turn, type TurnsConfig, type TurnsRoom } from "../../lib/domain/turns";

const T0 = Date.parse("2026-11-30T10:00:00.000Z");
const at = (s: number) => new Date(T0 + s * 1000).toISOString();
const NOW = at(100);

// ---- fixtures ----

function room(participants = ["Alice", "bob", "carol"], over: (r: TurnsRoom) => void = () => {}): TurnsRoom {
  const config: TurnsConfig = { participants, max_rounds: 10, turn_timeout_s: 60, delay_s: 0, policy: "consensus", supervisor: null, absent_after: 2 };
  const r = newTurnsRoom(config, at(0));
  over(r);
  return r;
}
/** The open turn of `agent_id`, claimed with a lease until `leaseS` seconds after T0 (null: not claimed). */
function turn(agent_id: string, leaseS: number | null, over: Partial<Turn> = {}): Turn {
  return {
    id: 7, round: 1, slot: 0, agent_id, phase: "dialogue", status: leaseS === null ? "ready" : "claimed", available_at: at(50), claim_by: at(110),
    lease_until: leaseS === null ? null : at(leaseS), result: null, reason: null, message_id: null, opened_at: at(50), closed_at: null, ...over,
  };
}

interface PostCase {
  name: string;
  room?: TurnsRoom;
  current: Turn | undefined;
  agent: string;
  now?: string;
  expect: "not_participant" | "not_your_turn" | null;
}

const cases: PostCase[] = [
  { name: "the holder of the claimed, unexpired turn", current: turn("Alice", 160), agent: "Alice", expect: null },
  { name: "the holder, named in another case", current: turn("Alice", 160), agent: "ALICE", expect: null },
  { name: "the holder, with spaces around the name", current: turn("Alice", 160), agent: " alice ", expect: null },
  { name: "the holder, whose turn names it in another case", current: turn("alice", 160), agent: "Alice", expect: null },
  { name: "the holder, a millisecond before the lease ends", current: turn("Alice", 160), agent: "Alice", now: new Date(T0 + 159_999).toISOString(), expect: null },
  { name: "the holder when the lease ends", current: turn("Alice", 160), agent: "Alice", now: at(160), expect: "not_your_turn" },
  { name: "the holder after the lease ran out", current: turn("Alice", 90), agent: "Alice", expect: "not_your_turn" },
  { name: "its turn is ready but not claimed", current: turn("Alice", null), agent: "Alice", expect: "not_your_turn" },
  { name: "a claimed turn without a lease", current: turn("Alice", null, { status: "claimed" }), agent: "Alice", expect: "not_your_turn" },
  { name: "its turn is done", current: turn("Alice", 160, { status: "done", result: "continue" }), agent: "Alice", expect: "not_your_turn" },
  { name: "its turn was skipped", current: turn("Alice", 160, { status: "skipped", reason: "timeout" }), agent: "Alice", expect: "not_your_turn" },
  { name: "its turn was cancelled", current: turn("Alice", 160, { status: "cancelled" }), agent: "Alice", expect: "not_your_turn" },
  { name: "another participant's claimed turn", current: turn("bob", 160), agent: "Alice", expect: "not_your_turn" },
  { name: "another participant, while the holder's turn runs", current: turn("Alice", 160), agent: "carol", expect: "not_your_turn" },
  { name: "a participant when there is no open turn", current: undefined, agent: "bob", expect: "not_your_turn" },
  { name: "a participant of a completed room", room: room(undefined, (r) => { r.status = "completed"; }), current: undefined, agent: "bob", expect: "not_your_turn" },
  { name: "an absent participant is still a participant", room: room(undefined, (r) => { r.participants[1]!.status = "absent"; }), current: turn("Alice", 160), agent: "bob", expect: "not_your_turn" },
  { name: "someone not listed", current: turn("Alice", 160), agent: "dave", expect: "not_participant" },
  { name: "someone not listed, with no open turn", current: undefined, agent: "dave", expect: "not_participant" },
  { name: "someone not listed, even holding a turn with its name", current: turn("dave", 160), agent: "dave", expect: "not_participant" },
  { name: "a name that only contains a participant's", current: turn("Alice", 160), agent: "Alice2", expect: "not_participant" },
  { name: "the service's own names are not participants", current: turn("Alice", 160), agent: "server", expect: "not_participant" },
];

for (const c of cases) {
  test(`postRefusal: ${c.name} → ${c.expect ?? "may post"}`, () => {
    assert.equal(postRefusal(c.room ?? room(), c.current, c.agent, c.now ?? NOW), c.expect);
  });
}
