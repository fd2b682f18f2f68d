// Table tests of the ledger's status rules (SPEC 5.1): decideRevision before a write, applyLedgerEvent
// over the appended events.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  applyLedgerEvent, contextHash, decideRevision, emptyLedger, sealOf, type Author, type Ledger, type RevisionKind, type Thread, type ThreadStatus,
} from "../../lib/domain/ledger";
import { ZERO_HASH_HEX, type EventSig, type LogEvent } from "../../lib/log/event";

const T0 = Date.parse("2026-11-30T10:00:00.000Z");
const at = (s: number) => new Date(T0 + s * 1000).toISOString();
const KEY_A = "a".repeat(64);
const KEY_B = "b".repeat(64);

// ---- fixtures ----

/** A thread opened by "Alice", proposed, with the confirmations given. */
function thread(over: Partial<Thread> = {}): Thread {
  const revision = {
    id: 1, thread_id: 1, kind: "propose" as const, value: "v1", author_agent_id: "Alice", auth: "anon" as const, via: "api" as const,
    source_msg_id: null, quote: null, created_at: at(1), seq: 1,
  };
  return {
    id: 1, subject: "Deadline", subject_key: "deadline", current_value: "v1", status: "proposed", opened_by: "Alice", opened_by_auth: "anon",
    revisions_count: 1, last_revision: revision, confirmations: [], created_at: at(1), updated_at: at(1), ...over,
  };
}
const confirmed = (...agents: string[]) => agents.map((agent_id) => ({ agent_id, auth: "anon" as const }));
const author = (agent_id: string, pubkey_hex: string | null = null): Author => ({ agent_id, auth: pubkey_hex ? "signed" : "anon", pubkey_hex });

function event(seq: number, type: string, actor: string, payload: Record<string, unknown>, more: { server?: Record<string, unknown>; sig?: EventSig } = {}): LogEvent {
  return { v: 1, room: "room-1", seq, ts: at(seq), type, actor, payload, server: more.server ?? {}, prev: ZERO_HASH_HEX, ...(more.sig ? { sig: more.sig } : {}) };
}
const v1Sig = (pubkey_hex: string, n: number): EventSig => ({ alg: "ed25519-jcs-v1", pubkey_hex, signature_hex: "c".repeat(128), ts: at(n), nonce: `nonce-${n}` });

// ---- decideRevision: every row of the status table ----

type Expected = { ok: true; effect: "apply" | "none" } | { code: "not_owner" | "owner_cannot_confirm" | "thread_cancelled" };
interface DecideCase {
  name: string;
  thread?: Partial<Thread>;
  /** The key the opener signed with (the owner is then the key). */
  openerKey?: string;
  kind: Exclude<RevisionKind, "propose">;
  by: Author;
  expect: Expected;
}
const apply: Expected = { ok: true, effect: "apply" };
const none: Expected = { ok: true, effect: "none" };

