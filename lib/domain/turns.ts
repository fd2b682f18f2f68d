/**
 * Turns mode (SPEC 10, issue 6): server-made turns in a fixed order, leases, rounds, completion by
 * consensus or by a supervisor, and timeouts that never let the room stall. Pure: the reducer
 * turns the room's events into the projection (the verifier replays it), and `plan*` decide which
 * events the server appends next, by running the same reducer over a draft.
 */
import type { LogEvent } from "../log/event";
import { canonicalize } from "../log/jcs";
import { z } from "zod";
import { as, defineEvents, isoTime, seqId, type Feature } from "./event-kind";
import { agentKey, sameAgent } from "./names";

export const TURNS_DEFAULTS = { max_rounds: 10, turn_timeout_s: 300, delay_s: 0, policy: "consensus", absent_after: 2 } as const;
export const TURNS_LIMITS = {
  participants: [2, 8],
  max_rounds: [1, 200],
  turn_timeout_s: [10, 86_400],
  delay_s: [0, 3600],
  absent_after: [1, 10],
} as const;
/** How many messages a turn hands over at most (the newest ones); older ones are a page away. */
export const INPUT_MESSAGES_MAX = 100;

export type TurnsPolicy = "consensus" | "supervisor";
export type TurnsStatus = "active" | "completed" | "blocked" | "cancelled";
export type TurnPhase = "dialogue" | "confirm";
export type TurnStatus = "ready" | "claimed" | "done" | "skipped" | "cancelled";
export type TurnResult = "continue" | "complete" | "pass" | "blocked";

/** The room's rules, fixed at creation (max_rounds can be raised by the owner). */
export interface TurnsConfig {
  /** In speaking order: the first speaker first. */
  participants: string[];
  max_rounds: number;
  turn_timeout_s: number;
  delay_s: number;
  policy: TurnsPolicy;
  supervisor: string | null;
  absent_after: number;
}

export interface TurnParticipant {
  agent_id: string;
  status: "active" | "absent";
  /** Consecutive turns that timed out. */
  timeouts: number;
  /** The seq of the last event of this participant's last turn (its messages start after it). */
  last_turn_seq: number;
}

export interface Proposal {
  by: string;
  turn_id: number;
  /** Who still has to confirm, in the order they are asked. */
  pending: string[];
  confirmed: string[];
}

/** The room-level state of a turns room. */
export interface TurnsRoom {
  status: TurnsStatus;
  reason: string | null;
  config: TurnsConfig;
  participants: TurnParticipant[];
  round: number;
  /** The open turn (ready or claimed), if any. */
  current: number | null;
  /** Who had the last turn: the dialogue goes on after them. */
  last_agent: string | null;
  proposal: Proposal | null;
  updated_at: string;
}

export interface Turn {
  id: number;
  round: number;
  slot: number;
  agent_id: string;
  phase: TurnPhase;
  status: TurnStatus;
  available_at: string;
  /** Past this, a ready turn is skipped (not claimed in time). */
  claim_by: string;
  lease_until: string | null;
  result: TurnResult | null;
  /** Why a turn was skipped or cancelled. */
  reason: string | null;
  /** The message its reply posted. */
  message_id: number | null;
  opened_at: string;
  closed_at: string | null;
}

/** The server-side turn: the public turn plus the hash of its lease token. */
export interface TurnState extends Turn {
  lease_hash: string | null;
  /** The seq of its turn.claimed event (the lease token is derived from it). */
  claim_seq: number | null;
}

export interface TurnsProjection {
  room: TurnsRoom | null;
  turns: TurnState[];
}

const policy = z.enum(["consensus", "supervisor"]);
/** The turns config as room.created records it (validated at intake by lib/schemas/turns.ts). */
export const turnsConfigSchema: z.ZodType<TurnsConfig> = z.looseObject({
  participants: z.array(z.string()),
  max_rounds: z.number().int(),
  turn_timeout_s: z.number(),
  delay_s: z.number(),
  policy,
  supervisor: z.string().nullable(),
  absent_after: z.number().int(),
});

