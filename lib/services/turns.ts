/**
 * Turns mode (issue 6): the server makes every turn. Each transition is one event appended inside
 * one write transaction, and the projections are what the reducer of lib/domain/turns.ts makes of
 * the events (the verifier replays the same reducer); the rules of what comes next are the
 * planner's in the same module. The transaction holds the room's lock (across instances on
 * PostgreSQL), so of two concurrent claims the first one makes the lease and the second one finds
 * it (and gets the same token). Reads never write: a turn past its deadline is the timer's to skip.
 */
import { messageFromRow } from "../store/rows";
import crypto from "node:crypto";
import { ParleyError } from "../errors";
import type { Message } from "../domain/message";
import {
  deadlineOf, healthAlerts, INPUT_MESSAGES_MAX, isOpenTurn, participant, planAfterTurn, planKickoff, planResume,
  publicTurn, resumeRefusal, TERMINAL_TURNS_STATUSES, type Outcome, type Step, type TurnsConfig, type TurnsProjection,
  type TurnsRoom, type TurnState,
} from "../domain/turns";
import { isExpired } from "../domain/room";
import { sameAgent } from "../domain/names";
import type { EventSig } from "../log/event";
import type { ClaimTurnInput, MyTurnInput, ReplyTurnInput, SkipTurnInput } from "../schemas/turns";
import { turnsProtocolCard } from "../instructions/turns";
import type { RoomRow, StoreReader } from "../store/types";
import { isoNow, type Caller, type Services } from "./context";
import { appendEvent, queuedWrite, txAfter, write, type Appended, type NewEvent, type Receipt, type Tx } from "./events";
import { appendMessage, takePostBudget } from "./messages";
import {
  hashToken, parseRoomId, parseSeqId, requireOpenRoom, requireOwner, requireParticipant, requireRoom, requireTurnsRoom, tokenMatches,
} from "./access";
import { signedWrite } from "./signatures";


// ---- lease tokens ----

/**
 * A lease token is derived from the server key and the claim (room, turn, seq of the claim event),
 * so a live re-claim returns the same token while only its hash is stored. Every instance signs
 * with the same key, so every instance derives the same token.
 */
function leaseToken(svc: Services, room: string, turnId: number, claimSeq: number): string {
  return crypto.createHmac("sha256", svc.leaseSecret).update(`${room}/${turnId}/${claimSeq}`).digest("base64url");
}

// ---- reading the projection ----

async function requireTurn(reader: Pick<StoreReader, "getTurn">, room: RoomRow, rawId: string): Promise<TurnState> {
  const id = parseSeqId(rawId);
  const turn = id === undefined ? undefined : await reader.getTurn(room.uuid, id);
  if (!turn) throw new ParleyError("turn_not_found", `No turn ${String(rawId).slice(0, 20)} in this room. GET /api/rooms/${room.uuid}/turns/current shows the open one.`);
  return turn;
}

/** The turns room with the open turn and any others named: the part of the projection a write touches. */
async function loadProjection(reader: StoreReader, room: RoomRow, ...turns: TurnState[]): Promise<TurnsProjection> {
  const turnsRoom = await requireTurnsRoom(reader, room);
  const byId = new Map(turns.map((t) => [t.id, t]));
  if (turnsRoom.current !== null && !byId.has(turnsRoom.current)) {
    const current = await reader.getTurn(room.uuid, turnsRoom.current);
    if (current) byId.set(current.id, current);
  }
  return { room: turnsRoom, turns: [...byId.values()] };
}

// ---- writing ----

/** Appends events in order; the projector applies each to `proj` (in place) and writes it. */
async function appendTurnEvents(svc: Services, tx: Tx, room: RoomRow, proj: TurnsProjection, events: NewEvent[]): Promise<{ room: RoomRow; appended: Appended[] }> {
  const appended: Appended[] = [];
  for (const event of events) {
    const a = await appendEvent(svc, tx, room, event, { turns: proj });
    appended.push(a);
    room = a.room;
  }
  return { room, appended };
}

