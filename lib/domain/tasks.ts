/**
 * The task board (SPEC 10, issue 7): agents with capabilities, tasks with leases, handoffs,
 * receipts and review, as a pure reducer over room events. The services check the rules before
 * they append (`decide*` below); the reducer turns the appended events into projections; the
 * verifier replays the same reducer over the log.
 */
import { bytesToHex, sha256, utf8 } from "../log/bytes";
import type { LogEvent } from "../log/event";
import { keyRef } from "../log/keys";
import { z } from "zod";
import { as, defineEvents, isoTime, seqId, type Feature } from "./event-kind";
import { sameAgent } from "./names";

export const TASK_PRIORITY_DEFAULT = 5;
export const TASK_MAX_FAILURES_DEFAULT = 5;
export const LEASE_S_DEFAULT = 300;
export const HANDOFF_WINDOW_S_DEFAULT = 300;
/** An agent silent for this many heartbeat intervals is lost. */
export const LOST_AFTER_INTERVALS = 3;

export type TaskStatus = "open" | "claimed" | "submitted" | "accepted" | "rejected" | "failed" | "cancelled";
export const TASK_STATUSES: TaskStatus[] = ["open", "claimed", "submitted", "accepted", "rejected", "failed", "cancelled"];
export const TERMINAL_STATUSES = new Set<TaskStatus>(["accepted", "rejected", "failed", "cancelled"]);

export type ArtifactType = "url" | "commit" | "pr" | "file" | "text" | "hash";
export interface Artifact {
  type: ArtifactType;
  ref: string;
  sha256?: string;
  note?: string;
  /** Only for a `text` artifact with sha256: whether SHA-256(ref) matches. */
  verified?: boolean;
}

export interface Handoff {
  from: string;
  to_agent: string | null;
  to_capability: string | null;
  note: string;
  until: string;
}

export interface TaskReceipt {
  status: "completed" | "partial" | "failed";
  summary: string;
  artifacts: Artifact[];
  duration_s: number | null;
  submitted_by: string;
  submitted_at: string;
  seq: number;
}

export interface TaskReview {
  decision: "accept" | "reject" | "needs_fix";
  note: string;
  reviewer: string;
  reviewed_at: string;
  seq: number;
}

export interface Task {
  id: number;
  title: string;
  description: string;
  requires: string[];
  priority: number;
  status: TaskStatus;
  created_by: string;
  reviewer: string | null;
  context_refs: string[];
  claimant: string | null;
  /** The key the claimant signed its claim with (self-review is refused by key too). */
  claimant_key: string | null;
  lease_until: string | null;
  attempt: number;
  failures: number;
  max_failures: number;
  failure_reasons: string[];
  handoff: Handoff | null;
  receipt: TaskReceipt | null;
  review: TaskReview | null;
  revision: number;
  created_at: string;
  updated_at: string;
}

/** The server-side task: the public task plus the hash of the current lease token. */
export interface TaskState extends Task {
  lease_hash: string | null;
}

export interface BoardAgent {
  agent_id: string;
  capabilities: string[];
  auth: "signed" | "anon";
  key_ref: string | null;
  last_seen: string;
  lost: boolean;
}

export interface Board {
  tasks: TaskState[];
  agents: BoardAgent[];
}

export const emptyBoard = (): Board => ({ tasks: [], agents: [] });

const taskRef = { task_id: seqId, base_revision: z.number().int().optional() };
const lease = z.looseObject({ task_id: seqId.optional(), lease_until: isoTime, lease_hash: z.string(), attempt: z.number().int().optional() });
const artifact = z.looseObject({ type: z.enum(["url", "commit", "pr", "file", "text", "hash"]), ref: z.string(), sha256: z.string().optional(), note: z.string().optional() });
const capabilities = z.looseObject({ capabilities: z.array(z.string()).optional() });

