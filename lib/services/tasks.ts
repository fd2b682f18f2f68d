/**
 * The task board (issue 7): every transition is one event appended inside one write transaction,
 * and the projections are what the reducer of lib/domain/tasks.ts makes of it (the verifier
 * replays the same reducer). The transaction holds the room's lock (across instances on
 * PostgreSQL), so a claim that finds the task open inside it is the only winner.
 */
import { eventFromRow } from "../store/rows";
import crypto from "node:crypto";
import { ParleyError } from "../errors";
import {
  HANDOFF_WINDOW_S_DEFAULT, LEASE_S_DEFAULT, LOST_AFTER_INTERVALS, agentStatus, decideClaim, pickNext,
  publicTask, taskIdOf, TERMINAL_STATUSES, type Board, type BoardAgent, type Task, type TaskState, type TaskStatus,
} from "../domain/tasks";
import type { EventType } from "../domain/catalogue";
import { isExpired } from "../domain/room";
import { sameAgent } from "../domain/names";
import type { EventSig } from "../log/event";
import type {
  CancelTaskInput, ClaimNextInput, ClaimTaskInput, CreateTaskInput, FailTaskInput, HandoffTaskInput, HeartbeatTaskInput, JoinBoardInput,
  ReleaseTaskInput, ReviewTaskInput, SubmitTaskInput,
} from "../schemas/tasks";
import type { RoomRow, StoreReader } from "../store/types";
import { ALL, isoNow, type Services } from "./context";
import { appendEvent, definedFields, txAfter, write, type NewEvent, type Receipt, type Tx } from "./events";
import { hashToken, parseRoomId, parseSeqId, requireOpenRoom, requireOwner, requireRoom, tokenMatches } from "./access";
import { pinnedKey, signedWrite } from "./signatures";

/** claim-next reads open tasks this many at a time. */
const NEXT_PAGE = 8;

const heartbeatMs = (svc: Services) => svc.config.agentHeartbeatS * 1000;

/** Appends a board event; the projector applies it to the part of the board given (what the caller loaded). */
async function appendTaskEvent(svc: Services, tx: Tx, room: RoomRow, event: NewEvent, board: Partial<Board>) {
  const appended = await appendEvent(svc, tx, room, event, { board });
  return { appended, board: appended.projected.board! };
}

const taskView = publicTask;

export function agentView(svc: Services, a: BoardAgent) {
  const { lost: _lost, ...rest } = a;
  void _lost;
  return { ...rest, status: agentStatus(a, svc.clock.now(), heartbeatMs(svc)) };
}

async function requireTask(reader: Pick<StoreReader, "getTask">, room: RoomRow, rawId: string | number): Promise<TaskState> {
  const id = parseSeqId(rawId);
  const task = id === undefined ? undefined : await reader.getTask(room.uuid, id);
  if (!task) throw new ParleyError("task_not_found", `No task ${String(rawId).slice(0, 20)} in this room. GET /api/rooms/${room.uuid}/tasks lists them.`);
  return task;
}

function requireRevision(task: Task, base: number | undefined): void {
  if (base !== undefined && base !== task.revision) {
    throw new ParleyError("stale_revision", `Task ${task.id} is at revision ${task.revision}, not ${base}: read it again (GET .../tasks/${task.id}) and decide on the current state.`);
  }
}

/** An agent's board entry, by agentKey (`ALICE` finds the entry `Alice` joined with). */
async function boardAgent(tx: StoreReader, room: string, agentId: string): Promise<BoardAgent | undefined> {
  return await tx.getBoardAgent(room, agentId) ?? (await tx.listBoardAgents(room)).find((a) => sameAgent(a.agent_id, agentId));
}

/** The agent as a claimant: undefined when it never joined or went silent for too long. */
async function liveAgent(svc: Services, tx: StoreReader, room: string, agentId: string): Promise<BoardAgent | undefined> {
  const agent = await boardAgent(tx, room, agentId);
  return agent && agentStatus(agent, svc.clock.now(), heartbeatMs(svc)) !== "lost" ? agent : undefined;
}