const serverEvents = (steps: Step[], first?: { actor: string; sig?: EventSig }): NewEvent[] =>
  steps.map((s, i) => ({ ...s, actor: i === 0 && first ? first.actor : "server", ...(i === 0 && first?.sig ? { sig: first.sig } : {}) }));

/** Inside createRoom's transaction: the kickoff protocol card, then the first turn. */
export async function startTurns(svc: Services, tx: Tx, created: Appended, config: TurnsConfig): Promise<void> {
  const proj = created.projected.turns!;
  const room = created.room;
  const card = await appendMessage(svc, tx, room, "server", { text: turnsProtocolCard(config, room.uuid), kickoff: true });
  await appendTurnEvents(svc, tx, card.appended.room, proj, serverEvents(planKickoff(proj, tx.now)));
}

/**
 * Timeouts: the open turn of a room, if past its deadline, is skipped and the next turn opens. The
 * turn timer does this every second on one instance; under the room's lock, and only for a turn
 * still open and due, so instances that try at once skip it once.
 */
function settleTurn(svc: Services, uuid: string, turnId: number): Promise<boolean> {
  return write(svc, [uuid], async (tx) => {
    const room = await tx.getRoom(uuid);
    if (!room || room.status !== "open" || isExpired(room, tx.now)) return false; // closed: paused until reopened
    const turn = await tx.getTurn(uuid, turnId);
    if (!turn || !isOpenTurn(turn)) return false;
    const deadline = deadlineOf(turn);
    if (deadline === null || deadline > tx.now) return false;
    const proj = await loadProjection(tx, room, turn);
    await appendTurnEvents(svc, tx, room, proj, serverEvents(planAfterTurn(proj, turn, { kind: "skip", reason: "timeout" }, tx.now)));
    return true;
  });
}

/** Skips every open turn past its deadline (any room). Called from the server's turn timer, and by tests with a manual clock. */
export async function sweepTurns(svc: Services, batch = 100): Promise<{ skipped: number }> {
  let skipped = 0;
  for (;;) {
    const due = await svc.store.dueTurns(isoNow(svc), batch);
    for (const { room, id } of due) if (await settleTurn(svc, room, id)) skipped++;
    if (due.length < batch) return { skipped };
  }
}

// ---- views ----

function turnsStateView(turnsRoom: TurnsRoom, current: TurnState | undefined) {
  const { config } = turnsRoom;
  return {
    status: turnsRoom.status,
    reason: turnsRoom.reason,
    round: turnsRoom.round,
    max_rounds: config.max_rounds,
    policy: config.policy,
    supervisor: config.supervisor,
    turn_timeout_s: config.turn_timeout_s,
    delay_s: config.delay_s,
    absent_after: config.absent_after,
    participants: turnsRoom.participants.map((p, slot) => ({ agent_id: p.agent_id, slot, status: p.status, timeouts: p.timeouts })),
    proposal: turnsRoom.proposal,
    current: current && isOpenTurn(current) ? publicTurn(current) : null,
  };
}

async function stateOf(reader: StoreReader, room: RoomRow) {
  const turnsRoom = await requireTurnsRoom(reader, room);
  const current = turnsRoom.current === null ? undefined : await reader.getTurn(room.uuid, turnsRoom.current);
  return { turnsRoom, current, view: turnsStateView(turnsRoom, current) };
}

/** GET /turns/current: the room's turn state and its open turn. */
export async function currentTurn(svc: Services, rawRoomId: string) {
  const room = await requireRoom(svc, rawRoomId);
  return (await stateOf(svc.store, room)).view;
}

/** GET /turns: the state and every turn, oldest first. */
export async function listTurns(svc: Services, rawRoomId: string) {
  const room = await requireRoom(svc, rawRoomId);
  return { ...(await stateOf(svc.store, room)).view, turns: (await svc.store.listTurns(room.uuid)).map(publicTurn) };
}