/** The task board's events: agents write all of them but agent.lost and the server's releases. */
export const BOARD_EVENTS = defineEvents("board", {
  "agent.joined": { payload: capabilities, agentWritten: true },
  "agent.heartbeat": { payload: capabilities, agentWritten: true },
  "agent.lost": { payload: z.looseObject({ agent_id: z.string() }) },
  "task.created": {
    payload: z.looseObject({
      title: z.string(), description: z.string().optional(), requires: z.array(z.string()).optional(), priority: z.number().int().optional(),
      reviewer: z.string().optional(), context_refs: z.array(z.string()).optional(), max_failures: z.number().int().optional(),
    }),
    agentWritten: true,
  },
  // claim-next names no task: the server facts say which one it got.
  "task.claimed": { payload: z.looseObject({ task_id: seqId.optional(), lease_s: z.number().optional() }), server: lease, agentWritten: true },
  "task.heartbeat": { payload: z.looseObject({ ...taskRef, lease_s: z.number().optional() }), server: z.looseObject({ lease_until: isoTime.optional() }), agentWritten: true },
  "task.released": { payload: z.looseObject(taskRef), server: z.looseObject({ reason: z.string().optional(), failure: z.boolean().optional() }), agentWritten: true },
  "task.failed": { payload: z.looseObject({ ...taskRef, reason: z.string().optional() }), agentWritten: true },
  "task.handoff": {
    payload: z.looseObject({ ...taskRef, to_agent: z.string().optional(), to_capability: z.string().optional(), note: z.string().optional() }),
    server: z.looseObject({ until: isoTime.optional() }),
    agentWritten: true,
  },
  "task.submitted": {
    payload: z.looseObject({ ...taskRef, status: z.enum(["completed", "partial", "failed"]), summary: z.string().optional(), artifacts: z.array(artifact).optional(), duration_s: z.number().optional() }),
    agentWritten: true,
  },
  "task.reviewed": {
    payload: z.looseObject({ ...taskRef, decision: z.enum(["accept", "reject", "needs_fix"]), note: z.string().optional() }),
    server: z.looseObject({ until: isoTime.optional() }),
    agentWritten: true,
  },
  "task.cancelled": { payload: z.looseObject({ ...taskRef, reason: z.string().optional() }), agentWritten: true },
});
const E = BOARD_EVENTS;
type BoardEventType = keyof typeof BOARD_EVENTS;
const AGENT_TYPES = new Set<string>(["agent.joined", "agent.heartbeat", "agent.lost"]);
const isBoardEvent = (type: string): type is BoardEventType => Object.hasOwn(BOARD_EVENTS, type);

export function publicTask(t: TaskState): Task {
  const { lease_hash: _hidden, ...rest } = t;
  void _hidden;
  return rest;
}

/** The task an event is about: in the payload, or (claim-next) in the server facts. */
export function taskIdOf(event: Pick<LogEvent, "payload" | "server">): number | null {
  const p = event.payload as { task_id?: unknown };
  const s = event.server as { task_id?: unknown };
  const id = typeof p.task_id === "number" ? p.task_id : typeof s.task_id === "number" ? s.task_id : null;
  return id;
}

export function textArtifactVerified(a: Pick<Artifact, "type" | "ref" | "sha256">): boolean | undefined {
  if (a.type !== "text" || a.sha256 === undefined) return undefined;
  return bytesToHex(sha256(utf8(a.ref))) === a.sha256.toLowerCase();
}

// ---- rules (checked by the services before appending) ----

export type Refusal = { code: "capability_mismatch" | "invalid_transition" | "handoff_window"; detail: string };

export const hasCapabilities = (agent: BoardAgent | undefined, requires: string[]) =>
  !!agent && requires.every((c) => agent.capabilities.includes(c));

/** Whether the handoff window (if one is running at `now`) lets this agent claim. */
export function handoffAllows(task: Task, agent: BoardAgent, now: string): boolean {
  const h = task.handoff;
  if (!h || h.until <= now) return true;
  if (h.to_agent !== null && sameAgent(h.to_agent, agent.agent_id)) return true;
  if (h.to_capability !== null && agent.capabilities.includes(h.to_capability)) return true;
  return false;
}

