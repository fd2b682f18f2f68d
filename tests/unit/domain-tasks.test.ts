// Table tests of the task board's claim rules (SPEC 10): decideClaim and claim-next's pickNext.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decideClaim, pickNext, type BoardAgent, type Handoff, type Refusal, type Task, type TaskStatus } from "../../lib/domain/tasks";

const T0 = Date.parse("2026-11-30T10:00:00.000Z");
const at = (s: number) => new Date(T0 + s * 1000).toISOString();
const NOW = at(100);

// ---- fixtures ----

function task(over: Partial<Task> = {}): Task {
  return {
    id: 1, title: "Write the parser", description: "", requires: ["ts"], priority: 5, status: "open", created_by: "owner-agent", reviewer: null,
    context_refs: [], claimant: null, claimant_key: null, lease_until: null, attempt: 0, failures: 0, max_failures: 5, failure_reasons: [],
    handoff: null, receipt: null, review: null, revision: 1, created_at: at(1), updated_at: at(1), ...over,
  };
}
function agent(agent_id = "carol", capabilities: string[] = ["ts", "sql"], over: Partial<BoardAgent> = {}): BoardAgent {
  return { agent_id, capabilities, auth: "anon", key_ref: null, last_seen: at(90), lost: false, ...over };
}
/** A handoff from "bob" running until `until` (seconds after T0). */
const handoff = (to: { to_agent?: string; to_capability?: string }, until: number): Handoff => ({
  from: "bob", to_agent: to.to_agent ?? null, to_capability: to.to_capability ?? null, note: "", until: at(until),
});

// ---- decideClaim ----

interface ClaimCase {
  name: string;
  task?: Partial<Task>;
  /** undefined: the agent never joined the board. */
  agent: BoardAgent | undefined;
  now?: string;
  expect: Refusal["code"] | null;
}

const claimCases: ClaimCase[] = [
  { name: "an open task and an agent with its capabilities", agent: agent(), expect: null },
  { name: "an agent with exactly the capabilities", task: { requires: ["ts", "sql"] }, agent: agent("carol", ["sql", "ts"]), expect: null },
  { name: "a task that requires nothing, an agent with none", task: { requires: [] }, agent: agent("carol", []), expect: null },
  { name: "a missing capability", task: { requires: ["ts", "rust"] }, agent: agent(), expect: "capability_mismatch" },
  { name: "no capabilities at all", agent: agent("carol", []), expect: "capability_mismatch" },
  { name: "capabilities compare exactly", task: { requires: ["TS"] }, agent: agent(), expect: "capability_mismatch" },
  { name: "an agent that never joined", agent: undefined, expect: "capability_mismatch" },
  { name: "a lost agent", agent: agent("carol", ["ts"], { lost: true }), expect: "capability_mismatch" },
  ...(["claimed", "submitted", "accepted", "rejected", "failed", "cancelled"] as TaskStatus[]).map((status): ClaimCase => ({
    name: `a ${status} task`, task: { status, claimant: status === "claimed" || status === "submitted" ? "dave" : null }, agent: agent(), expect: "invalid_transition",
  })),
  { name: "a claimed task, claimed again by its claimant", task: { status: "claimed", claimant: "carol" }, agent: agent(), expect: "invalid_transition" },
  // the contract's order: capabilities, then status, then the handoff window
  { name: "a claimed task and a missing capability: the capability first", task: { status: "claimed", requires: ["rust"] }, agent: agent(), expect: "capability_mismatch" },
  { name: "a claimed task in a handoff window for another: the status first", task: { status: "claimed", handoff: handoff({ to_agent: "dave" }, 200) }, agent: agent(), expect: "invalid_transition" },
  { name: "a handoff window for a missing capability: the capability first", task: { requires: ["rust"], handoff: handoff({ to_agent: "dave" }, 200) }, agent: agent(), expect: "capability_mismatch" },
  // handoff to an agent
  { name: "in a handoff window for another agent", task: { handoff: handoff({ to_agent: "dave" }, 200) }, agent: agent(), expect: "handoff_window" },
  { name: "in a handoff window for this agent", task: { handoff: handoff({ to_agent: "carol" }, 200) }, agent: agent(), expect: null },
  { name: "in a handoff window for this agent, named in another case", task: { handoff: handoff({ to_agent: "CAROL" }, 200) }, agent: agent(" Carol "), expect: null },
  { name: "the one who handed off, in its own window for another", task: { handoff: handoff({ to_agent: "dave" }, 200) }, agent: agent("bob"), expect: "handoff_window" },
  { name: "a second before the window ends", task: { handoff: handoff({ to_agent: "dave" }, 101) }, agent: agent(), expect: "handoff_window" },
  { name: "when the window ends", task: { handoff: handoff({ to_agent: "dave" }, 100) }, agent: agent(), expect: null },
  { name: "after the window", task: { handoff: handoff({ to_agent: "dave" }, 50) }, agent: agent(), expect: null },
  { name: "the same window, read later", task: { handoff: handoff({ to_agent: "dave" }, 200) }, agent: agent(), now: at(201), expect: null },
  // handoff to a capability
  { name: "in a handoff window for a capability the agent has", task: { handoff: handoff({ to_capability: "sql" }, 200) }, agent: agent(), expect: null },
  { name: "in a handoff window for a capability the agent lacks", task: { handoff: handoff({ to_capability: "review" }, 200) }, agent: agent(), expect: "handoff_window" },
  { name: "after a capability's window", task: { handoff: handoff({ to_capability: "review" }, 99) }, agent: agent(), expect: null },
];