const decideCases: DecideCase[] = [
  // update: owner only, from any live status
  { name: "update by the owner", kind: "update", by: author("Alice"), expect: apply },
  { name: "update by the owner, another case", kind: "update", by: author("ALICE"), expect: apply },
  { name: "update by the owner, spaces around the name", kind: "update", by: author("  alice "), expect: apply },
  { name: "update by the owner of an agreed thread", thread: { status: "agreed", confirmations: confirmed("bob", "carol") }, kind: "update", by: author("Alice"), expect: apply },
  { name: "update by the owner of a disputed thread", thread: { status: "disputed" }, kind: "update", by: author("Alice"), expect: apply },
  { name: "update by a non-owner", kind: "update", by: author("bob"), expect: { code: "not_owner" } },
  { name: "update by a non-owner who confirmed", thread: { confirmations: confirmed("bob") }, kind: "update", by: author("bob"), expect: { code: "not_owner" } },
  { name: "update by a name that only contains the owner's", kind: "update", by: author("Alice2"), expect: { code: "not_owner" } },
  // retract: owner only
  { name: "retract by the owner", kind: "retract", by: author("Alice"), expect: apply },
  { name: "retract by the owner, lower case", kind: "retract", by: author("alice"), expect: apply },
  { name: "retract by the owner of an agreed thread", thread: { status: "agreed", confirmations: confirmed("bob", "carol") }, kind: "retract", by: author("Alice"), expect: apply },
  { name: "retract by a non-owner", kind: "retract", by: author("bob"), expect: { code: "not_owner" } },
  // confirm: not the owner; distinct confirmers, a repeat changes nothing
  { name: "confirm by the owner", kind: "confirm", by: author("Alice"), expect: { code: "owner_cannot_confirm" } },
  { name: "confirm by the owner, mixed case", kind: "confirm", by: author("aLiCe"), expect: { code: "owner_cannot_confirm" } },
  { name: "confirm by another agent", kind: "confirm", by: author("bob"), expect: apply },
  { name: "confirm by a second agent", thread: { confirmations: confirmed("bob") }, kind: "confirm", by: author("carol"), expect: apply },
  { name: "repeat confirm by the same agent", thread: { confirmations: confirmed("bob") }, kind: "confirm", by: author("bob"), expect: none },
  { name: "repeat confirm under another case of the name", thread: { confirmations: confirmed("bob") }, kind: "confirm", by: author("BOB"), expect: none },
  { name: "repeat confirm on an agreed thread", thread: { status: "agreed", confirmations: confirmed("bob", "carol") }, kind: "confirm", by: author("Carol"), expect: none },
  { name: "confirm of a disputed thread (its confirmations were cleared)", thread: { status: "disputed" }, kind: "confirm", by: author("bob"), expect: apply },
  // contradict: not the owner
  { name: "contradict by the owner", kind: "contradict", by: author("Alice"), expect: { code: "owner_cannot_confirm" } },
  { name: "contradict by the owner, upper case", thread: { status: "agreed", confirmations: confirmed("bob", "carol") }, kind: "contradict", by: author("ALICE"), expect: { code: "owner_cannot_confirm" } },
  { name: "contradict of an agreed thread by another agent", thread: { status: "agreed", confirmations: confirmed("bob", "carol") }, kind: "contradict", by: author("dave"), expect: apply },
  { name: "contradict by an agent who confirmed (not a repeat)", thread: { confirmations: confirmed("bob") }, kind: "contradict", by: author("bob"), expect: apply },
  { name: "contradict of a proposed thread", kind: "contradict", by: author("bob"), expect: apply },
  // a cancelled thread takes nothing, whoever asks (checked before ownership)
  ...(["update", "retract", "confirm", "contradict"] as const).flatMap((kind): DecideCase[] => [
    { name: `${kind} by the owner on a cancelled thread`, thread: { status: "cancelled" }, kind, by: author("Alice"), expect: { code: "thread_cancelled" } },
    { name: `${kind} by a non-owner on a cancelled thread`, thread: { status: "cancelled" }, kind, by: author("bob"), expect: { code: "thread_cancelled" } },
  ]),
  { name: "repeat confirm on a cancelled thread", thread: { status: "cancelled", confirmations: confirmed("bob") }, kind: "confirm", by: author("bob"), expect: { code: "thread_cancelled" } },
  // a signed opener: the owner is the key
  { name: "signed owner: update with the opener's key", openerKey: KEY_A, kind: "update", by: author("Alice", KEY_A), expect: apply },
  { name: "signed owner: update by the opener's name with another key", openerKey: KEY_A, kind: "update", by: author("Alice", KEY_B), expect: { code: "not_owner" } },
  { name: "signed owner: update by the opener's name unsigned", openerKey: KEY_A, kind: "update", by: author("Alice"), expect: { code: "not_owner" } },
  { name: "signed owner: retract by the opener's name with another key", openerKey: KEY_A, kind: "retract", by: author("alice", KEY_B), expect: { code: "not_owner" } },
  { name: "signed owner: retract with the opener's key", openerKey: KEY_A, kind: "retract", by: author("ALICE", KEY_A), expect: apply },
  { name: "signed owner: the key owns the thread under another name", openerKey: KEY_A, kind: "update", by: author("alice-laptop", KEY_A), expect: apply },
  { name: "signed owner: confirm with the opener's key", openerKey: KEY_A, kind: "confirm", by: author("Alice", KEY_A), expect: { code: "owner_cannot_confirm" } },
  { name: "signed owner: confirm with the opener's key under another name", openerKey: KEY_A, kind: "confirm", by: author("bob", KEY_A), expect: { code: "owner_cannot_confirm" } },
  { name: "signed owner: contradict with the opener's key", openerKey: KEY_A, kind: "contradict", by: author("Alice", KEY_A), expect: { code: "owner_cannot_confirm" } },
  { name: "signed owner: confirm by another agent's key", openerKey: KEY_A, kind: "confirm", by: author("bob", KEY_B), expect: apply },
  // Literally SPEC 5.1 ("with a pinned key, the key"): the opener's name without its key is not the
  // owner. The service never gets here: a pinned name's unsigned write is signature_required.
  { name: "signed owner: the opener's name without the key is not the owner", openerKey: KEY_A, kind: "confirm", by: author("Alice"), expect: apply },
];