/** The rules of a claim, in the order the contract gives them; null when the claim may proceed. */
export function decideClaim(task: Task, agent: BoardAgent | undefined, now: string): Refusal | null {
  if (!agent || agent.lost) {
    return { code: "capability_mismatch", detail: "Join the room's board first: POST /api/rooms/{id}/agents {agent_id, capabilities}." };
  }
  if (!hasCapabilities(agent, task.requires)) {
    const missing = task.requires.filter((c) => !agent.capabilities.includes(c));
    return { code: "capability_mismatch", detail: `Task ${task.id} requires ${missing.map((c) => `"${c}"`).join(", ")}, which "${agent.agent_id}" did not declare.` };
  }
  if (task.status !== "open") {
    return { code: "invalid_transition", detail: `Task ${task.id} is ${task.status}; only an open task can be claimed.` };
  }
  if (!handoffAllows(task, agent, now)) {
    const h = task.handoff!;
    const to = h.to_agent !== null ? `agent "${h.to_agent}"` : `capability "${h.to_capability}"`;
    return { code: "handoff_window", detail: `Task ${task.id} was handed off to ${to}; until ${h.until} only it may claim. Try again after ${h.until}.` };
  }
  return null;
}

/** claim-next: the highest-priority, then oldest, open task this agent may claim. */
export function pickNext(tasks: Task[], agent: BoardAgent | undefined, now: string): Task | null {
  const candidates = tasks
    .filter((t) => decideClaim(t, agent, now) === null)
    .sort((a, b) => b.priority - a.priority || a.id - b.id);
  return candidates[0] ?? null;
}

// ---- the reducer ----

function fail(task: TaskState, reason: string): void {
  task.failures++;
  task.failure_reasons.push(reason);
  task.status = task.failures >= task.max_failures ? "failed" : "open";
}

function dropLease(task: TaskState): void {
  task.claimant = null;
  task.claimant_key = null;
  task.lease_until = null;
  task.lease_hash = null;
}