/** The actor's board entry (a write is a sign of life), when it is on the board and not lost. */
async function actorPart(tx: StoreReader, room: string, agentId: string): Promise<BoardAgent[]> {
  const agent = await boardAgent(tx, room, agentId);
  return agent && !agent.lost ? [agent] : [];
}

// ---- agents ----

export function joinBoard(svc: Services, rawRoomId: string, input: JoinBoardInput) {
  const payload = { capabilities: input.capabilities };
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const existing = await boardAgent(tx, room.uuid, input.agent_id);
    const type = existing && !existing.lost ? "agent.heartbeat" : "agent.joined";
    const sig = await signedWrite(svc, tx, room, type, input.agent_id, payload, input.sig);
    const { appended, board } = await appendTaskEvent(svc, tx, room, { type, actor: input.agent_id, payload, sig }, { agents: existing ? [existing] : [] });
    return { ...agentView(svc, board.agents[0]!), event: type, receipt: appended.receipt };
  });
}

export async function listBoardAgents(svc: Services, rawRoomId: string) {
  const room = await requireRoom(svc, rawRoomId);
  return { agents: (await svc.store.listBoardAgents(room.uuid)).map((a) => agentView(svc, a)) };
}

// ---- tasks ----

export function createTask(svc: Services, rawRoomId: string, input: CreateTaskInput) {
  const payload = definedFields({
    title: input.title, description: input.description, requires: input.requires, priority: input.priority, max_failures: input.max_failures,
    reviewer: input.reviewer, context_refs: input.context_refs,
  });
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const sig = await signedWrite(svc, tx, room, "task.created", input.agent_id, payload, input.sig);
    const { appended, board } = await appendTaskEvent(svc, tx, room, { type: "task.created", actor: input.agent_id, payload, sig }, { agents: await actorPart(tx, room.uuid, input.agent_id) });
    return { task: taskView(board.tasks[0]!), receipt: appended.receipt };
  });
}

export async function listTasks(svc: Services, rawRoomId: string, status?: string) {
  const room = await requireRoom(svc, rawRoomId);
  return { tasks: (await svc.store.listTasks(room.uuid, status as TaskStatus | undefined)).map(taskView) };
}

export async function getTask(svc: Services, rawRoomId: string, rawTaskId: string) {
  const room = await requireRoom(svc, rawRoomId);
  const task = await requireTask(svc.store, room, rawTaskId);
  const history = (await svc.store.listEvents(room.uuid, task.id - 1, ALL))
    .map(eventFromRow)
    .filter((e) => e.seq === task.id || (e.type.startsWith("task.") && taskIdOf(e) === task.id))
    .map((e) => ({ seq: e.seq, ts: e.ts, type: e.type, actor: e.actor, payload: e.payload, server: e.server }));
  return { ...taskView(task), history };
}

async function claimIn(svc: Services, tx: Tx, room: RoomRow, task: TaskState, agent: BoardAgent, leaseS: number, payload: Record<string, unknown>, sig: EventSig | undefined) {
  const token = crypto.randomBytes(32).toString("base64url");
  const server = definedFields({
    task_id: payload.task_id === undefined ? task.id : undefined,
    lease_until: txAfter(tx, leaseS),
    lease_hash: hashToken(token),
    attempt: task.attempt + 1,
  });
  const { appended, board } = await appendTaskEvent(svc, tx, room, { type: "task.claimed", actor: agent.agent_id, payload, server, sig }, { tasks: [task], agents: [agent] });
  return { task: taskView(board.tasks[0]!), lease_token: token, receipt: appended.receipt };
}

