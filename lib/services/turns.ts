/**
 * Turns mode (issue 6): the server makes every turn. Each transition is one event appended inside
 * one write transaction, and the projections are what the reducer of lib/domain/turns.ts makes of
 * the events (the verifier replays the same reducer); the rules of what comes next are the
 * planner's in the same module. The transaction holds the room's lock (across instances on
 * PostgreSQL), so of two concurrent claims the first one makes the lease and the second one finds
 * it (and gets the same token). Reads never write: a turn past its deadline is the timer's to skip.
 */
import { messageFromRow, messageToRow } from "../store/rows";
import crypto from "node:crypto";
import { ParleyError } from "../errors";
import type { Message } from "../domain/message";
import {
  cloneProjection, deadlineOf, healthAlerts, INPUT_MESSAGES_MAX, isOpenTurn, participant, planAfterTurn, planKickoff, planResume,
  publicTurn, resumeRefusal, TERMINAL_TURNS_STATUSES, type Outcome, type Step, type TurnsConfig, type TurnsProjection,
  turnsTouchedBy, type TurnsRoom, type TurnState,
} from "../domain/turns";
import { isExpired } from "../domain/room";
import { sameAgent } from "../domain/names";
import type { EventSig } from "../log/event";
import type { ClaimTurnInput, MyTurnBody, MyTurnInput, ReplyTurnInput, SkipTurnInput } from "../schemas/turns";
import { turnsProtocolCard } from "../instructions/turns";
import type { RoomRow, StoreReader } from "../store/types";
import type { Cancel } from "../realtime/notifier";
import { isoNow, type Caller, type Services } from "./context";
import { appendEvent, queuedWrite, txAfter, write, type Appended, type NewEvent, type Receipt, type Tx } from "./events";
import { appendMessage, takePostBudget } from "./messages";
import {
  hashToken, parseRoomId, parseSeqId, requireOpenRoom, requireOwner, requireParticipant, requireRoom, requireTurnsRoom, tokenMatches,
} from "./access";
import { pinnedKey, signedWrite } from "./signatures";


// ---- lease tokens ----

/**
 * A lease token is derived from the server key and the claim (room, turn, seq of the claim event),
 * so a live re-claim returns the same token while only its hash is stored. Every instance signs
 * with the same key, so every instance derives the same token.
 */
function leaseToken(svc: Services, room: string, turnId: number, claimSeq: number): string {
  return crypto.createHmac("sha256", svc.leaseSecret).update(`${room}/${turnId}/${claimSeq}`).digest("base64url");
}

// ---- claims waiting in my_turn, on this instance ----

/** A my_turn with wait and claim (unsigned), and the claim a reply made ahead for it: its receipt and lease token. */
interface ClaimWait {
  agentId: string;
  claimed?: { receipt: Receipt; token: string };
}
const claimWaits = (svc: Services) => (svc.claimWaits ??= new Map<string, Set<ClaimWait>>()) as Map<string, Set<ClaimWait>>;

/** Registered for the wait of one my_turn: closed when it answers, times out or its caller goes away. */
function waitToClaim(svc: Services, room: string, agentId: string): ClaimWait & { close(): void } {
  const waits = claimWaits(svc);
  const inRoom = waits.get(room) ?? new Set<ClaimWait>();
  waits.set(room, inRoom);
  const wait = { agentId, close: () => void (inRoom.delete(wait) && inRoom.size === 0 && waits.get(room) === inRoom && waits.delete(room)) };
  inRoom.add(wait);
  return wait;
}

// ---- the turns state a write left, by head ----

/**
 * What a committed turns write left a room at: its turns state and open turn at head
 * `room.headSize`. One writer per room and seq without gaps (across instances too) make a head
 * commit once, so the entry stays true for that head for ever: a reader that knows the room's head
 * (its room row, or the seq a commit published) uses it at that head only. A head this instance
 * did not write (another instance's commit, a plain post) misses, and the reader reads the store.
 * The entry is shared: readers never change it, writers take a copy.
 */