const turnRef = { turn_id: seqId };
const skipReason = z.enum(["timeout", "supervisor", "owner"]);
export const TURN_EVENTS = defineEvents("turns", {
  "turn.opened": {
    payload: z.looseObject({ round: z.number().int(), slot: z.number().int(), agent_id: z.string(), phase: z.enum(["dialogue", "confirm"]), available_at: isoTime }),
    server: z.looseObject({ claim_by: isoTime.optional() }),
  },
  "turn.claimed": { payload: z.looseObject(turnRef), server: z.looseObject({ lease_until: isoTime, lease_hash: z.string() }), agentWritten: true },
  "turn.done": { payload: z.looseObject({ ...turnRef, result: z.enum(["continue", "complete", "pass", "blocked"]), message_id: seqId.optional() }) },
  // A supervisor skips a turn with its own (signable) request; the server skips on timeouts.
  "turn.skipped": { payload: z.looseObject({ ...turnRef, reason: skipReason }), agentWritten: true },
  "completion.proposed": { payload: z.looseObject({ by: z.string(), ...turnRef, pending: z.array(z.string()) }) },
  "completion.confirmed": { payload: z.looseObject({ agent_id: z.string(), ...turnRef }) },
  "completion.rejected": { payload: z.looseObject({ agent_id: z.string(), ...turnRef }) },
  "room.completed": { payload: z.looseObject({ reason: z.string().optional() }) },
  "room.blocked": { payload: z.looseObject({ reason: z.string(), agent_id: z.string().optional() }) },
  "room.resumed": { payload: z.looseObject({}) },
  "room.cancelled": { payload: z.looseObject({ reason: z.string().optional() }) },
  "room.rounds_raised": { payload: z.looseObject({ max_rounds: z.number().int() }) },
  "participant.absent": { payload: z.looseObject({ agent_id: z.string(), timeouts: z.number().int().optional() }) },
  "participant.reinstated": { payload: z.looseObject({ agent_id: z.string() }) },
});
export type TurnEventType = keyof typeof TURN_EVENTS;
const E = TURN_EVENTS;
const isTurnEvent = (type: string): type is TurnEventType => Object.hasOwn(TURN_EVENTS, type);

export const TERMINAL_TURNS_STATUSES = new Set<TurnsStatus>(["completed", "cancelled"]);
const OPEN_TURN = new Set<TurnStatus>(["ready", "claimed"]);
export const isOpenTurn = (t: Pick<Turn, "status">) => OPEN_TURN.has(t.status);

/** When an open turn times out: its claim deadline while ready, its lease while claimed. */
export const deadlineOf = (turn: Pick<Turn, "status" | "claim_by" | "lease_until">) =>
  turn.status === "ready" ? turn.claim_by : turn.status === "claimed" ? turn.lease_until : null;

/**
 * A copy of a projection that shares nothing that changes (the reducer changes turns, the room, its
 * participants and proposal in place; the config's participants never change, but are copied too).
 * What structuredClone would give, without its cost on the hot path.
 */
export function cloneProjection(proj: TurnsProjection): TurnsProjection {
  const room = proj.room;
  return {
    room: room && {
      ...room,
      config: { ...room.config, participants: [...room.config.participants] },
      participants: room.participants.map((p) => ({ ...p })),
      proposal: room.proposal && { ...room.proposal, pending: [...room.proposal.pending], confirmed: [...room.proposal.confirmed] },
    },
    turns: proj.turns.map((t) => ({ ...t })),
  };
}

export function publicTurn(t: TurnState): Turn {
  const { lease_hash: _h, claim_seq: _c, ...rest } = t;
  void _h;
  void _c;
  return rest;
}

const isoPlus = (iso: string, seconds: number) => new Date(Date.parse(iso) + seconds * 1000).toISOString();

/** The rules between the fields of a turns config, each with the field it names (the schema reports them). */
export function turnsConfigProblems(t: { participants: string[]; first?: string; policy: TurnsPolicy; supervisor?: string }): { field: string; message: string }[] {
  const problems: { field: string; message: string }[] = [];
  // Names compare by agentKey: "alice" and "Alice" are one agent, listed twice.
  const listed = (name: string) => t.participants.some((p) => sameAgent(p, name));
  if (new Set(t.participants.map(agentKey)).size !== t.participants.length) problems.push({ field: "participants", message: "must not list an agent twice (names differing only in case or spaces are the same agent)" });
  if (t.first !== undefined && !listed(t.first)) problems.push({ field: "first", message: "must be one of the participants" });
  if (t.policy === "supervisor" && t.supervisor === undefined) problems.push({ field: "supervisor", message: 'is required with policy "supervisor"' });
  if (t.supervisor !== undefined && !listed(t.supervisor)) problems.push({ field: "supervisor", message: "must be one of the participants" });
  if (t.supervisor !== undefined && t.policy !== "supervisor") problems.push({ field: "supervisor", message: 'is only for policy "supervisor"' });
  return problems;
}