export function claimTask(svc: Services, rawRoomId: string, rawTaskId: string, input: ClaimTaskInput) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const task = await requireTask(tx, room, rawTaskId);
    requireRevision(task, input.base_revision);
    const agent = await liveAgent(svc, tx, room.uuid, input.agent_id);
    const refusal = decideClaim(task, agent, tx.now);
    if (refusal) throw new ParleyError(refusal.code, refusal.detail);
    const payload = definedFields({ task_id: task.id, lease_s: input.lease_s, base_revision: input.base_revision });
    const sig = await signedWrite(svc, tx, room, "task.claimed", input.agent_id, payload, input.sig);
    return await claimIn(svc, tx, room, task, agent!, input.lease_s ?? LEASE_S_DEFAULT, payload, sig);
  });
}

/** The highest-priority, then oldest, open task this agent may claim; `{task: null}` when none. */
export function claimNextTask(svc: Services, rawRoomId: string, input: ClaimNextInput) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const agent = await liveAgent(svc, tx, room.uuid, input.agent_id);
    if (!agent) throw new ParleyError("capability_mismatch", "Join the room's board first: POST /api/rooms/{id}/agents {agent_id, capabilities}.");
    // Pages in claim order: usually the first open task is the one (no scan of the whole board).
    const now = tx.now;
    let next: Task | null = null;
    for (let priority = 9; priority >= 0 && !next; priority--) {
      for (let offset = 0; !next; offset += NEXT_PAGE) {
        const page = await tx.openTasksAtPriority(room.uuid, priority, NEXT_PAGE, offset);
        next = pickNext(page, agent, now);
        if (page.length < NEXT_PAGE) break;
      }
    }
    if (!next) return { task: null };
    const payload = definedFields({ lease_s: input.lease_s });
    const sig = await signedWrite(svc, tx, room, "task.claimed", input.agent_id, payload, input.sig);
    return await claimIn(svc, tx, room, next as TaskState, agent, input.lease_s ?? LEASE_S_DEFAULT, payload, sig);
  });
}

/** The lease holder's writes: the token must match the current lease (constant-time) and not have run out. */
function requireLease(now: string, task: TaskState, agentId: string, token: string): void {
  if (task.status !== "claimed" || !tokenMatches(task.lease_hash, token) || !sameAgent(task.claimant, agentId)) {
    throw new ParleyError("lease_conflict", `You do not hold the lease on task ${task.id} (it is ${task.status}${task.claimant ? `, claimed by "${task.claimant}"` : ""}). Claim it again if it is open.`);
  }
  if (task.lease_until !== null && task.lease_until <= now) {
    throw new ParleyError("lease_expired", `Your lease on task ${task.id} ran out at ${task.lease_until}; it will be released. Claim it again if it is open.`);
  }
}

type LeasedInput = { agent_id: string; lease_token: string; base_revision?: number; sig?: JoinBoardInput["sig"] };

function leasedWrite(
  svc: Services,
  rawRoomId: string,
  rawTaskId: string,
  input: LeasedInput,
  type: EventType,
  fields: Record<string, unknown>,
  server: (task: TaskState, tx: Tx) => Record<string, unknown> = () => ({}),
) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const task = await requireTask(tx, room, rawTaskId);
    requireRevision(task, input.base_revision);
    requireLease(tx.now, task, input.agent_id, input.lease_token);
    const payload = definedFields({ task_id: task.id, ...fields, base_revision: input.base_revision });
    const sig = await signedWrite(svc, tx, room, type, input.agent_id, payload, input.sig);
    const { appended, board } = await appendTaskEvent(svc, tx, room, { type, actor: input.agent_id, payload, server: server(task, tx), sig }, { tasks: [task], agents: await actorPart(tx, room.uuid, input.agent_id) });
    return { task: taskView(board.tasks[0]!), receipt: appended.receipt };
  });
}

export function heartbeatTask(svc: Services, room: string, tid: string, input: HeartbeatTaskInput) {
  return leasedWrite(svc, room, tid, input, "task.heartbeat", { lease_s: input.lease_s, progress: input.progress }, (task, tx) => {
    const extended = txAfter(tx, input.lease_s ?? LEASE_S_DEFAULT);
    return { lease_until: task.lease_until !== null && task.lease_until > extended ? task.lease_until : extended };
  });
}