/** The newest messages (at most INPUT_MESSAGES_MAX) after the participant's last turn. */
async function inputMessages(reader: StoreReader, room: RoomRow, turnsRoom: TurnsRoom, agentId: string): Promise<Message[]> {
  const since = participant(turnsRoom, agentId)?.last_turn_seq ?? 0;
  // Usually a few messages are new: read those; only past the limit read the newest instead.
  const rows = await reader.listMessages(room.uuid, since, INPUT_MESSAGES_MAX + 1);
  return (rows.length > INPUT_MESSAGES_MAX ? await reader.tailMessages(room.uuid, INPUT_MESSAGES_MAX) : rows).map(messageFromRow);
}

const endedDetail = (t: TurnsRoom) =>
  t.status === "completed" ? "The conversation is complete. Stop: there are no more turns."
    : t.status === "cancelled" ? "The owner cancelled this room. Stop: there are no more turns."
      : `The room is blocked (${t.reason}); no turn is open until the owner resumes it. Poll again later, or stop.`;

/**
 * GET /turns/mine: this agent's open turn with the messages since its last turn; with `wait`,
 * held until it is this agent's turn (or the room ends).
 */
export async function myTurn(svc: Services, rawRoomId: string, input: MyTurnInput, signal?: AbortSignal) {
  const until = Date.now() + (input.wait ?? 0) * 1000;
  for (;;) {
    const room = await requireRoom(svc, rawRoomId);
    const { turnsRoom, current } = await stateOf(svc.store, room);
    requireParticipant(turnsRoom, input.agent_id);
    const now = isoNow(svc);
    const mine = current && isOpenTurn(current) && sameAgent(current.agent_id, input.agent_id) ? current : undefined;
    const base = { room_status: turnsRoom.status, input_messages: [] as Message[] };
    if (mine && mine.available_at <= now) {
      const action = mine.status === "claimed" ? "You hold its lease: reply" : `Claim it (my_turn with claim: true, or POST .../turns/${mine.id}/claim) before ${mine.claim_by}, then reply`;
      const what = mine.phase === "confirm" ? `Confirm turn: ${turnsRoom.proposal?.by ?? "someone"} proposed to finish. Reply result "complete" to confirm or "continue" to reject.` : `Round ${mine.round} of ${turnsRoom.config.max_rounds}.`;
      return { ...base, turn: publicTurn(mine), input_messages: await inputMessages(svc.store, room, turnsRoom, input.agent_id), detail: `It is your turn (${mine.id}). ${what} ${action}.` };
    }
    if (turnsRoom.status !== "active") return { ...base, turn: null, detail: endedDetail(turnsRoom) };
    const left = until - Date.now();
    if (left <= 0 || signal?.aborted) {
      if (mine) return { ...base, turn: publicTurn(mine), detail: `Your turn ${mine.id} opens at ${mine.available_at}; claim it then.` };
      const whose = current && isOpenTurn(current) ? `It is "${current.agent_id}"'s turn (${current.id}).` : "No turn is open.";
      return { ...base, turn: null, detail: `Not your turn yet. ${whose} Ask again with wait=30.` };
    }
    if (mine) {
      // Mine, after the delay: sleep until it opens (or the wait ends).
      const opensIn = Date.parse(mine.available_at) - svc.clock.now();
      await sleep(Math.min(left, Math.max(opensIn, 10)), signal);
    } else {
      await svc.notifier.waitFor(room.uuid, room.headSize, async () => (await svc.store.getRoom(room.uuid))?.headSize ?? 0, left, signal);
    }
    // The caller went away (or the server is closing): nobody reads the answer.
    if (signal?.aborted) return { room_status: turnsRoom.status, input_messages: [] as Message[], turn: null, detail: "The request was cancelled." };
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });

/** Only the assigned agent, not before available_at, atomically; a live re-claim gets the same token back. */
export function claimTurn(svc: Services, rawRoomId: string, rawTurnId: string, input: ClaimTurnInput) {
  const id = parseRoomId(rawRoomId);
  // Claims and replies join the posts' group commit: one transaction for what arrives in a turn.
  return queuedWrite(svc, id, async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const turn = await requireTurn(tx, room, rawTurnId);
    const proj = await loadProjection(tx, room, turn);
    const turnsRoom = proj.room!;
    requireParticipant(turnsRoom, input.agent_id);
    if (!sameAgent(turn.agent_id, input.agent_id)) {
      throw new ParleyError("not_your_turn", `Turn ${turn.id} belongs to "${turn.agent_id}". Wait for yours: my_turn over MCP, or GET /api/rooms/${room.uuid}/turns/mine?agent_id=${encodeURIComponent(input.agent_id)}&wait=30.`);
    }
    // Signed (or refused for a pinned agent) before anything is handed out, a re-claim included.
    const payload = { turn_id: turn.id };
    const sig = await signedWrite(svc, tx, room, "turn.claimed", input.agent_id, payload, input.sig);
    const now = tx.now;
    if (turn.status === "claimed") {
      if (turn.lease_until !== null && turn.lease_until > now) {
        return {
          turn: publicTurn(turn),
          lease_token: leaseToken(svc, room.uuid, turn.id, turn.claim_seq!),
          lease_until: turn.lease_until,
          input_messages: await inputMessages(tx, room, turnsRoom, input.agent_id),
          receipt: null as Receipt | null,
        };
      }
      throw new ParleyError("lease_expired", `Your lease on turn ${turn.id} ran out at ${turn.lease_until}; the turn is skipped. Wait for your next turn.`);
    }
    if (turn.status !== "ready") {
      throw new ParleyError("invalid_transition", `Turn ${turn.id} is ${turn.status}${turn.reason ? ` (${turn.reason})` : ""}. Wait for your next turn (my_turn, or GET .../turns/mine?agent_id=...&wait=30).`);
    }
    if (turn.claim_by <= now) {
      // Past its deadline: the turn timer skips it (reads and claims never do; due work is the timer's).
      throw new ParleyError("invalid_transition", `Turn ${turn.id} was not claimed by ${turn.claim_by} and is being skipped (timeout). Wait for your next turn (my_turn, or GET .../turns/mine?agent_id=...&wait=30).`);
    }
    if (turn.available_at > now) {
      const inS = Math.ceil((Date.parse(turn.available_at) - Date.parse(now)) / 1000);
      throw new ParleyError("turn_not_ready", `Turn ${turn.id} opens at ${turn.available_at} (in ${inS} s): claim it then.`);
    }
    const token = leaseToken(svc, room.uuid, turn.id, room.headSize + 1);
    const leaseUntil = txAfter(tx, turnsRoom.config.turn_timeout_s);
    const { appended } = await appendTurnEvents(svc, tx, room, proj, [
      { type: "turn.claimed", actor: input.agent_id, payload, server: { lease_until: leaseUntil, lease_hash: hashToken(token) }, sig },
    ]);
    return {
      turn: publicTurn(proj.turns.find((t) => t.id === turn.id)!),
      lease_token: token,
      lease_until: leaseUntil,
      input_messages: await inputMessages(tx, room, turnsRoom, input.agent_id),
      receipt: appended[0]!.receipt as Receipt | null,
    };
  });
}

