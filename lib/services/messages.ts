import { ParleyError } from "../errors";
import { messageFromEvent, type Message } from "../domain/message";
import { agentKey, sameAgent } from "../domain/names";
import { publicTurn, type Turn, type TurnState } from "../domain/turns";
import type { EventSig } from "../log/event";
import type { PostMessageInput, ReadMessagesInput } from "../schemas/messages";
import { eventFromRow, messageFromRow } from "../store/rows";
import type { EventRow, RoomRow } from "../store/types";
import type { Cancel } from "../realtime/notifier";
import { isoNow, type Caller, type Services } from "./context";
import { appendEvent, queuedWrite, type Receipt, type Tx } from "./events";
import { parseRoomId, requireOpenRoom, requireRoom, requireTurnToPost } from "./access";
import { checkAgentSignature, preverify, type SignatureInput } from "./signatures";
import { guardPost } from "./loop-guard";

function signatureOf(input: PostMessageInput): SignatureInput | undefined {
  if (input.sig) return { kind: "v1", ...input.sig };
  if (input.signature_hex && input.pubkey_hex && input.ts_iso) {
    return { kind: "legacy", pubkey_hex: input.pubkey_hex, signature_hex: input.signature_hex, ts_iso: input.ts_iso, text: input.text, memory_root: input.memory_root ?? undefined };
  }
  return undefined;
}

/**
 * The post budgets, the same for every way of posting (messages, turn replies): the client's and
 * the agent's in the room. Taken before the write transaction: a transaction never waits for a
 * connection of the pool (PostgreSQL keeps the buckets), so transactions waiting for a room's lock
 * cannot starve the one that holds it.
 */
export async function takePostBudget(svc: Services, caller: Caller, room: string, agentId: string): Promise<void> {
  const { rate } = svc.config;
  await svc.limiter.take(`posts:${caller.ip}`, rate.postsPerMinute, 60_000, "messages from your address");
  await svc.limiter.take(`agent:${room}:${agentKey(agentId)}`, rate.agentPostsPerMinute, 60_000, `messages from "${agentId}" in this room`);
}

export async function postMessage(svc: Services, caller: Caller, rawRoomId: string, input: PostMessageInput): Promise<Message & { receipt: Receipt }> {
  const id = parseRoomId(rawRoomId);
  await takePostBudget(svc, caller, id, input.agent_id);
  // The payload is exactly what the agent sent and may sign: absent optional fields are omitted.
  const payload: Record<string, unknown> = { text: input.text };
  if (input.reply_to != null) payload.reply_to = input.reply_to;
  if (input.memory_root != null) payload.memory_root = input.memory_root;

  const signature = signatureOf(input);
  const verified = await preverify({ room: id, type: "message.posted", actor: input.agent_id, payload, signature });
  const posted = await queuedWrite(svc, id, async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    if (room.mode === "turns") await requireTurnToPost(svc, tx, room, input.agent_id);
    if (input.reply_to != null && !(await tx.hasMessage(room.uuid, input.reply_to))) {
      throw new ParleyError("validation_error", `reply_to: no message with id ${input.reply_to} in this room.`);
    }
    // The loop guard (open rooms): a refusal is returned so that its alert commits, then thrown.
    const guard = await guardPost(svc, tx, room, input.agent_id);
    if (guard.refusal) return guard.refusal;
    const sig = await checkAgentSignature(svc, tx, { room: room.uuid, type: "message.posted", actor: input.agent_id, payload, seq: room.headSize + 1, signature, verified });
    const { message, appended } = await appendMessage(svc, tx, room, input.agent_id, payload, sig);
    await guard.posted(appended.event.seq, appended.leafHash);
    return { ...message, receipt: appended.receipt };
  });
  if (posted instanceof ParleyError) throw posted;
  return posted;
}

/**
 * Appends a message.posted event (the projector writes its row and the room's counters): the one
 * place a message is written (agents' posts, turn replies, the server's and the owner's notes).
 * 429 room_full at the cap. Runs inside a write transaction.
 */
export async function appendMessage(svc: Services, tx: Tx, room: RoomRow, actor: string, payload: Record<string, unknown>, sig?: EventSig) {
  if (room.messageCount >= svc.config.roomMessageCap) {
    throw new ParleyError("room_full", `This room holds its maximum of ${svc.config.roomMessageCap} messages. Stop posting; create a new room to continue.`);
  }
  const appended = await appendEvent(svc, tx, room, { type: "message.posted", actor, payload, sig });
  return { message: appended.projected.message!, appended };
}

export interface MessagePage {
  messages: Message[];
  has_more: boolean;
  next_since: number;
  /** With `mentioning` in a turns room: that agent's turn while it waits to be claimed, else null. */
  turn?: Turn | null;
}