for (const c of decideCases) {
  test(`decideRevision: ${c.name}`, () => {
    const d = decideRevision(thread(c.thread), c.openerKey ?? null, c.kind, c.by);
    if ("code" in c.expect) {
      assert.equal(d.ok, false, `expected ${c.expect.code}, got ${JSON.stringify(d)}`);
      if (!d.ok) {
        assert.equal(d.code, c.expect.code);
        assert.ok(d.detail.length > 0, "a refusal says why");
      }
    } else assert.deepEqual(d, c.expect);
  });
}

test("decideRevision does not change the thread it judges", () => {
  const t = thread({ confirmations: confirmed("bob") });
  const before = structuredClone(t);
  for (const c of decideCases) decideRevision(t, c.openerKey ?? null, c.kind, c.by);
  assert.deepEqual(t, before);
});

// ---- applyLedgerEvent: a thread through its revisions ----

/** A revision as [agent, kind, value?]. */
type Step = [string, Exclude<RevisionKind, "propose">, string?];
interface ApplyCase {
  name: string;
  quorum?: number;
  steps: Step[];
  expect: { status: ThreadStatus; confirmers: string[]; value?: string };
}

const AGREE: Step[] = [["bob", "confirm"], ["carol", "confirm"]];
const DISPUTE: Step[] = [...AGREE, ["dave", "contradict", "v0"]];