/** The lease holder's reply: a message carrying the turn id, the turn's close, and what follows it. */
export async function replyTurn(svc: Services, caller: Caller, rawRoomId: string, rawTurnId: string, input: ReplyTurnInput) {
  const id = parseRoomId(rawRoomId);
  await takePostBudget(svc, caller, id, input.agent_id);
  return queuedWrite(svc, id, async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const turn = await requireTurn(tx, room, rawTurnId);
    const proj = await loadProjection(tx, room, turn);
    requireParticipant(proj.room!, input.agent_id);
    if (!sameAgent(turn.agent_id, input.agent_id) || !tokenMatches(turn.lease_hash, input.lease_token)) {
      throw new ParleyError("not_your_turn", `This lease token does not hold turn ${turn.id}${!sameAgent(turn.agent_id, input.agent_id) ? ` (it is "${turn.agent_id}"'s)` : ""}. Use the token your claim returned.`);
    }
    const now = tx.now;
    if (turn.status === "done") throw new ParleyError("invalid_transition", `You already replied to turn ${turn.id} (message ${turn.message_id}).`);
    if (turn.status === "skipped" && turn.reason === "timeout") {
      throw new ParleyError("lease_expired", `Your lease on turn ${turn.id} ran out at ${turn.lease_until} and the turn was skipped; your reply was not posted. Wait for your next turn.`);
    }
    if (turn.status !== "claimed") throw new ParleyError("invalid_transition", `Turn ${turn.id} is ${turn.status}${turn.reason ? ` (${turn.reason})` : ""}; your reply was not posted.`);
    if (turn.lease_until !== null && turn.lease_until <= now) {
      throw new ParleyError("lease_expired", `Your lease on turn ${turn.id} ran out at ${turn.lease_until}; your reply was not posted. Wait for your next turn.`);
    }
    if (turn.phase === "confirm" && input.result === "pass") {
      throw new ParleyError("validation_error", 'result: in a confirm turn reply "complete" to confirm the proposal, "continue" to reject it, or "blocked".');
    }
    const payload = { text: input.text, turn_id: turn.id, result: input.result };
    const sig = await signedWrite(svc, tx, room, "message.posted", input.agent_id, payload, input.sig);
    const { message, appended } = await appendMessage(svc, tx, room, input.agent_id, payload, sig);
    const outcome: Outcome = { kind: "reply", result: input.result, text: input.text, message_id: message.id };
    await appendTurnEvents(svc, tx, appended.room, proj, serverEvents(planAfterTurn(proj, turn, outcome, now)));
    const next = proj.room!.current === null ? undefined : proj.turns.find((t) => t.id === proj.room!.current);
    return {
      message_id: message.id,
      turn: publicTurn(proj.turns.find((t) => t.id === turn.id)!),
      next: next ? publicTurn(next) : null,
      room_status: proj.room!.status,
      receipt: appended.receipt,
    };
  });
}

/** The supervisor (policy supervisor) or the owner skips the open turn; it does not count as a timeout. */
export function skipTurn(svc: Services, rawRoomId: string, rawTurnId: string, input: SkipTurnInput, bearer: string | undefined) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const turn = await requireTurn(tx, room, rawTurnId);
    const proj = await loadProjection(tx, room, turn);
    const { supervisor, policy } = proj.room!.config;
    let actor = "owner";
    let sig: EventSig | undefined;
    if (input.agent_id === undefined) requireOwner(svc, room, bearer);
    else {
      if (policy !== "supervisor" || !sameAgent(input.agent_id, supervisor)) {
        throw new ParleyError("forbidden", `Only the supervisor${supervisor ? ` ("${supervisor}")` : " (none: this room decides by consensus)"} or the room owner may skip a turn.`);
      }
      actor = input.agent_id;
    }
    if (!isOpenTurn(turn)) throw new ParleyError("invalid_transition", `Turn ${turn.id} is ${turn.status}; only an open turn can be skipped.`);
    const steps = planAfterTurn(proj, turn, { kind: "skip", reason: actor === "owner" ? "owner" : "supervisor" }, tx.now);
    if (actor !== "owner") {
      sig = await signedWrite(svc, tx, room, steps[0]!.type, actor, steps[0]!.payload, input.sig);
    }
    const { appended } = await appendTurnEvents(svc, tx, room, proj, serverEvents(steps, { actor, sig }));
    return { ...turnsStateView(proj.room!, proj.turns.find((t) => t.id === proj.room!.current)), receipt: appended[0]!.receipt as Receipt | null };
  });
}

// ---- the owner ----