/** The speaking order: the participants as given, rotated so that `first` speaks first. */
export function speakingOrder(participants: string[], first?: string): string[] {
  const at = first === undefined ? 0 : Math.max(0, participants.findIndex((p) => sameAgent(p, first)));
  return [...participants.slice(at), ...participants.slice(0, at)];
}

export function newTurnsRoom(config: TurnsConfig, ts: string): TurnsRoom {
  return {
    status: "active",
    reason: null,
    config: { ...config, participants: [...config.participants] },
    participants: config.participants.map((agent_id) => ({ agent_id, status: "active", timeouts: 0, last_turn_seq: 0 })),
    round: 1,
    current: null,
    last_agent: null,
    proposal: null,
    updated_at: ts,
  };
}

export const activeParticipants = (room: TurnsRoom) => room.participants.filter((p) => p.status === "active");
/** The participant an agent name is (by agentKey; an exact match first, for rooms made before names compared by key). */
export const participant = (room: TurnsRoom, agentId: string) =>
  room.participants.find((p) => p.agent_id === agentId) ?? room.participants.find((p) => sameAgent(p.agent_id, agentId));
/**
 * The rule of a turns room's chat: only a participant holding the claimed, unexpired open turn may
 * post (with its reply). Why `agentId` may not post now, or null when it may.
 */
export function postRefusal(room: TurnsRoom, current: Turn | undefined, agentId: string, now: string): "not_participant" | "not_your_turn" | null {
  if (!participant(room, agentId)) return "not_participant";
  const holds = current?.status === "claimed" && sameAgent(current.agent_id, agentId) && current.lease_until !== null && current.lease_until > now;
  return holds ? null : "not_your_turn";
}
export const slotOf = (room: TurnsRoom, agentId: string) => {
  const exact = room.config.participants.indexOf(agentId);
  return exact >= 0 ? exact : room.config.participants.findIndex((p) => sameAgent(p, agentId));
};

// ---- the reducer ----

type P = Record<string, unknown>;
/** The fields by which an event of a turns room names its turn or participant. */
type Refs = { turn_id?: unknown; agent_id?: unknown };

/**
 * Applies one event to the projection (events of other kinds are ignored). Mutates and returns
 * `proj`. `proj.turns` may hold only the turns the event touches (the services pass the current one).
 */