export const releaseTask = (svc: Services, room: string, tid: string, input: ReleaseTaskInput) =>
  leasedWrite(svc, room, tid, input, "task.released", {}, () => ({ reason: "released", failure: false }));

export const failTask = (svc: Services, room: string, tid: string, input: FailTaskInput) =>
  leasedWrite(svc, room, tid, input, "task.failed", { reason: input.reason });

export const handoffTask = (svc: Services, room: string, tid: string, input: HandoffTaskInput) =>
  leasedWrite(svc, room, tid, input, "task.handoff", { to_agent: input.to_agent, to_capability: input.to_capability, note: input.note, window_s: input.window_s }, (_task, tx) => ({
    until: txAfter(tx, input.window_s ?? HANDOFF_WINDOW_S_DEFAULT),
  }));

export const submitTask = (svc: Services, room: string, tid: string, input: SubmitTaskInput) =>
  leasedWrite(svc, room, tid, input, "task.submitted", { status: input.status, summary: input.summary, artifacts: input.artifacts, duration_s: input.duration_s });

/** By the named reviewer, the creator or the room owner; never by the claimant (by name or by key). */
export function reviewTask(svc: Services, rawRoomId: string, rawTaskId: string, input: ReviewTaskInput, bearer: string | undefined) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const task = await requireTask(tx, room, rawTaskId);
    requireRevision(task, input.base_revision);
    if (task.status !== "submitted") throw new ParleyError("invalid_transition", `Task ${task.id} is ${task.status}; only a submitted task can be reviewed.`);
    const payload = definedFields({ task_id: task.id, decision: input.decision, note: input.note, base_revision: input.base_revision });
    let actor = "owner";
    let sig: EventSig | undefined;
    if (bearer && !input.agent_id) requireOwner(svc, room, bearer);
    else {
      if (!input.agent_id) throw new ParleyError("forbidden", "Reviewing needs your agent_id (the named reviewer or the creator), or the room owner's token.");
      const self = (why: string) => new ParleyError("self_review", `Task ${task.id} was done by "${task.claimant}"; ${why}. Completed is not accepted: someone else must review it.`);
      if (sameAgent(input.agent_id, task.claimant)) throw self("its claimant cannot review it");
      sig = await signedWrite(svc, tx, room, "task.reviewed", input.agent_id, payload, input.sig);
      const claimantKeys = new Set([task.claimant_key, task.claimant ? await pinnedKey(tx, room.uuid, task.claimant) : null].filter((k): k is string => !!k));
      const reviewerKey = sig?.pubkey_hex ?? await pinnedKey(tx, room.uuid, input.agent_id);
      if (reviewerKey && claimantKeys.has(reviewerKey)) throw self("this review is signed with the claimant's key");
      if (!sameAgent(input.agent_id, task.reviewer) && !sameAgent(input.agent_id, task.created_by)) {
        if (bearer) requireOwner(svc, room, bearer);
        else throw new ParleyError("forbidden", `Only the named reviewer${task.reviewer ? ` ("${task.reviewer}")` : ""}, the creator ("${task.created_by}") or the room owner may review task ${task.id}.`);
      }
      actor = input.agent_id;
    }
    const server = input.decision === "needs_fix" ? { until: txAfter(tx, HANDOFF_WINDOW_S_DEFAULT) } : {};
    const agents = actor === "owner" ? [] : await actorPart(tx, room.uuid, actor);
    const { appended, board } = await appendTaskEvent(svc, tx, room, { type: "task.reviewed", actor, payload, server, sig }, { tasks: [task], agents });
    return { task: taskView(board.tasks[0]!), receipt: appended.receipt };
  });
}