for (const c of claimCases) {
  test(`decideClaim: ${c.name} → ${c.expect ?? "may claim"}`, () => {
    const refusal = decideClaim(task(c.task), c.agent, c.now ?? NOW);
    assert.equal(refusal?.code ?? null, c.expect, refusal?.detail);
    if (refusal) assert.ok(refusal.detail.length > 0, "a refusal says why");
  });
}

test("decideClaim: the refusal names what is missing and until when the window runs", () => {
  assert.match(decideClaim(task({ requires: ["ts", "rust", "go"] }), agent(), NOW)!.detail, /"rust", "go"/);
  assert.match(decideClaim(task({ handoff: handoff({ to_agent: "dave" }, 200) }), agent(), NOW)!.detail, new RegExp(`agent "dave".*${at(200).replace(/\./g, "\\.")}`));
  assert.match(decideClaim(task({ handoff: handoff({ to_capability: "review" }, 200) }), agent(), NOW)!.detail, /capability "review"/);
});

// ---- pickNext ----

interface NextCase {
  name: string;
  tasks: Task[];
  agent?: BoardAgent | undefined;
  now?: string;
  expect: number | null;
}
const t = (id: number, priority: number, over: Partial<Task> = {}) => task({ id, priority, created_at: at(id), ...over });

const nextCases: NextCase[] = [
  { name: "the highest priority first", tasks: [t(1, 5), t(2, 7), t(3, 6)], expect: 2 },
  { name: "priority 9 over priority 0", tasks: [t(1, 0), t(2, 9)], expect: 2 },
  { name: "at equal priority, the oldest", tasks: [t(4, 5), t(2, 5), t(3, 5)], expect: 2 },
  { name: "priority before age", tasks: [t(1, 3), t(9, 4)], expect: 9 },
  { name: "skips a task that needs a capability the agent lacks", tasks: [t(1, 9, { requires: ["rust"] }), t(2, 5)], expect: 2 },
  { name: "skips a claimed task", tasks: [t(1, 9, { status: "claimed", claimant: "dave" }), t(2, 5)], expect: 2 },
  { name: "skips submitted and terminal tasks", tasks: [t(1, 9, { status: "submitted" }), t(2, 8, { status: "accepted" }), t(3, 8, { status: "failed" }), t(4, 1)], expect: 4 },
  { name: "skips a task in a handoff window for another", tasks: [t(1, 9, { handoff: handoff({ to_agent: "dave" }, 200) }), t(2, 5)], expect: 2 },
  { name: "takes a task in its own handoff window", tasks: [t(1, 9, { handoff: handoff({ to_agent: "Carol" }, 200) }), t(2, 5)], expect: 1 },
  { name: "takes a task whose handoff window ended", tasks: [t(1, 9, { handoff: handoff({ to_agent: "dave" }, 200) }), t(2, 5)], now: at(200), expect: 1 },
  { name: "null when no task is claimable", tasks: [t(1, 9, { requires: ["rust"] }), t(2, 5, { status: "claimed" }), t(3, 5, { handoff: handoff({ to_capability: "review" }, 200) })], expect: null },
  { name: "null on an empty board", tasks: [], expect: null },
  { name: "null for an agent that never joined", tasks: [t(1, 5)], agent: undefined, expect: null },
  { name: "null for a lost agent", tasks: [t(1, 5)], agent: agent("carol", ["ts"], { lost: true }), expect: null },
];

for (const c of nextCases) {
  test(`pickNext: ${c.name}`, () => {
    const tasks = c.tasks.map((x) => structuredClone(x));
    const picked = pickNext(tasks, "agent" in c ? c.agent : agent(), c.now ?? NOW);
    assert.equal(picked?.id ?? null, c.expect);
    assert.deepEqual(tasks, c.tasks, "the list is not reordered or changed");
  });
}