export function applyTurnEvent(proj: TurnsProjection, event: Pick<LogEvent, "seq" | "ts" | "type" | "actor" | "payload" | "server">): TurnsProjection {
  if (event.type === "room.created") {
    const config = (event.payload as { turns?: TurnsConfig }).turns; // typed by ROOM_EVENTS["room.created"]
    if (config) proj.room = newTurnsRoom(config, event.ts);
    return proj;
  }
  const room = proj.room;
  if (!room) return proj;
  if (event.type === "message.posted") {
    // A turn's reply: the turn is closed by the turn.done that follows.
    return proj;
  }
  if (!isTurnEvent(event.type)) return proj;
  room.updated_at = event.ts;
  const refs = event.payload as Refs;
  const turn = typeof refs.turn_id === "number" ? proj.turns.find((t) => t.id === refs.turn_id) : undefined;
  const who = typeof refs.agent_id === "string" ? participant(room, refs.agent_id) : undefined;
  const close = (t: TurnState, status: TurnStatus) => {
    t.status = status;
    t.closed_at = event.ts;
    if (room.current === t.id) room.current = null;
    room.last_agent = t.agent_id;
    const owner = participant(room, t.agent_id);
    if (owner) owner.last_turn_seq = event.seq;
  };
  switch (event.type) {
    case "turn.opened": {
      const { payload: p, server: s } = as(E["turn.opened"], event);
      const t: TurnState = {
        id: event.seq,
        round: p.round,
        slot: p.slot,
        agent_id: p.agent_id,
        phase: p.phase,
        status: "ready",
        available_at: p.available_at,
        claim_by: s.claim_by ?? isoPlus(p.available_at, room.config.turn_timeout_s),
        lease_until: null,
        result: null,
        reason: null,
        message_id: null,
        opened_at: event.ts,
        closed_at: null,
        lease_hash: null,
        claim_seq: null,
      };
      proj.turns.push(t);
      room.current = t.id;
      room.round = t.round;
      break;
    }
    case "turn.claimed":
      if (turn) {
        const s = as(E["turn.claimed"], event).server;
        turn.status = "claimed";
        turn.lease_until = s.lease_until;
        turn.lease_hash = s.lease_hash;
        turn.claim_seq = event.seq;
      }
      break;
    case "turn.done":
      if (turn) {
        const p = as(E["turn.done"], event).payload;
        turn.result = p.result;
        turn.message_id = p.message_id ?? null;
        close(turn, "done");
        const owner = participant(room, turn.agent_id);
        if (owner) owner.timeouts = 0;
      }
      break;
    case "turn.skipped":
      if (turn) {
        const p = as(E["turn.skipped"], event).payload;
        turn.reason = p.reason;
        close(turn, "skipped");
        const owner = participant(room, turn.agent_id);
        if (owner && p.reason === "timeout") owner.timeouts++;
        // A confirmation that was not given: a timeout asks again later, a supervisor's skip waives it.
        if (turn.phase === "confirm" && room.proposal) {
          room.proposal.pending = room.proposal.pending.filter((a) => a !== turn.agent_id);
          if (p.reason === "timeout") room.proposal.pending.push(turn.agent_id);
        }
      }
      break;
    case "participant.absent":
      if (who) {
        who.status = "absent";
        if (room.proposal) room.proposal.pending = room.proposal.pending.filter((a) => a !== who.agent_id);
      }
      break;
    case "participant.reinstated":
      if (who) {
        who.status = "active";
        who.timeouts = 0;
      }
      break;
    case "completion.proposed": {
      const p = as(E["completion.proposed"], event).payload;
      room.proposal = { by: p.by, turn_id: p.turn_id, pending: [...p.pending], confirmed: [] };
      break;
    }
    case "completion.confirmed":
      if (room.proposal) {
        const p = as(E["completion.confirmed"], event).payload;
        room.proposal.pending = room.proposal.pending.filter((a) => a !== p.agent_id);
        room.proposal.confirmed.push(p.agent_id);
      }
      break;
    case "completion.rejected":
      room.proposal = null;
      break;
    case "room.completed":
      room.status = "completed";
      room.reason = as(E["room.completed"], event).payload.reason ?? null;
      break;
    case "room.blocked":
      room.status = "blocked";
      room.reason = as(E["room.blocked"], event).payload.reason;
      room.proposal = null;
      break;
    case "room.resumed":
      room.status = "active";
      room.reason = null;
      break;
    case "room.cancelled":
      for (const t of proj.turns) {
        if (!isOpenTurn(t)) continue;
        t.reason = "cancelled";
        close(t, "cancelled");
      }
      room.status = "cancelled";
      room.reason = as(E["room.cancelled"], event).payload.reason ?? null;
      room.proposal = null;
      break;
    case "room.rounds_raised":
      room.config.max_rounds = as(E["room.rounds_raised"], event).payload.max_rounds;
      break;
  }
  return proj;
}

/**
 * The turns of `turns` the reducer changes for `event`: the one it names by turn_id, every open one
 * for room.cancelled, none for the rest (turn.opened adds its own). Writing only those saves the
 * rows that changed.
 */
export function turnsTouchedBy(event: { type: string; payload: Record<string, unknown> }, turns: TurnState[]): TurnState[] {
  if (event.type === "room.cancelled") return turns.filter(isOpenTurn);
  const id = event.payload.turn_id;
  return typeof id === "number" ? turns.filter((t) => t.id === id) : [];
}

// ---- what the server does next ----

export interface Step {
  type: TurnEventType;
  payload: P;
  server?: P;
}

/** How a turn ended: a reply's result, or a skip. */
export type Outcome =
  | { kind: "reply"; result: TurnResult; text: string; message_id: number }
  | { kind: "skip"; reason: "timeout" | "supervisor" | "owner" };