interface TurnsAt {
  room: Pick<RoomRow, "uuid" | "headSize" | "status" | "expiresAt">;
  turnsRoom: TurnsRoom;
  current: TurnState | undefined;
}
const TURNS_STATE_ROOMS = 10_000;
const turnsStates = (svc: Services) => svc.caches.of<TurnsAt>("turns-state", TURNS_STATE_ROOMS);
const turnsStateAt = (svc: Services, room: string, head: number) => turnsStates(svc).peek(room, String(head));

/**
 * Beside the state, by head too: the room's newest messages, as far back as this instance's
 * writes have seen every append (messages never change), which is the next turn's input without a
 * read. Bounded (a message may hold 10,000 characters): 16 messages and 32,000 characters a room,
 * the oldest go first, for 500 rooms; an input that reaches back further is read.
 */
interface KeptMessages {
  /** Every message with `from` < seq <= the head, oldest first. */
  from: number;
  list: Message[];
}
const KEPT_MESSAGES = { rooms: 500, perRoom: 16, chars: 32_000 };
const keptMessages = (svc: Services) => svc.caches.of<KeptMessages>("turns-messages", KEPT_MESSAGES.rooms);

/** What a write leaves: the state at its last append, the head before its first, the messages it posted. */
interface WriteLeft {
  state: TurnsAt;
  headBefore: number;
  posted: Message[];
}

/** `before` and `after`: the room row as the write found it and as its appends left it. */
function stateAfter(before: RoomRow, after: RoomRow, proj: TurnsProjection, posted: Message[] = []): WriteLeft {
  const turnsRoom = proj.room!;
  const current = turnsRoom.current === null ? undefined : proj.turns.find((t) => t.id === turnsRoom.current);
  const room = { uuid: after.uuid, headSize: after.headSize, status: after.status, expiresAt: after.expiresAt };
  return { state: { room, turnsRoom, current }, headBefore: before.headSize, posted };
}

/**
 * Keeps what a committed write left. Its messages are all there is between the head it found and
 * the head it left; they extend the messages kept at the head it found (a write of this instance
 * before it), else they start afresh from there.
 */
function keepState(svc: Services, { state, headBefore, posted }: WriteLeft): void {
  const { uuid, headSize } = state.room;
  turnsStates(svc).set(uuid, String(headSize), state);
  const known = keptMessages(svc).peek(uuid, String(headBefore));
  let from = known ? known.from : headBefore;
  const list = known ? [...known.list, ...posted] : posted;
  let chars = list.reduce((n, m) => n + m.text.length, 0);
  let drop = 0;
  while (drop < list.length && (list.length - drop > KEPT_MESSAGES.perRoom || chars > KEPT_MESSAGES.chars)) {
    chars -= list[drop]!.text.length;
    from = list[drop++]!.id;
  }
  keptMessages(svc).set(uuid, String(headSize), { from, list: drop ? list.slice(drop) : list });
}

/**
 * A turns write that keeps the state it leaves once it has committed (not before: a rolled-back
 * write must leave nothing; a group commit may run `fn` twice, the answer is the last run's).
 * Writes of one group commit resolve in their order, so each finds the one before it kept.
 */
async function turnsWrite<T>(svc: Services, room: string, queued: boolean, fn: (tx: Tx) => Promise<{ value: T; after?: WriteLeft }>): Promise<T> {
  const { value, after } = queued ? await queuedWrite(svc, room, fn) : await write(svc, [room], fn);
  if (after) keepState(svc, after);
  return value;
}

// ---- reading the projection ----

async function requireTurn(reader: Pick<StoreReader, "getTurn">, room: RoomRow, rawId: string): Promise<TurnState> {
  const id = parseSeqId(rawId);
  const turn = id === undefined ? undefined : await reader.getTurn(room.uuid, id);
  if (!turn) throw new ParleyError("turn_not_found", `No turn ${String(rawId).slice(0, 20)} in this room. GET /api/rooms/${room.uuid}/turns/current shows the open one.`);
  return turn;
}

/**
 * A write's projection and the turn it names (by id), from the state this instance's last write
 * left when the room is still at that head (`room` is read under the room's lock: the truth), else
 * from the store. Copies: the write changes them in place.
 */