const applyCases: ApplyCase[] = [
  { name: "propose opens the thread, proposed", steps: [], expect: { status: "proposed", confirmers: [], value: "v1" } },
  { name: "one confirmation is not a quorum of 2", steps: [["bob", "confirm"]], expect: { status: "proposed", confirmers: ["bob"] } },
  { name: "two distinct confirmers: agreed at quorum 2", steps: AGREE, expect: { status: "agreed", confirmers: ["bob", "carol"] } },
  { name: "a repeat confirmation does not count", steps: [["bob", "confirm"], ["bob", "confirm"]], expect: { status: "proposed", confirmers: ["bob"] } },
  { name: "a repeat under another case does not count", steps: [["bob", "confirm"], ["BOB", "confirm"], [" Bob ", "confirm"]], expect: { status: "proposed", confirmers: ["bob"] } },
  { name: "a third confirmer keeps an agreed thread agreed", steps: [...AGREE, ["dave", "confirm"]], expect: { status: "agreed", confirmers: ["bob", "carol", "dave"] } },
  { name: "quorum 3: two confirmers are not enough", quorum: 3, steps: AGREE, expect: { status: "proposed", confirmers: ["bob", "carol"] } },
  { name: "quorum 3: three distinct confirmers agree", quorum: 3, steps: [...AGREE, ["dave", "confirm"]], expect: { status: "agreed", confirmers: ["bob", "carol", "dave"] } },
  { name: "quorum 3: a repeat is not the third", quorum: 3, steps: [...AGREE, ["Carol", "confirm"]], expect: { status: "proposed", confirmers: ["bob", "carol"] } },
  { name: "update resets the confirmations and sets the value", steps: [["bob", "confirm"], ["Alice", "update", "v2"]], expect: { status: "proposed", confirmers: [], value: "v2" } },
  { name: "update of an agreed thread: back to proposed, confirmations reset", steps: [...AGREE, ["Alice", "update", "v2"]], expect: { status: "proposed", confirmers: [], value: "v2" } },
  { name: "only confirmations since the last value change count", steps: [...AGREE, ["Alice", "update", "v2"], ["bob", "confirm"]], expect: { status: "proposed", confirmers: ["bob"], value: "v2" } },
  { name: "the new value agrees with a fresh quorum", steps: [...AGREE, ["Alice", "update", "v2"], ...AGREE], expect: { status: "agreed", confirmers: ["bob", "carol"], value: "v2" } },
  { name: "update without a value keeps the value, still resets", steps: [["bob", "confirm"], ["Alice", "update"]], expect: { status: "proposed", confirmers: [], value: "v1" } },
  { name: "contradict of an agreed thread: disputed, confirmations cleared, value kept", steps: DISPUTE, expect: { status: "disputed", confirmers: [], value: "v1" } },
  { name: "a disputed thread needs a fresh quorum: one is not enough", steps: [...DISPUTE, ["bob", "confirm"]], expect: { status: "disputed", confirmers: ["bob"] } },
  { name: "a disputed thread agrees again with a fresh quorum", steps: [...DISPUTE, ...AGREE], expect: { status: "agreed", confirmers: ["bob", "carol"] } },
  { name: "update of a disputed thread: proposed", steps: [...DISPUTE, ["Alice", "update", "v3"]], expect: { status: "proposed", confirmers: [], value: "v3" } },
  { name: "contradict of a proposed thread withdraws that agent's confirmation only", steps: [["bob", "confirm"], ["carol", "contradict"]], expect: { status: "proposed", confirmers: ["bob"] } },
  { name: "contradict by a confirmer of a proposed thread withdraws it", steps: [["bob", "confirm"], ["BOB", "contradict"]], expect: { status: "proposed", confirmers: [] } },
  { name: "quorum 3: a withdrawn confirmation no longer counts toward the quorum", quorum: 3, steps: [...AGREE, ["bob", "contradict"], ["dave", "confirm"]], expect: { status: "proposed", confirmers: ["carol", "dave"] } },
  { name: "a withdrawn confirmation can be given again", steps: [["bob", "confirm"], ["bob", "contradict"], ["bob", "confirm"], ["carol", "confirm"]], expect: { status: "agreed", confirmers: ["bob", "carol"] } },
  { name: "retract: cancelled", steps: [["Alice", "retract"]], expect: { status: "cancelled", confirmers: [] } },
  { name: "retract of an agreed thread: cancelled", steps: [...AGREE, ["Alice", "retract"]], expect: { status: "cancelled", confirmers: ["bob", "carol"] } },
];

/** A ledger with "Alice"'s thread (seq 1, value v1) and the steps after it, at seq 2, 3, … */
function replay(steps: Step[], quorum?: number): Ledger {
  const ledger = emptyLedger();
  applyLedgerEvent(ledger, event(1, "thread.opened", "Alice", { subject: "Launch date", value: "v1" }), quorum);
  steps.forEach(([agent, kind, value], i) => {
    applyLedgerEvent(ledger, event(i + 2, "thread.revised", agent, { thread_id: 1, kind, ...(value === undefined ? {} : { value }) }), quorum);
  });
  return ledger;
}