/** Runs steps through the reducer on a draft, so each decision sees the state the steps before made. */
class Planner {
  readonly steps: Step[] = [];
  readonly draft: TurnsProjection;
  constructor(
    proj: TurnsProjection,
    private readonly now: string,
  ) {
    this.draft = cloneProjection(proj);
  }
  get room(): TurnsRoom {
    return this.draft.room!;
  }
  push(type: TurnEventType, payload: P, server?: P): void {
    this.steps.push(server ? { type, payload, server } : { type, payload });
    applyTurnEvent(this.draft, { seq: 0, ts: this.now, type, actor: "server", payload, server: server ?? {} });
  }
  open(agentId: string, round: number, phase: TurnPhase, delayS: number): void {
    const available_at = isoPlus(this.now, delayS);
    this.push("turn.opened", { round, slot: slotOf(this.room, agentId), agent_id: agentId, phase, available_at }, { claim_by: isoPlus(available_at, this.room.config.turn_timeout_s) });
  }
  /** The next dialogue turn after `after` (rotation, rounds, max_rounds). */
  continueAfter(after: string | null, delayS: number): void {
    const room = this.room;
    const order = room.config.participants;
    const active = new Set(activeParticipants(room).map((x) => x.agent_id));
    if (active.size < 2) return this.push("room.blocked", { reason: "not_enough_participants" });
    const from = after === null ? -1 : order.indexOf(after);
    let next = -1;
    for (let i = 1; i <= order.length; i++) {
      const slot = (from + i + order.length) % order.length;
      if (active.has(order[slot]!)) {
        next = slot;
        break;
      }
    }
    const wrapped = from >= 0 && next <= from;
    const round = room.round + (wrapped ? 1 : 0);
    if (round > room.config.max_rounds) return this.push("room.blocked", { reason: "max_rounds" });
    this.open(order[next]!, round, "dialogue", delayS);
  }
}

/** The first turn of a new room: the first speaker, round 1, at once. */
export function planKickoff(proj: TurnsProjection, now: string): Step[] {
  const plan = new Planner(proj, now);
  plan.open(plan.room.config.participants[0]!, 1, "dialogue", 0);
  return plan.steps;
}

/** Everything that follows the end of a turn: its close, absences, the completion protocol, the next turn or the room's end. */
export function planAfterTurn(proj: TurnsProjection, turn: TurnState, outcome: Outcome, now: string): Step[] {
  const plan = new Planner(proj, now);
  const delay = plan.room.config.delay_s;
  if (outcome.kind === "skip") {
    plan.push("turn.skipped", { turn_id: turn.id, reason: outcome.reason });
    const who = participant(plan.room, turn.agent_id);
    if (who && who.status === "active" && who.timeouts >= plan.room.config.absent_after) {
      plan.push("participant.absent", { agent_id: who.agent_id, timeouts: who.timeouts });
    }
  } else {
    plan.push("turn.done", { turn_id: turn.id, result: outcome.result, message_id: outcome.message_id });
    if (outcome.result === "blocked") {
      plan.push("room.blocked", { reason: outcome.text.slice(0, 500), agent_id: turn.agent_id });
      return plan.steps;
    }
  }
  const room = plan.room;
  const { policy, supervisor } = room.config;
  if (activeParticipants(room).length < 2) {
    plan.push("room.blocked", { reason: "not_enough_participants" });
    return plan.steps;
  }
  const result = outcome.kind === "reply" ? outcome.result : null;

  if (turn.phase === "confirm" && room.proposal) {
    if (result === "continue") {
      plan.push("completion.rejected", { agent_id: turn.agent_id, turn_id: turn.id });
      plan.continueAfter(turn.agent_id, delay);
      return plan.steps;
    }
    if (result === "complete") plan.push("completion.confirmed", { agent_id: turn.agent_id, turn_id: turn.id });
    const next = room.proposal!.pending.find((a) => participant(room, a)?.status === "active");
    if (next === undefined) {
      plan.push("room.completed", { by: room.proposal!.by, confirmed: room.proposal!.confirmed, policy });
      return plan.steps;
    }
    plan.open(next, room.round, "confirm", delay);
    return plan.steps;
  }

  if (result === "complete") {
    if (policy === "supervisor" && sameAgent(turn.agent_id, supervisor)) {
      plan.push("room.completed", { by: turn.agent_id, confirmed: [], policy });
      return plan.steps;
    }
    const pending = confirmersFor(room, turn.agent_id);
    plan.push("completion.proposed", { by: turn.agent_id, turn_id: turn.id, pending });
    plan.open(pending[0]!, room.round, "confirm", delay);
    return plan.steps;
  }
  plan.continueAfter(turn.agent_id, delay);
  return plan.steps;
}