async function loadTurnWrite(svc: Services, tx: Tx, room: RoomRow, rawTurnId: string): Promise<{ proj: TurnsProjection; turn: TurnState }> {
  const known = room.mode === "turns" ? turnsStateAt(svc, room.uuid, room.headSize) : undefined;
  const id = parseSeqId(rawTurnId);
  if (known && id !== undefined && known.current?.id === id) {
    const proj = cloneProjection({ room: known.turnsRoom, turns: [known.current] });
    return { proj, turn: proj.turns[0]! };
  }
  const turn = await requireTurn(tx, room, rawTurnId);
  return { proj: await loadProjection(tx, room, turn), turn };
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

/**
 * Appends events in order; the projector applies each to `proj` (in place) and writes what it
 * changed: the turns room and the turns the event touches (a turn it opens joins `proj`).
 */
async function appendTurnEvents(svc: Services, tx: Tx, room: RoomRow, proj: TurnsProjection, events: NewEvent[]): Promise<{ room: RoomRow; appended: Appended[] }> {
  const appended: Appended[] = [];
  for (const event of events) {
    const part: TurnsProjection = { room: proj.room, turns: turnsTouchedBy(event, proj.turns) };
    const a = await appendEvent(svc, tx, room, event, { turns: part });
    for (const t of part.turns) if (!proj.turns.includes(t)) proj.turns.push(t);
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
  return turnsWrite(svc, uuid, false, async (tx) => {
    const room = await tx.getRoom(uuid);
    if (!room || room.status !== "open" || isExpired(room, tx.now)) return { value: false }; // closed: paused until reopened
    const turn = await tx.getTurn(uuid, turnId);
    if (!turn || !isOpenTurn(turn)) return { value: false };
    const deadline = deadlineOf(turn);
    if (deadline === null || deadline > tx.now) return { value: false };
    const proj = await loadProjection(tx, room, turn);
    const written = await appendTurnEvents(svc, tx, room, proj, serverEvents(planAfterTurn(proj, turn, { kind: "skip", reason: "timeout" }, tx.now)));
    return { value: true, after: stateAfter(room, written.room, proj) };
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

/**
 * The newest messages (at most INPUT_MESSAGES_MAX) after the participant's last turn: from those the
 * writes kept at the state's head when they reach back that far, else read.
 */
async function inputMessages(svc: Services, reader: StoreReader, state: Pick<TurnsAt, "room" | "turnsRoom">, agentId: string): Promise<Message[]> {
  const since = participant(state.turnsRoom, agentId)?.last_turn_seq ?? 0;
  const kept = keptMessages(svc).peek(state.room.uuid, String(state.room.headSize));
  if (kept && since >= kept.from) return kept.list.filter((m) => m.id > since);
  // Usually a few messages are new: read those; only past the limit read the newest instead.
  const rows = await reader.listMessages(state.room.uuid, since, INPUT_MESSAGES_MAX + 1);
  return (rows.length > INPUT_MESSAGES_MAX ? await reader.tailMessages(state.room.uuid, INPUT_MESSAGES_MAX) : rows).map(messageFromRow);
}

const endedDetail = (t: TurnsRoom) =>
  t.status === "completed" ? "The conversation is complete. Stop: there are no more turns."
    : t.status === "cancelled" ? "The owner cancelled this room. Stop: there are no more turns."
      : `The room is blocked (${t.reason}); no turn is open until the owner resumes it. Poll again later, or stop.`;

/**
 * my_turn (GET or POST /turns/mine, MCP my_turn): this agent's open turn with the messages since
 * its last turn; with `wait`, held until it is this agent's turn (or the room ends). With `claim`,
 * a turn open to this agent now is also claimed, and the answer carries the claim's lease token,
 * lease and receipt (and the input messages as of the claim): one request instead of two.
 */
export async function myTurn(svc: Services, rawRoomId: string, input: MyTurnBody, signal?: Cancel) {
  return takeTurn(svc, rawRoomId, input, input.wait ? openWait(svc, parseRoomId(rawRoomId), input) : undefined, signal);
}

interface Wait {
  watch: ReturnType<typeof watchTurns>;
  ahead?: ClaimWait;
  close(): void;
}

/**
 * What a waiting my_turn listens with, opened before its first read (so no commit between that
 * read and the wait is missed): the room's commits and, for an unsigned claim, its registration
 * for the claim a reply may make ahead (claimAhead).
 */
function openWait(svc: Services, room: string, input: MyTurnBody): Wait {
  const watch = watchTurns(svc, room, input.agent_id);
  const ahead = input.claim === true && input.sig === undefined ? waitToClaim(svc, room, input.agent_id) : undefined;
  return {
    watch,
    ahead,
    close() {
      watch.close();
      ahead?.close();
    },
  };
}

/** my_turn over `wait` (closed here), from the turns state `known` when the caller has it at the room's head. */
async function takeTurn(svc: Services, rawRoomId: string, input: MyTurnBody, wait: Wait | undefined, signal?: Cancel, known?: TurnsAt) {
  const claiming = input.claim === true;
  const until = Date.now() + (input.wait ?? 0) * 1000;
  let mine: Awaited<ReturnType<typeof turnFor>>;
  try {
    mine = await turnFor(svc, rawRoomId, input, until, wait, signal, claiming, known);
  } finally {
    wait?.close();
  }
  // Claim only a turn that is open for this agent now; one that opens later says when.
  if (!claiming || mine.turn === null || "lease_token" in mine || signal?.aborted || mine.turn.available_at > isoNow(svc)) return mine;
  return withLease(mine, await claimTurn(svc, rawRoomId, String(mine.turn.id), { agent_id: input.agent_id, sig: input.sig }));
}

/** A claiming my_turn's answer: the turn as the claim left it, with its lease. */
function withLease<T extends { detail: string }>(
  mine: T, claimed: { turn: ReturnType<typeof publicTurn>; input_messages: Message[]; lease_token: string; lease_until: string; receipt: Receipt | null },
) {
  return {
    ...mine,
    turn: claimed.turn,
    input_messages: claimed.input_messages,
    lease_token: claimed.lease_token,
    lease_until: claimed.lease_until,
    receipt: claimed.receipt,
    detail: `${mine.detail} You hold its lease until ${claimed.lease_until}: answer with reply_turn (MCP) or POST .../turns/${claimed.turn.id}/reply, with the lease_token, before then.`,
  };
}

/**
 * With `claiming`, a turn open to the agent now is answered without its input messages or what to
 * do next (the claim gives those), unless `ahead` was claimed for it: then with the lease.
 */
async function turnFor(
  svc: Services, rawRoomId: string, input: MyTurnInput, until: number, wait: Wait | undefined,
  signal: Cancel | undefined, claiming: boolean, known?: TurnsAt,
) {
  /** The state a wake-up brought (from memory), else read. */
  let woke = known;
  for (;;) {
    const state = woke && !isExpired(woke.room, isoNow(svc)) ? woke : await readTurnsState(svc, rawRoomId);
    const { room, turnsRoom, current } = state;
    woke = undefined;
    requireParticipant(turnsRoom, input.agent_id);
    const now = isoNow(svc);
    const mine = current && isOpenTurn(current) && sameAgent(current.agent_id, input.agent_id) ? current : undefined;
    const base = { room_status: turnsRoom.status, input_messages: [] as Message[] };
    if (mine && mine.available_at <= now) {
      const what = mine.phase === "confirm" ? `Confirm turn: ${turnsRoom.proposal?.by ?? "someone"} proposed to finish. Reply result "complete" to confirm or "continue" to reject.` : `Round ${mine.round} of ${turnsRoom.config.max_rounds}.`;
      const detail = `It is your turn (${mine.id}). ${what}`;
      if (claiming) {
        const answer = { ...base, turn: publicTurn(mine), detail };
        const claimed = wait?.ahead?.claimed;
        if (!claimed || mine.status !== "claimed" || mine.claim_seq !== claimed.receipt.seq || mine.lease_until! <= now) return answer;
        return withLease(answer, {
          turn: answer.turn,
          lease_token: claimed.token,
          lease_until: mine.lease_until!,
          input_messages: await inputMessages(svc, svc.store, state, input.agent_id),
          receipt: claimed.receipt,
        });
      }
      const action = mine.status === "claimed" ? "You hold its lease: reply" : `Claim it (my_turn with claim: true, or POST .../turns/${mine.id}/claim) before ${mine.claim_by}, then reply`;
      return { ...base, turn: publicTurn(mine), input_messages: await inputMessages(svc, svc.store, state, input.agent_id), detail: `${detail} ${action}.` };
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
      woke = await wait?.watch.next(room.headSize, left, signal);
    }
    // The caller went away (or the server is closing): nobody reads the answer.
    if (signal?.aborted) return { room_status: turnsRoom.status, input_messages: [] as Message[], turn: null, detail: "The request was cancelled." };
  }
}

/**
 * The room row and its turns state: from what a write left at the row's head, else from the store.
 * The row is read, not taken from the room-row cache: another instance's commit reaches that cache
 * with its NOTIFY, and the state at an older head would answer for a turn already opened.
 */
async function readTurnsState(svc: Services, rawRoomId: string): Promise<TurnsAt> {
  const room = await requireRoom(svc, rawRoomId, { getRoom: (uuid) => svc.store.getRoom(uuid) });
  const known = room.mode === "turns" ? turnsStateAt(svc, room.uuid, room.headSize) : undefined;
  if (known) return known;
  const { turnsRoom, current } = await stateOf(svc.store, room);
  return { room, turnsRoom, current };
}

/** Whether `state` answers a waiting my_turn of `agentId`: its turn is open, or the room stopped. */
const answersWait = (state: TurnsAt, agentId: string) =>
  state.turnsRoom.status !== "active" || (state.current !== undefined && isOpenTurn(state.current) && sameAgent(state.current.agent_id, agentId));

/**
 * The commits of a room, heard from before my_turn first reads it (so none between that read and a
 * wait is missed), for waiting until one matters to `agentId`. A head this instance wrote (the
 * other agent's claim or reply) is judged from the state that write left: not this agent's turn,
 * and the wait goes on without a read. Any other head (another instance's commit, a plain post, a
 * deletion) ends the wait with undefined, and the caller reads the store; so do the timeout and an
 * abort. Judged on the next turn of the event loop, once the writer has kept its state and after
 * the commit's fan-out to the room's streams (as Notifier.waitFor resumes its waits).
 */
function watchTurns(svc: Services, room: string, agentId: string) {
  let heard = 0;
  let waiting: ((seq: number) => void) | undefined;
  const unsubscribe = svc.notifier.subscribe(room, (seq) => {
    heard = Math.max(heard, seq);
    waiting?.(seq);
  });
  return {
    close: unsubscribe,
    /** Resolves with the state of a head past `afterSeq` that answers the agent, or undefined (read again). */
    next(afterSeq: number, timeoutMs: number, signal?: Cancel): Promise<TurnsAt | undefined> {
      if (signal?.aborted || timeoutMs <= 0) return Promise.resolve(undefined);
      return new Promise((resolve) => {
        let judging = false;
        const done = (state: TurnsAt | undefined) => {
          waiting = undefined;
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve(state);
        };
        const judge = () => {
          judging = false;
          if (waiting !== onCommit) return; // settled meanwhile
          const state = turnsStateAt(svc, room, heard);
          if (!state) return done(undefined);
          if (answersWait(state, agentId)) return done(state);
          afterSeq = heard; // not this agent's business: keep waiting
        };
        const onCommit = (seq: number) => {
          if (seq <= afterSeq || judging) return;
          judging = true;
          setImmediate(judge);
        };
        const onAbort = () => done(undefined);
        const timer = setTimeout(() => done(undefined), timeoutMs);
        signal?.addEventListener("abort", onAbort, { once: true });
        waiting = onCommit;
        // A commit heard since the caller's read (or before it, past what it read).
        if (heard > afterSeq) onCommit(heard);
      });
    },
  };
}

const sleep = (ms: number, signal?: Cancel) =>
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
  return turnsWrite(svc, id, true, async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const { proj, turn } = await loadTurnWrite(svc, tx, room, rawTurnId);
    const turnsRoom = proj.room!;
    requireParticipant(turnsRoom, input.agent_id);
    if (!sameAgent(turn.agent_id, input.agent_id)) {
      throw new ParleyError("not_your_turn", `Turn ${turn.id} belongs to "${turn.agent_id}". Wait for yours: my_turn over MCP, or GET /api/rooms/${room.uuid}/turns/mine?agent_id=${encodeURIComponent(input.agent_id)}&wait=30.`);
    }
    // Signed (or refused for a pinned agent) before anything is handed out, a re-claim included.
    const sig = await signedWrite(svc, tx, room, "turn.claimed", input.agent_id, { turn_id: turn.id }, input.sig);
    const now = tx.now;
    if (turn.status === "claimed") {
      if (turn.lease_until !== null && turn.lease_until > now) {
        return {
          value: {
            turn: publicTurn(turn),
            lease_token: leaseToken(svc, room.uuid, turn.id, turn.claim_seq!),
            lease_until: turn.lease_until,
            input_messages: await inputMessages(svc, tx, { room, turnsRoom }, input.agent_id),
            receipt: null as Receipt | null,
          },
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
    // The messages as they were before the claim (the claim adds none): what my_turn handed over.
    const messages = await inputMessages(svc, tx, { room, turnsRoom }, input.agent_id);
    const claim = await appendClaim(svc, tx, room, proj, turn, input.agent_id, sig);
    return {
      value: {
        turn: publicTurn(proj.turns.find((t) => t.id === turn.id)!),
        lease_token: claim.token,
        lease_until: claim.leaseUntil,
        input_messages: messages,
        receipt: claim.receipt as Receipt | null,
      },
      after: stateAfter(room, claim.room, proj),
    };
  });
}

/** The turn.claimed event of `turn` (ready, open now, checked by the caller) and the lease it makes. */
async function appendClaim(svc: Services, tx: Tx, room: RoomRow, proj: TurnsProjection, turn: TurnState, agentId: string, sig: EventSig | undefined) {
  const token = leaseToken(svc, room.uuid, turn.id, room.headSize + 1);
  const leaseUntil = txAfter(tx, proj.room!.config.turn_timeout_s);
  const written = await appendTurnEvents(svc, tx, room, proj, [
    { type: "turn.claimed", actor: agentId, payload: { turn_id: turn.id }, server: { lease_until: leaseUntil, lease_hash: hashToken(token) }, sig },
  ]);
  return { token, leaseUntil, receipt: written.appended[0]!.receipt, room: written.room };
}

/**
 * A reply that opens the next turn claims it, in its own transaction, for a my_turn with claim
 * waiting for that turn on this instance (unsigned: an agent with a pinned key signs its own
 * claims, and its wait claims once it wakes). The claim is the waiting agent's own request, made
 * ahead: the same event, checks and lease as if it had claimed on waking, with one transaction
 * and one signed checkpoint a turn fewer. The wait finds the claim's receipt when it wakes
 * (`ClaimWait.claimed`); a wait that went away meanwhile leaves a lease a later claim of the same
 * agent gets back, as when a claim's answer is lost.
 */
async function claimAhead(svc: Services, tx: Tx, room: RoomRow, proj: TurnsProjection): Promise<RoomRow> {
  const turnsRoom = proj.room!;
  const next = turnsRoom.current === null ? undefined : proj.turns.find((t) => t.id === turnsRoom.current);
  if (turnsRoom.status !== "active" || !next || next.status !== "ready" || next.available_at > tx.now || next.claim_by <= tx.now) return room;
  let wait: ClaimWait | undefined;
  for (const w of claimWaits(svc).get(room.uuid) ?? []) if (sameAgent(w.agentId, next.agent_id)) wait ??= w;
  if (!wait || (await pinnedKey(tx, room.uuid, wait.agentId))) return room;
  const claim = await appendClaim(svc, tx, room, proj, next, wait.agentId, undefined);
  wait.claimed = { receipt: claim.receipt, token: claim.token };
  return claim.room;
}

/**
 * The lease holder's reply: a message carrying the turn id, the turn's close, and what follows it;
 * with `my_next`, then my_turn for the same agent's next turn (`signal`: its wait's caller went
 * away). Once the reply is committed it is answered: a next turn that cannot be taken says why in
 * `my_next.detail`.
 */
export async function replyTurn(svc: Services, caller: Caller, rawRoomId: string, rawTurnId: string, input: ReplyTurnInput, signal?: Cancel) {
  const id = parseRoomId(rawRoomId);
  const next: MyTurnBody | undefined = input.my_next && { agent_id: input.agent_id, ...input.my_next };
  if (next?.claim && input.sig) {
    throw new ParleyError("validation_error", "my_next.claim: a signed reply cannot claim the next turn unsigned. Wait with my_next.wait, then claim it with a signed claim.");
  }
  await takePostBudget(svc, caller, id, input.agent_id);
  // Listening from before the commit: the next turn may be this agent's at once (the others absent).
  const wait = next?.wait ? openWait(svc, id, next) : undefined;
  let left: TurnsAt | undefined;
  let replied: Awaited<ReturnType<typeof reply>>;
  try {
    replied = await reply(svc, id, rawTurnId, input, (state) => (left = state));
  } catch (err) {
    wait?.close();
    throw err;
  }
  if (!next) return replied;
  try {
    return { ...replied, my_next: await takeTurn(svc, id, next, wait, signal, left) };
  } catch (err) {
    if (!(err instanceof ParleyError)) throw err;
    const detail = `Your reply was posted (message ${replied.message_id}), but your next turn could not be taken: ${err.detail}`;
    return { ...replied, my_next: { room_status: replied.room_status, turn: null, input_messages: [] as Message[], detail } };
  }
}

function reply(svc: Services, id: string, rawTurnId: string, input: ReplyTurnInput, left: (state: TurnsAt) => void) {
  return turnsWrite(svc, id, true, async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const { proj, turn } = await loadTurnWrite(svc, tx, room, rawTurnId);
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
    const written = await appendTurnEvents(svc, tx, appended.room, proj, serverEvents(planAfterTurn(proj, turn, outcome, now)));
    const end = await claimAhead(svc, tx, written.room, proj);
    // Kept as a read would give it back.
    const after = stateAfter(room, end, proj, [messageFromRow(messageToRow(room.uuid, message))]);
    left(after.state);
    const next = after.state.current;
    return {
      value: {
        message_id: message.id,
        turn: publicTurn(proj.turns.find((t) => t.id === turn.id)!),
        next: next ? publicTurn(next) : null,
        room_status: proj.room!.status,
        receipt: appended.receipt,
      },
      after,
    };
  });
}

/** The supervisor (policy supervisor) or the owner skips the open turn; it does not count as a timeout. */
export function skipTurn(svc: Services, rawRoomId: string, rawTurnId: string, input: SkipTurnInput, bearer: string | undefined) {
  const id = parseRoomId(rawRoomId);
  return turnsWrite(svc, id, false, async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const { proj, turn } = await loadTurnWrite(svc, tx, room, rawTurnId);
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
    const written = await appendTurnEvents(svc, tx, room, proj, serverEvents(steps, { actor, sig }));
    const after = stateAfter(room, written.room, proj);
    return { value: { ...turnsStateView(after.state.turnsRoom, after.state.current), receipt: written.appended[0]!.receipt as Receipt | null }, after };
  });
}

// ---- the owner ----

function ownerAction(svc: Services, rawRoomId: string, bearer: string | undefined, act: (proj: TurnsProjection, now: string) => NewEvent[]) {
  const id = parseRoomId(rawRoomId);
  return turnsWrite(svc, id, false, async (tx) => {
    const room = await requireRoom(svc, id, tx);
    requireOwner(svc, room, bearer);
    const proj = await loadProjection(tx, room);
    if (TERMINAL_TURNS_STATUSES.has(proj.room!.status)) {
      throw new ParleyError("room_closed", `This turns room is ${proj.room!.status} and read-only.`);
    }
    const events = act(proj, tx.now);
    const written = await appendTurnEvents(svc, tx, room, proj, events);
    const after = stateAfter(room, written.room, proj);
    return { value: { ...turnsStateView(after.state.turnsRoom, after.state.current), receipt: (written.appended[0]?.receipt ?? null) as Receipt | null }, after };
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