/** Applies one event to the board (events of other kinds are ignored). Mutates and returns `board`. */
export function applyTaskEvent(board: Board, event: LogEvent): Board {
  if (AGENT_TYPES.has(event.type)) {
    applyAgentEvent(board, event);
    return board;
  }
  if (!isBoardEvent(event.type)) return board;
  // Any board write by an agent is a sign of life.
  const actor = board.agents.find((a) => sameAgent(a.agent_id, event.actor) && !a.lost);
  if (actor) actor.last_seen = event.ts;
  if (event.type === "task.created") {
    const p = as(E["task.created"], event).payload;
    board.tasks.push({
      id: event.seq,
      title: p.title,
      description: p.description ?? "",
      requires: p.requires ?? [],
      priority: p.priority ?? TASK_PRIORITY_DEFAULT,
      status: "open",
      created_by: event.actor,
      reviewer: p.reviewer ?? null,
      context_refs: p.context_refs ?? [],
      claimant: null,
      claimant_key: null,
      lease_until: null,
      attempt: 0,
      failures: 0,
      max_failures: p.max_failures ?? TASK_MAX_FAILURES_DEFAULT,
      failure_reasons: [],
      handoff: null,
      receipt: null,
      review: null,
      revision: 1,
      created_at: event.ts,
      updated_at: event.ts,
      lease_hash: null,
    });
    return board;
  }
  const id = taskIdOf(event);
  const task = board.tasks.find((t) => t.id === id);
  if (!task) return board;
  task.revision++;
  task.updated_at = event.ts;
  switch (event.type) {
    case "task.claimed": {
      const s = as(E["task.claimed"], event).server;
      task.status = "claimed";
      task.claimant = event.actor;
      task.claimant_key = event.sig?.pubkey_hex ?? null;
      task.lease_until = s.lease_until;
      task.lease_hash = s.lease_hash;
      task.attempt++;
      task.handoff = null;
      break;
    }
    case "task.heartbeat":
      task.lease_until = as(E["task.heartbeat"], event).server.lease_until ?? task.lease_until;
      break;
    case "task.released": {
      const s = as(E["task.released"], event).server;
      dropLease(task);
      if (s.failure) fail(task, s.reason ?? "released");
      else task.status = "open";
      break;
    }
    case "task.failed":
      dropLease(task);
      fail(task, as(E["task.failed"], event).payload.reason ?? "failed");
      break;
    case "task.handoff": {
      const { payload: p, server: s } = as(E["task.handoff"], event);
      task.handoff = { from: event.actor, to_agent: p.to_agent ?? null, to_capability: p.to_capability ?? null, note: p.note ?? "", until: s.until ?? event.ts };
      dropLease(task);
      task.status = "open";
      break;
    }
    case "task.submitted": {
      const p = as(E["task.submitted"], event).payload;
      const status = p.status;
      const artifacts = (p.artifacts ?? []).map((a) => {
        const verified = textArtifactVerified(a);
        return verified === undefined ? { ...a } : { ...a, verified };
      });
      task.receipt = {
        status, summary: p.summary ?? "", artifacts, duration_s: p.duration_s ?? null,
        submitted_by: event.actor, submitted_at: event.ts, seq: event.seq,
      };
      task.lease_until = null;
      task.lease_hash = null;
      if (status === "failed") {
        const claimant = task.claimant;
        task.claimant = null;
        task.claimant_key = null;
        fail(task, `submitted as failed by ${claimant ?? event.actor}: ${p.summary ?? ""}`);
      } else task.status = "submitted";
      break;
    }
    case "task.reviewed": {
      const { payload: p, server: s } = as(E["task.reviewed"], event);
      const decision = p.decision;
      task.review = { decision, note: p.note ?? "", reviewer: event.actor, reviewed_at: event.ts, seq: event.seq };
      if (decision === "accept") task.status = "accepted";
      else if (decision === "reject") task.status = "rejected";
      else {
        task.handoff = { from: event.actor, to_agent: task.claimant, to_capability: null, note: task.review.note, until: s.until ?? event.ts };
        dropLease(task);
        task.status = "open";
      }
      break;
    }
    case "task.cancelled":
      dropLease(task);
      task.status = "cancelled";
      break;
  }
  return board;
}

function applyAgentEvent(board: Board, event: LogEvent): void {
  if (event.type === "agent.lost") {
    const who = as(E["agent.lost"], event).payload.agent_id;
    const a = board.agents.find((x) => sameAgent(x.agent_id, who));
    if (a) a.lost = true;
    return;
  }
  const caps = (as(E["agent.joined"], event).payload.capabilities ?? []).slice();
  const sig = event.sig;
  // One board entry per agent (by agentKey), under the name it first joined with.
  const existing = board.agents.find((x) => sameAgent(x.agent_id, event.actor));
  const fields = {
    capabilities: caps,
    auth: sig ? ("signed" as const) : ("anon" as const),
    key_ref: sig ? keyRef(sig.pubkey_hex) : null,
    last_seen: event.ts,
    lost: false,
  };
  if (existing) Object.assign(existing, fields);
  else board.agents.push({ agent_id: event.actor, ...fields });
}

/** online / away / lost, from the last heartbeat and the interval. */
export function agentStatus(agent: BoardAgent, nowMs: number, heartbeatMs: number): "online" | "away" | "lost" {
  if (agent.lost) return "lost";
  const silent = nowMs - Date.parse(agent.last_seen);
  if (silent >= LOST_AFTER_INTERVALS * heartbeatMs) return "lost";
  return silent <= heartbeatMs * 1.5 ? "online" : "away";
}

/** The board's reducer. */
export const boardFeature: Feature<Board> = {
  name: "board",
  kinds: Object.values(BOARD_EVENTS),
  empty: emptyBoard,
  apply: (board, event) => void applyTaskEvent(board, event),
};