/** Who must confirm a proposal: the supervisor (when active), else every other active participant, in order after the proposer. */
function confirmersFor(room: TurnsRoom, proposer: string): string[] {
  const { policy, supervisor, participants: order } = room.config;
  const sup = policy === "supervisor" && supervisor !== null ? participant(room, supervisor) : undefined;
  if (sup?.status === "active") return [sup.agent_id];
  const at = order.indexOf(proposer);
  return [...order.slice(at + 1), ...order.slice(0, at)].filter((a) => participant(room, a)?.status === "active");
}

/** The owner resumes a blocked room: the dialogue goes on after whoever had the last turn. */
export function planResume(proj: TurnsProjection, now: string): Step[] {
  const plan = new Planner(proj, now);
  plan.push("room.resumed", {});
  plan.continueAfter(plan.room.last_agent, 0);
  return plan.steps;
}

/** Why the room cannot resume yet, or null. */
export function resumeRefusal(room: TurnsRoom): string | null {
  if (room.status !== "blocked") return `The room is ${room.status}; only a blocked room can be resumed.`;
  if (activeParticipants(room).length < 2) {
    const absent = room.participants.filter((p) => p.status === "absent").map((p) => `"${p.agent_id}"`);
    return `Fewer than 2 participants are active: reinstate one of ${absent.join(", ")} first (POST .../turns/reinstate).`;
  }
  return null;
}

// ---- the passive monitor ----

export type HealthAlert =
  | { type: "stalled_turn"; turn_id: number; agent_id: string; detail: string }
  | { type: "expired_lease"; turn_id: number; agent_id: string; detail: string }
  | { type: "repeated_loop"; agent_ids: string[]; detail: string }
  | { type: "near_max_rounds"; round: number; max_rounds: number; detail: string }
  | { type: "absent_participant"; agent_id: string; detail: string };

export const normaliseText = (text: string) => text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, " ").trim();

/**
 * Alerts on a turns room: a ready turn past its claim deadline, a lease that ran out (both wait for
 * the sweeper), the last four replies alternating A,B,A,B with the same text per speaker, the last
 * round reached, absent participants.
 */
export function healthAlerts(room: TurnsRoom, current: Turn | undefined, lastReplies: { agent_id: string; text: string }[], now: string): HealthAlert[] {
  const alerts: HealthAlert[] = [];
  if (current && current.status === "ready" && current.claim_by <= now) {
    alerts.push({ type: "stalled_turn", turn_id: current.id, agent_id: current.agent_id, detail: `Turn ${current.id} of "${current.agent_id}" was not claimed by ${current.claim_by}; the sweeper skips it.` });
  }
  if (current && current.status === "claimed" && current.lease_until !== null && current.lease_until <= now) {
    alerts.push({ type: "expired_lease", turn_id: current.id, agent_id: current.agent_id, detail: `The lease of "${current.agent_id}" on turn ${current.id} ran out at ${current.lease_until} without a reply.` });
  }
  const last = lastReplies.slice(-4);
  if (last.length === 4) {
    const [a, b, c, d] = last.map((r) => ({ agent: r.agent_id, text: normaliseText(r.text) })) as [{ agent: string; text: string }, { agent: string; text: string }, { agent: string; text: string }, { agent: string; text: string }];
    if (!sameAgent(a.agent, b.agent) && sameAgent(a.agent, c.agent) && sameAgent(b.agent, d.agent) && a.text === c.text && b.text === d.text) {
      alerts.push({ type: "repeated_loop", agent_ids: [a.agent, b.agent], detail: `"${a.agent}" and "${b.agent}" repeat the same replies to each other.` });
    }
  }
  if (room.status === "active" && room.round >= room.config.max_rounds - 1) {
    alerts.push({ type: "near_max_rounds", round: room.round, max_rounds: room.config.max_rounds, detail: `Round ${room.round} of ${room.config.max_rounds}: the room blocks after round ${room.config.max_rounds}.` });
  }
  for (const p of room.participants) {
    if (p.status === "absent") alerts.push({ type: "absent_participant", agent_id: p.agent_id, detail: `"${p.agent_id}" missed ${p.timeouts} turns in a row and left the rotation; the owner can reinstate it.` });
  }
  return alerts;
}

// ---- the rules, checked over a log (the verifier) ----

export interface RuleViolation {
  seq: number;
  detail: string;
}

type LoggedEvent = Pick<LogEvent, "seq" | "ts" | "type" | "actor" | "payload" | "server">;

/** Events only the planner makes: each must be the next step of a plan. */
const PLANNED_TYPES = new Set(["turn.opened", "completion.proposed", "completion.confirmed", "completion.rejected", "room.completed", "room.blocked", "participant.absent"]);