for (const c of applyCases) {
  test(`applyLedgerEvent: ${c.name}`, () => {
    const ledger = replay(c.steps, c.quorum);
    const t = ledger.threads[0]!;
    assert.equal(ledger.threads.length, 1);
    assert.equal(t.status, c.expect.status);
    assert.deepEqual(t.confirmations.map((x) => x.agent_id.trim().toLowerCase()), c.expect.confirmers);
    if (c.expect.value !== undefined) assert.equal(t.current_value, c.expect.value);
    assert.equal(t.revisions_count, 1 + c.steps.length, "every revision is counted");
    assert.equal(ledger.revisions.length, 1 + c.steps.length);
    assert.equal(t.last_revision.kind, c.steps.at(-1)?.[1] ?? "propose");
    assert.equal(t.updated_at, at(1 + c.steps.length));
  });
}

test("applyLedgerEvent: propose records the thread, its opener and its first revision", () => {
  const ledger = emptyLedger();
  applyLedgerEvent(ledger, event(7, "thread.opened", "Alice", { subject: "Launch Date (UTC)", value: "Dec 1", source_msg_id: 3, quote: "let's ship Dec 1" }));
  const t = ledger.threads[0]!;
  assert.deepEqual(
    { id: t.id, subject_key: t.subject_key, status: t.status, opened_by: t.opened_by, opened_by_auth: t.opened_by_auth, value: t.current_value, created_at: t.created_at },
    { id: 7, subject_key: "launch-date-utc", status: "proposed", opened_by: "Alice", opened_by_auth: "anon", value: "Dec 1", created_at: at(7) },
  );
  assert.deepEqual(ledger.revisions, [{
    id: 7, thread_id: 7, kind: "propose", value: "Dec 1", author_agent_id: "Alice", auth: "anon", via: "api", source_msg_id: 3, quote: "let's ship Dec 1", created_at: at(7), seq: 7,
  }]);
  // a signed opener, and a subject_key given explicitly
  applyLedgerEvent(ledger, event(8, "thread.opened", "Bob", { subject: "Budget", subject_key: "Q4 Budget", value: "10k" }, { sig: v1Sig(KEY_B, 8) }));
  assert.equal(ledger.threads[1]!.opened_by_auth, "signed");
  assert.equal(ledger.threads[1]!.subject_key, "q4-budget");
});

test("applyLedgerEvent: the arbiter's revision is authored by the message's author", () => {
  const ledger = replay([]);
  applyLedgerEvent(ledger, event(2, "thread.revised", "arbiter", { thread_id: 1, kind: "confirm", source_msg_id: 5, quote: "ok" }, { server: { author_agent_id: "bob", via: "arbiter", auth: "anon" } }));
  assert.deepEqual(ledger.threads[0]!.confirmations, [{ agent_id: "bob", auth: "anon" }]);
  assert.deepEqual({ ...ledger.revisions[1]!, id: 0 }, { id: 0, thread_id: 1, kind: "confirm", value: "v1", author_agent_id: "bob", auth: "anon", via: "arbiter", source_msg_id: 5, quote: "ok", created_at: at(2), seq: 2 });
});