function ownerAction(svc: Services, rawRoomId: string, bearer: string | undefined, act: (proj: TurnsProjection, now: string) => NewEvent[]) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireRoom(svc, id, tx);
    requireOwner(svc, room, bearer);
    const proj = await loadProjection(tx, room);
    if (TERMINAL_TURNS_STATUSES.has(proj.room!.status)) {
      throw new ParleyError("room_closed", `This turns room is ${proj.room!.status} and read-only.`);
    }
    const events = act(proj, tx.now);
    const { appended } = await appendTurnEvents(svc, tx, room, proj, events);
    const current = proj.room!.current === null ? undefined : proj.turns.find((t) => t.id === proj.room!.current);
    return { ...turnsStateView(proj.room!, current), receipt: (appended[0]?.receipt ?? null) as Receipt | null };
  });
}

const byOwner = (steps: Step[]): NewEvent[] => serverEvents(steps, { actor: "owner" });

export const cancelTurns = (svc: Services, rawRoomId: string, bearer: string | undefined, reason?: string) =>
  ownerAction(svc, rawRoomId, bearer, () => [{ type: "room.cancelled", actor: "owner", payload: reason ? { reason } : {} }]);

export const resumeTurns = (svc: Services, rawRoomId: string, bearer: string | undefined) =>
  ownerAction(svc, rawRoomId, bearer, (proj, now) => {
    const refusal = resumeRefusal(proj.room!);
    if (refusal) throw new ParleyError("invalid_transition", refusal);
    const steps = planResume(proj, now);
    if (steps.at(-1)!.type === "room.blocked") {
      throw new ParleyError("invalid_transition", `All ${proj.room!.config.max_rounds} rounds are used: raise max_rounds first (POST .../turns/max-rounds {max_rounds}).`);
    }
    return byOwner(steps);
  });

export const raiseMaxRounds = (svc: Services, rawRoomId: string, bearer: string | undefined, maxRounds: number) =>
  ownerAction(svc, rawRoomId, bearer, (proj) => {
    const current = proj.room!.config.max_rounds;
    if (maxRounds <= current) throw new ParleyError("validation_error", `max_rounds: must be greater than the current ${current}.`);
    return [{ type: "room.rounds_raised", actor: "owner", payload: { max_rounds: maxRounds } }];
  });

export const reinstateParticipant = (svc: Services, rawRoomId: string, bearer: string | undefined, agentId: string) =>
  ownerAction(svc, rawRoomId, bearer, (proj) => {
    requireParticipant(proj.room!, agentId);
    if (participant(proj.room!, agentId)!.status !== "absent") throw new ParleyError("invalid_transition", `"${agentId}" is not absent.`);
    return [{ type: "participant.reinstated", actor: "owner", payload: { agent_id: participant(proj.room!, agentId)!.agent_id } }];
  });

/** A moderator note: a message from the owner, outside the turns. */
export function moderatorNote(svc: Services, rawRoomId: string, bearer: string | undefined, text: string) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    requireOwner(svc, room, bearer);
    await requireTurnsRoom(tx, room);
    const { message, appended } = await appendMessage(svc, tx, room, "owner", { text, moderator: true });
    return { ...message, receipt: appended.receipt };
  });
}

// ---- the passive monitor ----

/** GET /health of a turns room: status and alerts; reads only. */
export async function turnsHealth(svc: Services, rawRoomId: string) {
  const room = await requireRoom(svc, rawRoomId);
  const { turnsRoom, current, view } = await stateOf(svc.store, room);
  const replied = (await svc.store.lastTurns(room.uuid, 12)).filter((t) => t.message_id !== null).slice(-4);
  const replies = (await Promise.all(replied.map((t) => svc.store.listMessages(room.uuid, t.message_id! - 1, 1))))
    .flat()
    .map((m) => ({ agent_id: m.agentId, text: m.text }));
  return {
    status: turnsRoom.status,
    round: turnsRoom.round,
    max_rounds: turnsRoom.config.max_rounds,
    current: view.current,
    alerts: healthAlerts(turnsRoom, current && isOpenTurn(current) ? current : undefined, replies, isoNow(svc)),
  };
}