/**
 * Whether a logged event is the planned step, exactly: the planner plans with the time of the
 * transaction, which is the time every event of that transaction carries, so the verifier planning
 * from the logged time gets the same turn opening times to the millisecond.
 */
function isStep(step: Step, event: LoggedEvent, config: TurnsConfig): boolean {
  if (step.type !== event.type || canonicalize(step.payload) !== canonicalize(event.payload)) return false;
  const logged = (event.payload as P).available_at;
  if (typeof logged !== "string") return true;
  return (event.server as { claim_by?: unknown }).claim_by === isoPlus(logged, config.turn_timeout_s);
}

/**
 * Replays a turns room's log and checks that the server followed the protocol: only the assigned
 * agent claims, not before its turn opens; a reply comes from the lease holder; and whatever
 * follows the kickoff, the end of a turn or a resume is exactly what the planner decides (next
 * speaker, rounds, absences, the completion protocol, the room's end).
 */
export function turnRuleViolations(events: LoggedEvent[]): RuleViolation[] {
  const check = turnRuleChecker();
  for (const event of events) check.add(event);
  return check.violations;
}

/** turnRuleViolations fed one event at a time (the verifier's way: it keeps no event). */
export function turnRuleChecker(): { add(event: LoggedEvent): void; readonly violations: RuleViolation[] } {
  const violations: RuleViolation[] = [];
  const proj: TurnsProjection = { room: null, turns: [] };
  let plan: Step[] = [];
  let reply: { turn_id: number; text: string } | null = null;
  const flag = (event: LoggedEvent, detail: string) => violations.push({ seq: event.seq, detail: `Turns protocol: ${detail}` });
  const add = (event: LoggedEvent): void => {
    const room = proj.room;
    if (!room) {
      applyTurnEvent(proj, event);
      return;
    }
    const p = event.payload as P;
    const turn = typeof p.turn_id === "number" ? proj.turns.find((t) => t.id === p.turn_id) : undefined;
    if (PLANNED_TYPES.has(event.type)) {
      const step = plan.shift();
      if (!step || !isStep(step, event, room.config)) {
        flag(event, step ? `the server should have logged ${step.type} ${JSON.stringify(step.payload)} here, not ${event.type} ${JSON.stringify(p)}.` : `${event.type} ${JSON.stringify(p)} does not follow from the turns before it.`);
        plan = [];
      }
    } else if (plan.length && event.type !== "message.posted") {
      flag(event, `the server should have logged ${plan[0]!.type} ${JSON.stringify(plan[0]!.payload)} before ${event.type}.`);
      plan = [];
    }
    if (event.type === "turn.claimed" && (!turn || turn.status !== "ready" || !sameAgent(turn.agent_id, event.actor) || event.ts < turn.available_at)) {
      flag(event, `"${event.actor}" claimed turn ${String(p.turn_id)}, which was not its open turn.`);
    }
    if (event.type === "message.posted" && typeof p.turn_id === "number") {
      if (!turn || turn.status !== "claimed" || !sameAgent(turn.agent_id, event.actor)) flag(event, `"${event.actor}" replied to turn ${String(p.turn_id)} without holding it.`);
      reply = { turn_id: p.turn_id, text: p.text as string };
    }
    if (event.type === "message.posted" && event.actor === "server" && p.kickoff === true) plan = planKickoff(proj, event.ts);
    if (event.type === "room.resumed") plan = planResume(proj, event.ts).slice(1);
    if ((event.type === "turn.done" || event.type === "turn.skipped") && turn) {
      const outcome: Outcome = event.type === "turn.skipped"
        ? { kind: "skip", reason: p.reason as "timeout" | "supervisor" | "owner" }
        : { kind: "reply", result: p.result as TurnResult, text: reply?.turn_id === turn.id ? reply.text : "", message_id: p.message_id as number };
      plan = planAfterTurn(proj, turn, outcome, event.ts).slice(1);
    }
    applyTurnEvent(proj, event);
  };
  return { add, violations };
}

/** The turns reducer: a turns room begins with its room.created event. */
export const turnsFeature: Feature<TurnsProjection> = {
  name: "turns",
  kinds: Object.values(TURN_EVENTS),
  reads: ["room.created"],
  empty: () => ({ room: null, turns: [] }),
  apply: (proj, event) => void applyTurnEvent(proj, event),
};