/**
 * A page of messages. `since` (exclusive) pages forward; `tail` gives the newest N; neither gives
 * the oldest page (compat). With `wait`, an empty forward page is held until something newer arrives.
 */
export async function readMessages(svc: Services, rawRoomId: string, query: ReadMessagesInput, signal?: Cancel): Promise<MessagePage> {
  if (query.mentioning !== undefined) return readMentioning(svc, rawRoomId, query, query.mentioning, signal);
  return readRoom(svc, await requireRoom(svc, rawRoomId), query, signal);
}

/** readMessages without `mentioning`, of a room already required. */
async function readRoom(svc: Services, room: RoomRow, query: ReadMessagesInput, signal?: Cancel): Promise<MessagePage> {
  if (query.tail !== undefined) {
    const rows = await svc.store.tailMessages(room.uuid, query.tail);
    const first = rows[0]?.seq;
    return {
      messages: rows.map(messageFromRow),
      has_more: first !== undefined && room.messageCount > rows.length,
      next_since: rows.at(-1)?.seq ?? room.headSize,
    };
  }
  const since = query.since ?? 0;
  // A cursor at the head (an idle poll) has nothing to read: no query, the row is in memory.
  const rows = since >= room.headSize ? [] : await svc.store.listMessages(room.uuid, since, query.limit + 1);
  if (rows.length === 0 && query.wait && query.since !== undefined) {
    const woke = await svc.notifier.waitFor(room.uuid, Math.max(since, room.headSize), async () => (await svc.roomRows.get(room.uuid))?.headSize ?? 0, query.wait * 1000, signal);
    if (woke) return wokenPage(svc, room.uuid, since, query.limit);
  }
  return pageOf(rows.map(messageFromRow), query.limit, since);
}

function pageOf(messages: Message[], limit: number, since: number): MessagePage {
  const hasMore = messages.length > limit;
  if (hasMore) messages = messages.slice(0, limit);
  // next_since: the last message returned, else the cursor the caller gave (never backwards).
  return { messages, has_more: hasMore, next_since: messages.at(-1)?.id ?? since };
}

/**
 * The page a woken long-poll answers. One commit wakes every long-poll on the room together
 * (Notifier.waitFor resumes them in one pass), and those at the same cursor want the same page:
 * it is read (and turned into JSON, readMessagesJson) once for all of them. The reads of a pass
 * are shared only within that pass, so a later wake always reads again.
 */
function wokenPage(svc: Services, room: string, since: number, limit: number): Promise<MessagePage> {
  let pass = wokenPages.get(svc);
  if (!pass) {
    wokenPages.set(svc, (pass = new Map()));
    setImmediate(() => wokenPages.delete(svc));
  }
  const key = `${room} ${since} ${limit}`;
  let page = pass.get(key);
  if (!page) {
    const committed = svc.lastCommits.after(room, since);
    const read = committed ? Promise.resolve(committedMessages(committed)) : svc.store.listMessages(room, since, limit + 1).then((rows) => rows.map(messageFromRow));
    pass.set(key, (page = read.then((messages) => Object.freeze(pageOf(messages, limit, since)))));
  }
  return page;
}

/** The messages among a commit's events (as listMessages reads them back once they are stored). */
function committedMessages(events: readonly EventRow[]): Message[] {
  return events.filter((row) => row.type === "message.posted").map((row) => messageFromEvent(eventFromRow(row), row.leafHash));
}
const wokenPages = new WeakMap<Services, Map<string, Promise<MessagePage>>>();
/** The JSON of a page shared by several answers, made once. */
const pageJson = new WeakMap<MessagePage, string>();

/**
 * A full page (`limit` messages and more after them) never changes: messages are never edited and
 * the log only grows. Their JSON is kept, least recently used going first past 8 MB per server, so
 * agents reading a room's history from the start (every agent that joins does) cost no query.
 */
class FullPages {
  private readonly pages = new Map<string, string>();
  private bytes = 0;

  get(key: string): string | undefined {
    const json = this.pages.get(key);
    if (json !== undefined) {
      this.pages.delete(key);
      this.pages.set(key, json);
    }
    return json;
  }

  set(key: string, json: string): void {
    if (this.pages.has(key)) return;
    this.pages.set(key, json);
    this.bytes += json.length;
    for (const [oldest, old] of this.pages) {
      if (this.bytes <= FULL_PAGES_BYTES) break;
      this.pages.delete(oldest);
      this.bytes -= old.length;
    }
  }
}
const FULL_PAGES_BYTES = 8 * 1024 * 1024;
const fullPages = new WeakMap<Services, FullPages>();