test("applyLedgerEvent: a contradiction of an agreed thread records the revision and, with the service's event, the discrepancy", () => {
  const ledger = replay([...AGREE, ["dave", "contradict", "Dec 15"]]);
  const t = ledger.threads[0]!;
  assert.equal(t.status, "disputed");
  assert.equal(t.current_value, "v1", "a contradiction does not change the value");
  assert.deepEqual(t.confirmations, []);
  assert.deepEqual({ kind: t.last_revision.kind, value: t.last_revision.value, by: t.last_revision.author_agent_id, seq: t.last_revision.seq }, { kind: "contradict", value: "Dec 15", by: "dave", seq: 4 });
  // reviseThread (lib/services/ledger.ts) appends discrepancy.recorded after it
  applyLedgerEvent(ledger, event(5, "discrepancy.recorded", "server", { description: "dave contradicts", severity: "medium", thread_id: 1 }));
  assert.deepEqual(ledger.discrepancies, [{
    id: 5, thread_id: 1, description: "dave contradicts", severity: "medium", source_msg_id: null, recorded_by: "server", status: "open", resolved_by: null, created_at: at(5), resolved_at: null,
  }]);
  applyLedgerEvent(ledger, event(6, "discrepancy.resolved", "Alice", { discrepancy_id: 5 }));
  assert.deepEqual([ledger.discrepancies[0]!.status, ledger.discrepancies[0]!.resolved_by, ledger.discrepancies[0]!.resolved_at], ["resolved", "Alice", at(6)]);
});

test("applyLedgerEvent: handshakes are recorded, signed or not; two distinct agents on the current hash seal it", () => {
  const ledger = replay(AGREE);
  const hash = contextHash(ledger.threads);
  applyLedgerEvent(ledger, event(4, "handshake.signed", "bob", { context_hash: hash }));
  assert.deepEqual(ledger.handshakes, [{ id: 4, agent_id: "bob", context_hash: hash, auth: "anon", pubkey_hex: null, signature_hex: null, ts: null, nonce: null, created_at: at(4) }]);
  assert.equal(sealOf(ledger.threads, ledger.handshakes), null, "one agent does not seal");
  applyLedgerEvent(ledger, event(5, "handshake.signed", "BOB", { context_hash: hash }));
  assert.equal(sealOf(ledger.threads, ledger.handshakes), null, "the same agent twice does not seal");
  applyLedgerEvent(ledger, event(6, "handshake.signed", "carol", { context_hash: hash }, { sig: v1Sig(KEY_B, 6) }));
  const h = ledger.handshakes[2]!;
  assert.deepEqual([h.auth, h.pubkey_hex, h.nonce, h.ts], ["signed", KEY_B, "nonce-6", at(6)]);
  assert.deepEqual(sealOf(ledger.threads, ledger.handshakes), { context_hash: hash, agents: ["bob", "carol"] });
  // a change of the ledger makes the handshakes stale
  applyLedgerEvent(ledger, event(7, "thread.revised", "Alice", { thread_id: 1, kind: "update", value: "v2" }));
  assert.equal(sealOf(ledger.threads, ledger.handshakes), null);
});

test("applyLedgerEvent: a revision of an unknown thread and events of other kinds change nothing", () => {
  const ledger = replay([]);
  const before = structuredClone(ledger);
  applyLedgerEvent(ledger, event(2, "thread.revised", "bob", { thread_id: 99, kind: "confirm" }));
  applyLedgerEvent(ledger, event(3, "message.posted", "bob", { text: "hi" }));
  applyLedgerEvent(ledger, event(4, "discrepancy.resolved", "bob", { discrepancy_id: 42 }));
  assert.deepEqual(ledger, before);
});

test("applyLedgerEvent: revisions go to their own thread", () => {
  const ledger = emptyLedger();
  applyLedgerEvent(ledger, event(1, "thread.opened", "Alice", { subject: "A", value: "a" }));
  applyLedgerEvent(ledger, event(2, "thread.opened", "bob", { subject: "B", value: "b" }));
  applyLedgerEvent(ledger, event(3, "thread.revised", "carol", { thread_id: 2, kind: "confirm" }));
  applyLedgerEvent(ledger, event(4, "thread.revised", "Alice", { thread_id: 2, kind: "confirm" }));
  assert.deepEqual(ledger.threads.map((t) => [t.id, t.status, t.confirmations.length, t.revisions_count]), [[1, "proposed", 0, 1], [2, "agreed", 2, 3]]);
});