/** By the creator (agent_id, with its key when pinned) or the room owner (token). */
export function cancelTask(svc: Services, rawRoomId: string, rawTaskId: string, input: CancelTaskInput, bearer: string | undefined) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const task = await requireTask(tx, room, rawTaskId);
    requireRevision(task, input.base_revision);
    if (TERMINAL_STATUSES.has(task.status)) throw new ParleyError("invalid_transition", `Task ${task.id} is already ${task.status}.`);
    const payload = definedFields({ task_id: task.id, reason: input.reason, base_revision: input.base_revision });
    let actor = "owner";
    let sig: EventSig | undefined;
    if (bearer && !sameAgent(input.agent_id, task.created_by)) requireOwner(svc, room, bearer);
    else {
      if (!input.agent_id) throw new ParleyError("forbidden", "Cancelling needs the creator's agent_id or the room owner's token.");
      if (!sameAgent(input.agent_id, task.created_by)) {
        throw new ParleyError("forbidden", `Only the task's creator ("${task.created_by}") or the room owner may cancel task ${task.id}.`);
      }
      sig = await signedWrite(svc, tx, room, "task.cancelled", input.agent_id, payload, input.sig);
      actor = input.agent_id;
    }
    const agents = actor === "owner" ? [] : await actorPart(tx, room.uuid, actor);
    const { appended, board } = await appendTaskEvent(svc, tx, room, { type: "task.cancelled", actor, payload, sig }, { tasks: [task], agents });
    return { task: taskView(board.tasks[0]!), receipt: appended.receipt as Receipt };
  });
}

// ---- the sweeper ----

/** The room, if its board's clock runs: open (a closed room stands still) and not expired (about to be purged). */
async function sweepableRoom(svc: Services, tx: Tx, uuid: string): Promise<RoomRow | undefined> {
  const room = await tx.getRoom(uuid);
  return room && room.status === "open" && !isExpired(room, tx.now) ? room : undefined;
}

/**
 * Marks agents silent for 3 heartbeat intervals as lost (their leases are released without a
 * failure), then releases the leases that ran out (a failure each; the budget may fail the task).
 * Called from the server's sweeper interval, and by tests with a manual clock.
 */
export async function sweepBoards(svc: Services, batch = 100): Promise<{ lost: number; released: number }> {
  let lost = 0;
  let released = 0;
  const cutoff = new Date(svc.clock.now() - LOST_AFTER_INTERVALS * heartbeatMs(svc)).toISOString();
  for (;;) {
    const silent = await svc.store.silentAgents(cutoff, isoNow(svc), batch);
    for (const { room: uuid, agentId } of silent) {
      await write(svc, [uuid], async (tx) => {
        let room = await sweepableRoom(svc, tx, uuid);
        const agent = await tx.getBoardAgent(uuid, agentId);
        if (!room || !agent || agent.lost || agent.last_seen > cutoff) return;
        room = (await appendTaskEvent(svc, tx, room, { type: "agent.lost", actor: "server", payload: { agent_id: agentId } }, { agents: [agent] })).appended.room;
        lost++;
        for (const task of (await tx.listTasks(uuid, "claimed")).filter((t) => sameAgent(t.claimant, agentId))) {
          room = (await appendTaskEvent(svc, tx, room, { type: "task.released", actor: "server", payload: { task_id: task.id }, server: { reason: "agent_lost", failure: false } }, { tasks: [task] })).appended.room;
          released++;
        }
      });
    }
    if (silent.length < batch) break;
  }
  for (;;) {
    const now = isoNow(svc);
    const expired = await svc.store.expiredLeases(now, batch);
    for (const { room: uuid, id } of expired) {
      await write(svc, [uuid], async (tx) => {
        const room = await sweepableRoom(svc, tx, uuid);
        const task = await tx.getTask(uuid, id);
        if (!room || !task || task.status !== "claimed" || task.lease_until === null || task.lease_until > now) return;
        const reason = `lease of "${task.claimant}" ran out at ${task.lease_until}`;
        await appendTaskEvent(svc, tx, room, { type: "task.released", actor: "server", payload: { task_id: task.id }, server: { reason, failure: true } }, { tasks: [task] });
        released++;
      });
    }
    if (expired.length < batch) break;
  }
  return { lost, released };
}