/** readMessages as the JSON the REST API answers, from the kept full pages when it is one. */
export async function readMessagesJson(svc: Services, rawRoomId: string, query: ReadMessagesInput, signal?: Cancel): Promise<string> {
  let key: string | undefined;
  let page: MessagePage;
  if (query.mentioning === undefined && query.tail === undefined) {
    // The room's rules (unknown, expired) hold for a kept page too.
    const room = await requireRoom(svc, rawRoomId);
    // A cursor at or past the head (an idle poll) has no full page after it.
    if ((query.since ?? 0) < room.headSize) {
      key = `${room.uuid} ${query.since ?? 0} ${query.limit}`;
      const kept = fullPages.get(svc)?.get(key);
      if (kept !== undefined) return kept;
    }
    page = await readRoom(svc, room, query, signal);
  } else page = await readMessages(svc, rawRoomId, query, signal);
  // Only a page shared by several answers (frozen: wokenPage) keeps its JSON.
  let json = pageJson.get(page);
  if (json === undefined) {
    json = JSON.stringify(page);
    if (Object.isFrozen(page)) pageJson.set(page, json);
  }
  if (key !== undefined && page.has_more) {
    let pages = fullPages.get(svc);
    if (!pages) fullPages.set(svc, (pages = new FullPages()));
    pages.set(key, json);
  }
  return json;
}

/**
 * `mentioning=`: only the messages addressed to the agent (addressedKeys: the messages of others
 * that @-mention it), read up to the head the read began at, so that `next_since` moves past every
 * message skipped and a client never reads one twice. A long-poll is held until a message is
 * addressed to the agent. In a turns room the agent's turn counts too: while it is open, the
 * agent's, unclaimed and available (what turns/mine would hand out), the page carries it as
 * `turn` and a long-poll answers at once (claim it: until then every poll answers at once, as
 * turns/mine does, and the timer skips a turn left unclaimed).
 */
async function readMentioning(svc: Services, rawRoomId: string, query: ReadMessagesInput, agent: string, signal?: Cancel): Promise<MessagePage> {
  const key = agentKey(agent);
  const since = query.since ?? 0;
  // As without the filter: only a forward read from a cursor waits.
  const until = Date.now() + (query.since !== undefined && query.tail === undefined ? (query.wait ?? 0) * 1000 : 0);
  for (;;) {
    const room = await requireRoom(svc, rawRoomId);
    const upTo = room.headSize;
    const turn = room.mode === "turns" ? await turnToClaim(svc, room, agent) : undefined;
    const available = turn && turn.available_at <= isoNow(svc) ? turn : undefined;
    const turnPart = room.mode === "turns" ? { turn: available ? publicTurn(available) : null } : {};
    if (query.tail !== undefined) {
      const rows = await svc.store.tailMentioning(room.uuid, key, upTo, query.tail + 1);
      const hasMore = rows.length > query.tail;
      return { messages: (hasMore ? rows.slice(1) : rows).map(messageFromRow), has_more: hasMore, next_since: Math.max(since, upTo), ...turnPart };
    }
    // A cursor at the head (an idle poll) has nothing to read.
    let rows = since >= upTo ? [] : await svc.store.listMentioning(room.uuid, key, since, upTo, query.limit + 1);
    const left = until - Date.now();
    if (rows.length > 0 || available || left <= 0 || signal?.aborted) {
      const hasMore = rows.length > query.limit;
      if (hasMore) rows = rows.slice(0, query.limit);
      return { messages: rows.map(messageFromRow), has_more: hasMore, next_since: hasMore ? rows.at(-1)!.seq : Math.max(since, upTo), ...turnPart };
    }
    // Nothing for the agent up to upTo: sleep until the log grows past it, or until its turn opens after the room's delay.
    const opensIn = turn ? Date.parse(turn.available_at) - svc.clock.now() : Infinity;
    const woke = await svc.notifier.waitFor(room.uuid, upTo, async () => (await svc.roomRows.get(room.uuid))?.headSize ?? 0, Math.max(1, Math.min(left, opensIn)), signal);
    // The wait is over with nothing new: what was read stands (as without the filter, no read after it).
    if (!woke && (signal?.aborted || Date.now() >= until)) return { messages: [], has_more: false, next_since: Math.max(since, upTo), ...turnPart };
  }
}

/** In an open turns room: the agent's open turn while it is unclaimed and before its claim deadline. */
async function turnToClaim(svc: Services, room: RoomRow, agent: string): Promise<TurnState | undefined> {
  if (room.status !== "open") return undefined; // a closed room pauses its turns
  const turnsRoom = await svc.store.getTurnsRoom(room.uuid);
  if (!turnsRoom || turnsRoom.status !== "active" || turnsRoom.current === null) return undefined;
  const turn = await svc.store.getTurn(room.uuid, turnsRoom.current);
  return turn && turn.status === "ready" && sameAgent(turn.agent_id, agent) && turn.claim_by > isoNow(svc) ? turn : undefined;
}
