// The PostgreSQL store: several stateless instances on one database. One writer per room across
// instances comes from row locks on the rooms taken in sorted order at the start of each write
// transaction; a commit is announced to every instance by one NOTIFY (lib/realtime/pg-listen.ts).
import path from "node:path";
import { randomUUID } from "node:crypto";
import { PROJECT_ROOT } from "../paths";
// The driver is loaded when a PostgreSQL store opens (import() below): a server on SQLite never
// holds it in memory.
import type pg from "pg";
import { ParleyError } from "../errors";
import { RetryWithSavepoints, type DeliveryRow, type DeliveryStatus, type EventRow, type Heads, type MessageRow, type RoomAfterAppend, type RoomListQuery, type RoomRow, type Store, type StoreReader, type StoreWriter, type WebhookRow, type WriteOptions } from "./repository";
import * as rows from "./rows";
import { ROOM_COLS } from "./rows";
import type { TurnsRoom, TurnState } from "../domain/turns";
import { ROOM_GONE } from "../realtime/notifier";
import { adminPgReader, adminPgWriter } from "./admin-pg";
import { pgBuckets } from "./pg-buckets";

const MIGRATIONS = path.join(PROJECT_ROOT, "drizzle", "pg");
/** The advisory lock key that serialises migrations when several instances start at once. */
const MIGRATION_LOCK = 7_201_126;
export const NOTIFY_CHANNEL = "parley_commits";
/** NOTIFY payloads are limited to 8000 bytes; a batch over many rooms is announced in chunks. */
const NOTIFY_CHUNK = 100;
/**
 * One NOTIFY payload: the store that committed (its instance wakes its own readers at commit and
 * skips its own announcements) and the rooms' new heads.
 */
export interface Announcement {
  from: string;
  heads: [room: string, seq: number][];
}

/** One NOTIFY payload, `from` first: the start of every payload of one store is ownAnnouncements(origin). */
export const announcement = (from: string, heads: Announcement["heads"]) => JSON.stringify({ from, heads } satisfies Announcement);
/** How every payload a store announces begins (its instance skips them unparsed). */
export const ownAnnouncements = (origin: string) => announcement(origin, []).slice(0, -"[]}".length);

// Column lists, read back under the names the row types use.
const EVENT_COLS = `room, seq, ts, type, actor, payload, server, prev, sig, leaf_hash AS "leafHash", checkpoint`;
const MESSAGE_COLS = `room, seq, agent_id AS "agentId", text, ts, reply_to AS "replyTo", mentions, mention_keys AS "mentionKeys", auth, key_ref AS "keyRef",
  pubkey_hex AS "pubkeyHex", signature_hex AS "signatureHex", ts_iso AS "tsIso", memory_root AS "memoryRoot", hash`;
const THREAD_COLS = `id, subject, subject_key AS "subjectKey", current_value AS "currentValue", status, opened_by AS "openedBy",
  opened_by_auth AS "openedByAuth", opener_key AS "openerKey", revisions_count AS "revisionsCount", last_revision AS "lastRevision",
  confirmations, created_at AS "createdAt", updated_at AS "updatedAt"`;
const REVISION_COLS = `id, thread_id AS "threadId", kind, value, author_agent_id AS "authorAgentId", auth, via,
  source_msg_id AS "sourceMsgId", quote, created_at AS "createdAt"`;
const DISCREPANCY_COLS = `id, thread_id AS "threadId", description, severity, source_msg_id AS "sourceMsgId", recorded_by AS "recordedBy",
  status, resolved_by AS "resolvedBy", created_at AS "createdAt", resolved_at AS "resolvedAt"`;
const HANDSHAKE_COLS = `id, agent_id AS "agentId", context_hash AS "contextHash", auth, pubkey_hex AS "pubkeyHex",
  signature_hex AS "signatureHex", ts, nonce, created_at AS "createdAt"`;
const TASK_COLS = `id, status, priority, claimant, lease_until AS "leaseUntil", lease_hash AS "leaseHash", data`;
const AGENT_COLS = `agent_id AS "agentId", capabilities, auth, key_ref AS "keyRef", last_seen AS "lastSeen", lost`;
const TURN_COLS = `id, agent_id AS "agentId", status, deadline, lease_hash AS "leaseHash", data`;
const WEBHOOK_COLS = `id, room, kind, url, events, format, mentioning, room_url AS "roomUrl", secret_hash AS "secretHash", created_at AS "createdAt",
  consecutive_dead AS "consecutiveDead", disabled_at AS "disabledAt", disabled_reason AS "disabledReason", expiry_alerted_for AS "expiryAlertedFor"`;
/** A delivery's columns, qualified by `t` where a join would make a name ambiguous. */
const deliveryCols = (t = "") => `${t}id, ${t}webhook_id AS "webhookId", ${t}room, ${t}seq, ${t}event_type AS "eventType", ${t}payload, ${t}status,
  ${t}attempts, ${t}next_attempt_at AS "nextAttemptAt", ${t}lease_until AS "leaseUntil", ${t}claim, ${t}last_status AS "lastStatus",
  ${t}last_error AS "lastError", ${t}created_at AS "createdAt", ${t}updated_at AS "updatedAt", ${t}delivered_at AS "deliveredAt"`;
const DELIVERY_COLS = deliveryCols();

/** The public list's orders, by the columns its indexes hold (schema-pg.ts: equal to last_activity_at etc. in a public room). */
const SORT_SQL = {
  active: "public_activity DESC",
  new: "created_at DESC",
  messages: "public_messages DESC, public_activity DESC",
  agents: "public_agents DESC, public_activity DESC",
} as const;

/** Error codes and classes that mean the database cannot be reached (as opposed to a bad query). */
const UNREACHABLE_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH", "57P01", "57P02", "57P03", "53300"]);
export function isUnreachable(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  if (!e) return false;
  if (e.code && (UNREACHABLE_CODES.has(e.code) || e.code.startsWith("08"))) return true;
  return /Connection terminated|connection timeout|Client has encountered a connection error|the database system is (starting up|shutting down)/i.test(e.message ?? "");
}

export const databaseUnavailable = () =>
  new ParleyError("database_unavailable", "The database cannot be reached right now; nothing was written. Retry in a few seconds.", { retryAfter: 2 });

/** Runs a database call and turns "cannot reach the database" into 503 database_unavailable. */
async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isUnreachable(err)) throw databaseUnavailable();
    throw err;
  }
}

type Queryable = Pick<pg.ClientBase, "query">;

function readerOn(db: Queryable): StoreReader {
  const all = async <T>(text: string, values: unknown[] = [], name?: string): Promise<T[]> =>
    (await db.query<T & pg.QueryResultRow>(name ? { name, text, values } : { text, values })).rows;
  const one = async <T>(text: string, values: unknown[] = [], name?: string): Promise<T | undefined> => (await all<T>(text, values, name))[0];
  const liveRoom = `r.status = 'open' AND r.expires_at > $1`;
  return {
    ...adminPgReader(db),
    getRoom: (uuid) => one<RoomRow>(`SELECT ${ROOM_COLS} FROM rooms WHERE uuid = $1`, [uuid], "get_room"),
    getRooms: (uuids) => all<RoomRow>(`SELECT ${ROOM_COLS} FROM rooms WHERE uuid = ANY($1::text[])`, [uuids], "get_rooms"),
    async listPublicRooms(q: RoomListQuery) {
      const values: unknown[] = [q.now];
      let where = `is_public AND NOT hidden AND status <> 'expired' AND expires_at > $1`;
      if (q.q) {
        values.push(`%${q.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
        where += ` AND description LIKE $2`; // backslash is LIKE's default escape in PostgreSQL
      }
      const list = await all<RoomRow>(
        `SELECT ${ROOM_COLS} FROM rooms WHERE ${where} ORDER BY ${SORT_SQL[q.sort]} LIMIT ${Number(q.limit)} OFFSET ${Number(q.offset)}`,
        values,
      );
      const total = await one<{ n: number }>(`SELECT count(*)::int AS n FROM rooms WHERE ${where}`, values);
      return { rows: list, total: total?.n ?? 0 };
    },
    listEvents: (room, since, limit) =>
      all(`SELECT ${EVENT_COLS} FROM events WHERE room = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [room, since, Math.min(limit, 2 ** 31 - 1)], "list_events"),
    async leafHashes(room, size, after = 0) {
      const list = await all<{ h: string }>(`SELECT leaf_hash AS h FROM events WHERE room = $1 AND seq > $2 AND seq <= $3 ORDER BY seq`, [room, after, size]);
      return list.map((r) => r.h);
    },
    checkpointAt: async (room, size) => (await one<{ c: string }>(`SELECT checkpoint AS c FROM events WHERE room = $1 AND seq = $2`, [room, size]))?.c,
    agentKey: (room, agent) => one(`SELECT pubkey_hex AS "pubkeyHex" FROM room_agents WHERE room = $1 AND agent_id = $2`, [room, agent], "agent_key"),
    async expiredRooms(now, limit) {
      const list = await all<{ uuid: string }>(`SELECT uuid FROM rooms WHERE expires_hour <= left($1, 13) AND expires_at <= $1 AND status <> 'expired' LIMIT $2`, [now, limit]);
      return list.map((r) => r.uuid);
    },
    async counts() {
      const r = await one<{ rooms: number; events: number }>(
        `SELECT (SELECT count(*)::int FROM rooms WHERE status <> 'expired') AS rooms, (SELECT count(*)::int FROM events) AS events`,
      );
      return r ?? { rooms: 0, events: 0 };
    },
    ping: async () => void (await db.query("SELECT 1")),

    listMessages: (room, since, limit) =>
      all(`SELECT ${MESSAGE_COLS} FROM messages WHERE room = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [room, since, Math.min(limit, 2 ** 31 - 1)], "list_messages"),
    tailMessages: async (room, limit) =>
      (await all<MessageRow>(`SELECT ${MESSAGE_COLS} FROM messages WHERE room = $1 ORDER BY seq DESC LIMIT $2`, [room, limit], "tail_messages")).reverse(),
    // The keys are a JSON array: ? matches one element exactly, whatever the name holds.
    listMentioning: (room, key, since, upTo, limit) =>
      all(
        `SELECT ${MESSAGE_COLS} FROM messages WHERE room = $1 AND seq > $2 AND seq <= $3 AND mention_keys <> '[]' AND mention_keys::jsonb ? $4 ORDER BY seq LIMIT $5`,
        [room, since, upTo, key, Math.min(limit, 2 ** 31 - 1)],
        "list_mentioning",
      ),
    tailMentioning: async (room, key, upTo, limit) =>
      (await all<MessageRow>(
        `SELECT ${MESSAGE_COLS} FROM messages WHERE room = $1 AND seq <= $2 AND mention_keys <> '[]' AND mention_keys::jsonb ? $3 ORDER BY seq DESC LIMIT $4`,
        [room, upTo, key, limit],
        "tail_mentioning",
      )).reverse(),
    hasMessage: async (room, seq) => (await one(`SELECT 1 FROM messages WHERE room = $1 AND seq = $2`, [room, seq])) !== undefined,

    async getThread(room, id) {
      const row = await one<rows.ThreadRow>(`SELECT ${THREAD_COLS} FROM threads WHERE room = $1 AND id = $2`, [room, id]);
      return row && { thread: rows.toThread(row), openerKey: row.openerKey };
    },
    listThreads: async (room) => (await all<rows.ThreadRow>(`SELECT ${THREAD_COLS} FROM threads WHERE room = $1 ORDER BY id`, [room])).map(rows.toThread),
    listRevisions: async (room, threadId) =>
      (threadId === undefined
        ? await all<rows.RevisionRow>(`SELECT ${REVISION_COLS} FROM revisions WHERE room = $1 ORDER BY id`, [room])
        : await all<rows.RevisionRow>(`SELECT ${REVISION_COLS} FROM revisions WHERE room = $1 AND thread_id = $2 ORDER BY id`, [room, threadId])
      ).map(rows.toRevision),
    listDiscrepancies: async (room) =>
      (await all<rows.DiscrepancyRow>(`SELECT ${DISCREPANCY_COLS} FROM discrepancies WHERE room = $1 ORDER BY id`, [room])).map(rows.toDiscrepancy),
    listHandshakes: async (room) =>
      (await all<rows.HandshakeRow>(`SELECT ${HANDSHAKE_COLS} FROM handshakes WHERE room = $1 ORDER BY id`, [room])).map(rows.toHandshake),

    getTask: async (room, id) => {
      const row = await one<rows.TaskRow>(`SELECT ${TASK_COLS} FROM tasks WHERE room = $1 AND id = $2`, [room, id], "get_task");
      return row && rows.toTask(row);
    },
    listTasks: async (room, status) =>
      (status === undefined
        ? await all<rows.TaskRow>(`SELECT ${TASK_COLS} FROM tasks WHERE room = $1 ORDER BY id`, [room])
        : await all<rows.TaskRow>(`SELECT ${TASK_COLS} FROM tasks WHERE room = $1 AND status = $2 ORDER BY id`, [room, status])
      ).map(rows.toTask),
    openTasksAtPriority: async (room, priority, limit, offset) =>
      (await all<rows.TaskRow>(`SELECT ${TASK_COLS} FROM tasks WHERE room = $1 AND status = 'open' AND priority = $2 ORDER BY id LIMIT $3 OFFSET $4`, [room, priority, limit, offset], "open_tasks")).map(rows.toTask),
    listBoardAgents: async (room) =>
      (await all<rows.BoardAgentRow>(`SELECT ${AGENT_COLS} FROM board_agents WHERE room = $1 ORDER BY agent_id`, [room])).map(rows.toBoardAgent),
    getBoardAgent: async (room, agentId) => {
      const row = await one<rows.BoardAgentRow>(`SELECT ${AGENT_COLS} FROM board_agents WHERE room = $1 AND agent_id = $2`, [room, agentId], "get_board_agent");
      return row && rows.toBoardAgent(row);
    },
    expiredLeases: (now, limit) =>
      all(`SELECT t.room, t.id FROM tasks t JOIN rooms r ON r.uuid = t.room WHERE t.status = 'claimed' AND t.lease_until <= $1 AND ${liveRoom} LIMIT $2`, [now, limit]),
    silentAgents: (cutoff, now, limit) =>
      all(`SELECT a.room, a.agent_id AS "agentId" FROM board_agents a JOIN rooms r ON r.uuid = a.room WHERE NOT a.lost AND a.last_seen <= $2 AND ${liveRoom} LIMIT $3`, [now, cutoff, limit]),

    getTurnsRoom: async (room) => {
      const row = await one<rows.TurnsRoomRow>(`SELECT status, data FROM turn_rooms WHERE room = $1`, [room], "get_turns_room");
      return row && rows.toTurnsRoom(row);
    },
    getTurn: async (room, id) => {
      const row = await one<rows.TurnRow>(`SELECT ${TURN_COLS} FROM turns WHERE room = $1 AND id = $2`, [room, id], "get_turn");
      return row && rows.toTurn(row);
    },
    listTurns: async (room) => (await all<rows.TurnRow>(`SELECT ${TURN_COLS} FROM turns WHERE room = $1 ORDER BY id`, [room])).map(rows.toTurn),
    lastTurns: async (room, limit) =>
      (await all<rows.TurnRow>(`SELECT ${TURN_COLS} FROM turns WHERE room = $1 ORDER BY id DESC LIMIT $2`, [room, limit])).map(rows.toTurn).reverse(),
    dueTurns: (now, limit) =>
      all(`SELECT t.room, t.id FROM turns t JOIN rooms r ON r.uuid = t.room WHERE t.status IN ('ready', 'claimed') AND t.deadline <= $1 AND ${liveRoom} LIMIT $2`, [now, limit]),

    getWebhook: (room, id) => one<WebhookRow>(`SELECT ${WEBHOOK_COLS} FROM webhooks WHERE room = $1 AND id = $2`, [room, id], "get_webhook"),
    // Rows for one room: the append hook reads them inside every append's transaction.
    listWebhooks: (room) => all<WebhookRow>(`SELECT ${WEBHOOK_COLS} FROM webhooks WHERE room = $1 ORDER BY created_at, id`, [room], "list_webhooks"),
    listDeliveries: (webhookId, limit) =>
      all<DeliveryRow>(`SELECT ${DELIVERY_COLS} FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY created_at DESC, seq DESC NULLS LAST, id LIMIT $2`, [webhookId, limit]),
    async deliveryCounts(webhookId) {
      const counts: Record<DeliveryStatus, number> = { pending: 0, retrying: 0, delivered: 0, dead: 0 };
      for (const r of await all<{ status: DeliveryStatus; n: number }>(`SELECT status, count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 GROUP BY status`, [webhookId])) {
        counts[r.status] = r.n;
      }
      return counts;
    },
    async roomsNearExpiry(now, until, limit) {
      const list = await all<{ uuid: string }>(
        `SELECT DISTINCT r.uuid FROM webhooks w JOIN rooms r ON r.uuid = w.room
         WHERE w.kind = 'alerts' AND w.disabled_at IS NULL AND r.status <> 'expired' AND r.expires_at > $1 AND r.expires_at <= $2
           AND (w.expiry_alerted_for IS NULL OR w.expiry_alerted_for <> r.expires_at)
         LIMIT $3`,
        [now, until, limit],
      );
      return list.map((r) => r.uuid);
    },
  };
}


/** A transaction's mode, and why it cannot commit (a statement failed outside a savepoint). */
interface TxState {
  optimistic: boolean;
  aborted?: unknown;
  /** Room agents known to have their row (room + "\n" + agent key), committed: kept per store. */
  knownAgents: Set<string>;
  /** Those this transaction made sure of, added to knownAgents once it commits. */
  agents: string[];
  /**
   * The agents who have posted in a room (room_agents rows with a first_seq), for the rooms this
   * instance knows all of (it created them; kept per store and grown by its commits). Such a set is
   * current while its size is the room's agent_count as the lock statement read it (another
   * instance's new agent raises the count): a new agent's row is then held, not inserted by a
   * statement of its own that the whole batch waits for.
   */
  roomAgents: Map<string, Set<string>>;
  /** The agents this transaction added to rooms of roomAgents (room, agent key), added to their sets once it commits. */
  joined: [string, string][];
  /** Rooms this transaction created: roomAgents gets an empty set for each once it commits. */
  created: string[];
  /** What the lock statement read of each locked room, while no statement of the transaction has changed it. */
  locked: Map<string, LockedRoom>;
  /** Writes held back, to go in one statement with the commit's announcement (see FLUSH_HELD). */
  held: Held;
  /** While a write of a batch run without savepoints runs: how to undo its changes to the held turn rows (heldMark). */
  heldUndo?: (() => void)[];
}

/** Rows written at the end of a transaction, or before a statement that touches their tables. */
interface Held {
  messages: MessageRow[];
  events: EventRow[];
  rooms: (readonly [string, RoomAfterAppend])[];
  /** Used signature nonces (room, pubkey, nonce, seq); held only in a batch run without savepoints (a replay found at the flush runs the batch again with them). */
  nonces: [string, string, string, number][];
  /**
   * The last state saved of each turns room and turn of the transaction, by room and by room + "\n"
   * + id, made into rows at the flush: a turn's events save them several times (the projector saves
   * after each event), and only the last is written. A saved state is not changed after its write
   * (each write works on its own copy of the projection; keepState's copy is read-only).
   */
  turnRooms: Map<string, readonly [room: string, turnsRoom: TurnsRoom]>;
  turns: Map<string, readonly [room: string, turn: TurnState]>;
  /** Agents' first posts in rooms whose agents this instance knows (TxState.roomAgents). */
  agents: { room: string; agentId: string; firstSeq: number }[];
}

const noneHeld = (): Held => ({ messages: [], events: [], rooms: [], nonces: [], turnRooms: new Map(), turns: new Map(), agents: [] });

/**
 * What a write of a batch run without savepoints adds to Held, taken away again if it fails: the
 * lists' lengths, and how to put back each turn row it sets (kept as it sets them, not by copying
 * the batch's maps for every write).
 */
function heldMark(state: TxState) {
  state.heldUndo = [];
  return { messages: state.held.messages.length, nonces: state.held.nonces.length, agents: state.held.agents.length, undo: state.heldUndo };
}
function backToMark(held: Held, mark: ReturnType<typeof heldMark>): void {
  held.messages.length = Math.min(mark.messages, held.messages.length);
  held.nonces.length = Math.min(mark.nonces, held.nonces.length);
  held.agents.length = Math.min(mark.agents, held.agents.length);
  for (let i = mark.undo.length - 1; i >= 0; i--) mark.undo[i]!();
}

/** Sets a held turn row; while a write's mark is open, how to put back what it replaces is kept. */
function setHeld<V>(state: TxState, map: Map<string, V>, key: string, value: V): void {
  if (state.heldUndo) {
    const before = map.get(key);
    state.heldUndo.push(before === undefined ? () => map.delete(key) : () => map.set(key, before));
  }
  map.set(key, value);
}

/** Puts the announced heads back as they were before a savepoint (undefined: there were none). */
function restore(heads: Heads, before: Heads | undefined): void {
  heads.clear();
  if (before) for (const [room, seq] of before) heads.set(room, seq);
}

/** A locked room as the transaction's first statement read it. */
interface LockedRoom {
  row?: RoomRow;
  /** Whether the room has any webhook. */
  hasWebhooks?: boolean;
  /** The keys pinned to the room's agents (agent id → pubkey hex). */
  keys?: Record<string, string>;
  /** Its agent_count when locked (kept when a statement changes the row). */
  agentCount: number;
}

/**
 * Locks a write's rooms, in one fixed order (two instances' batches over the same rooms cannot
 * deadlock), and reads in the same statement what most writes then ask of each room: its row,
 * whether it has webhooks, and its pinned keys. A batch of posts over many rooms pays one
 * statement for them instead of three per post.
 */
const LOCK_ROOMS = `SELECT ${ROOM_COLS},
    EXISTS (SELECT 1 FROM webhooks w WHERE w.room = rooms.uuid) AS "hasWebhooks",
    (SELECT coalesce(json_object_agg(a.agent_id, a.pubkey_hex), '{}') FROM room_agents a WHERE a.room = rooms.uuid AND a.pubkey_hex IS NOT NULL) AS "keys"
  FROM rooms WHERE uuid = ANY($1::text[]) ORDER BY uuid FOR UPDATE`;

/** Statements that change what LockedRoom holds: any write to the rooms, webhooks or pinned keys. */
const CHANGES_ROOMS = /\brooms\b/i;
const CHANGES_WEBHOOKS = /\bwebhooks\b/i;
/** Statements that read or write what Held holds: those rows are written first. */
const TOUCHES_HELD = /\b(messages|events|rooms|signature_nonces|turn_rooms|turns|room_agents)\b/i;

/**
 * A transaction's appends in one statement: its message rows, event rows, rooms' new heads, used
 * nonces and turn states, each table's rows as one JSON array of objects keyed by their columns
 * (serialised natively, where pg's array parameters escaped every element in JavaScript), with the
 * NOTIFY payloads that announce them, delivered with the commit and never without it. Its text is
 * fixed (empty arrays write nothing), so it is prepared once per connection.
 */
const FLUSH_HELD = `WITH m AS (
    INSERT INTO messages (room, seq, agent_id, text, ts, reply_to, mentions, mention_keys, auth, key_ref, pubkey_hex, signature_hex, ts_iso, memory_root, hash)
    SELECT * FROM json_to_recordset($1::json) AS x(room text, seq int, "agentId" text, text text, ts text, "replyTo" int, mentions text,
      "mentionKeys" text, auth text, "keyRef" text, "pubkeyHex" text, "signatureHex" text, "tsIso" text, "memoryRoot" text, hash text)
  ), e AS (
    INSERT INTO events (room, seq, ts, type, actor, payload, server, prev, sig, leaf_hash, checkpoint)
    SELECT * FROM json_to_recordset($2::json) AS x(room text, seq int, ts text, type text, actor text, payload text, server text, prev text,
      sig text, "leafHash" text, checkpoint text)
  ), h AS (
    UPDATE rooms AS r SET head_size = v."headSize", head_leaf = v."headLeaf", head_root = v."headRoot", frontier = v.frontier,
      checkpoint = v.checkpoint, status = v.status, message_count = v."messageCount", agent_count = v."agentCount",
      last_activity_at = v."lastActivityAt", expires_at = v."expiresAt"
    FROM json_to_recordset($3::json) AS v(uuid text, "headSize" int, "headLeaf" text, "headRoot" text, frontier text, checkpoint text,
      status text, "messageCount" int, "agentCount" int, "lastActivityAt" text, "expiresAt" text)
    WHERE r.uuid = v.uuid
  ), n AS (
    INSERT INTO signature_nonces (room, pubkey_hex, nonce, seq)
    SELECT x->>0, x->>1, x->>2, (x->>3)::int FROM json_array_elements($6::json) AS x
  ), tr AS (
    INSERT INTO turn_rooms (room, status, data) SELECT * FROM json_to_recordset($7::json) AS x(room text, status text, data text)
    ON CONFLICT (room) DO UPDATE SET status = excluded.status, data = excluded.data
  ), t AS (
    INSERT INTO turns (room, id, agent_id, status, deadline, lease_hash, data)
    SELECT * FROM json_to_recordset($8::json) AS x(room text, id int, "agentId" text, status text, deadline text, "leaseHash" text, data text)
    ON CONFLICT (room, id) DO UPDATE SET agent_id = excluded.agent_id, status = excluded.status, deadline = excluded.deadline,
      lease_hash = excluded.lease_hash, data = excluded.data
  ), a AS (
    INSERT INTO room_agents (room, agent_id, first_seq) SELECT * FROM json_to_recordset($9::json) AS x(room text, "agentId" text, "firstSeq" int)
    ON CONFLICT (room, agent_id) DO UPDATE SET first_seq = excluded.first_seq WHERE room_agents.first_seq = 0
  )
  SELECT pg_notify($4, p) FROM unnest($5::text[]) AS p`;

function flushValues(held: Held, announce: readonly string[]): unknown[] {
  return [
    // Rows built with exactly their columns' keys (rows.ts): serialised as they are (a list of keys
    // would send V8's JSON.stringify down its slow path).
    JSON.stringify(held.messages),
    JSON.stringify(held.events),
    // The heads are whole room rows: only the columns the update writes are copied.
    JSON.stringify(held.rooms.map(([uuid, h]) => ({
      uuid, headSize: h.headSize, headLeaf: h.headLeaf, headRoot: h.headRoot, frontier: h.frontier, checkpoint: h.checkpoint, status: h.status,
      messageCount: h.messageCount, agentCount: h.agentCount, lastActivityAt: h.lastActivityAt, expiresAt: h.expiresAt,
    }))),
    NOTIFY_CHANNEL,
    announce,
    JSON.stringify(held.nonces),
    JSON.stringify(Array.from(held.turnRooms.values(), ([room, r]) => ({ room, ...rows.turnsRoomRow(r) }))),
    JSON.stringify(Array.from(held.turns.values(), ([room, t]) => ({ room, ...rows.turnRow(t) }))),
    JSON.stringify(held.agents),
  ];
}
/** Past this many, knownAgents starts again empty (a miss costs one statement). */
const KNOWN_AGENTS_MAX = 200_000;
/** Rooms whose agents are all known here (TxState.roomAgents); past it the oldest is forgotten (its new agents then cost a statement each). */
const ROOM_AGENTS_MAX = 20_000;

/**
 * The writer of one transaction. A savepoint (group commit: one per queued write) is opened only
 * before its write's first statement that is not a SELECT: most queued writes that fail, fail on a
 * check before writing anything, and two round trips per write are saved. A statement that fails
 * while its savepoint is not open has aborted the whole transaction: `aborted` then holds its
 * error, and the transaction is rolled back rather than committed.
 *
 * While no savepoint is pending or open, the rows a batch's posts and turns write (Held) are held
 * back and written by one statement with the commit's NOTIFY (FLUSH_HELD); the rooms' rows,
 * webhooks and pins come from the lock statement (LOCK_ROOMS). A batch of posts over many rooms is
 * then four statements in two round trips: BEGIN with the lock, the flush with COMMIT.
 */
type PgWriter = StoreWriter & {
  /** Writes what is held, with `announce` to be delivered by the commit, and commits: one round trip. */
  commit(announce: readonly string[]): Promise<void>;
};

/**
 * Two statements sent one after the other without waiting (the pool's connections pipeline): one
 * round trip for both, and one write to the socket (its stream is corked while both are
 * submitted: each write to PostgreSQL wakes its backend, and the main thread, preempted in the
 * syscall, waited there for a core). Waits for both answers (neither is left to fail unheard) and
 * throws the first failure. After a failed statement in a transaction PostgreSQL answers a COMMIT
 * with a rollback, not an error: the first statement's failure is what the caller sees.
 */
async function both<A, B>(raw: pg.PoolClient, first: () => Promise<A>, second: () => Promise<B>): Promise<[A, B]> {
  const stream = (raw as unknown as { connection?: { stream?: { cork?(): void; uncork?(): void } } }).connection?.stream;
  stream?.cork?.();
  let sent: [Promise<A>, Promise<B>];
  try {
    sent = [first(), second()];
  } finally {
    stream?.uncork?.();
  }
  const [a, b] = await Promise.allSettled(sent);
  if (a.status === "rejected") throw a.reason;
  if (b.status === "rejected") throw b.reason;
  return [a.value, b.value];
}

/**
 * The writer of one pooled connection, made once per connection (not its hundred methods again
 * for every transaction): the function it returns gives it a transaction's heads and state.
 */
function writerOf(raw: pg.PoolClient): (heads: Heads, state: TxState) => PgWriter {
  let heads!: Heads;
  let state!: TxState;
  let savepoints = 0;
  /** The savepoint to open before the next write, and the one that is open. */
  let pending: string | undefined;
  let open: string | undefined;
  /** Statements that may have written, so far (optimistic mode tells a failed check from a failed write by it). */
  let writes = 0;
  const query = async (config: string | pg.QueryConfig, values?: unknown[]) => {
    const text = typeof config === "string" ? config : config.text;
    const reads = /^\s*SELECT\b/i.test(text);
    // What is held is written before any statement reads or changes its tables (in a batch run
    // without savepoints that counts as a write of the write running now, which then, if it
    // fails, runs the batch again with savepoints: rare, and never wrong).
    if (text !== FLUSH_HELD && TOUCHES_HELD.test(text)) await flushHeld();
    if (!reads) {
      writes++;
      if (CHANGES_ROOMS.test(text)) for (const locked of state.locked.values()) locked.row = undefined;
      if (CHANGES_WEBHOOKS.test(text)) for (const locked of state.locked.values()) locked.hasWebhooks = undefined;
    }
    if (pending !== undefined && !reads) {
      await raw.query(`SAVEPOINT ${pending}`);
      open = pending;
      pending = undefined;
    }
    try {
      return await raw.query(config as pg.QueryConfig, values);
    } catch (err) {
      // Outside an open savepoint, a failed statement has aborted the whole transaction.
      if (open === undefined) state.aborted ??= state.optimistic ? new RetryWithSavepoints() : err;
      throw err;
    }
  };
  const client = { query } as unknown as Queryable;
  const run = async (text: string, values: unknown[], name?: string) => (await client.query(name ? { name, text, values } : { text, values })).rowCount ?? 0;
  /** Writes what is held back so far, and announces `announce` with the commit: one statement, outside any savepoint (none is open while rows are held). */
  async function flushHeld(announce: readonly string[] = []): Promise<void> {
    const held = state.held;
    if (held.messages.length + held.events.length + held.rooms.length + held.nonces.length + held.turnRooms.size + held.turns.size + held.agents.length + announce.length === 0) return;
    state.held = noneHeld();
    await client.query({ name: "flush_held", text: FLUSH_HELD, values: flushValues(held, announce) });
  }
  /** Whether rows are held back now: while no savepoint is pending or open (a plain write, or a batch run without savepoints). */
  const holds = () => pending === undefined && open === undefined;
  /** Adds rows to Held: written with the batch's other rows, or at once (inside the write's savepoint) when savepoints are on. */
  async function hold(add: (held: Held) => void): Promise<void> {
    add(state.held);
    if (!holds()) await flushHeld();
  }
  const reader = readerOn(client);
  const writer: PgWriter = {
    ...reader,
    ...adminPgWriter(client),
    // flushHeld sends its statement before its first await (no statement goes before it while
    // nothing is held back), so COMMIT follows it on the wire.
    commit: async (announce) => void (await both(raw, () => flushHeld(announce), () => raw.query("COMMIT"))),
    // A locked room's row, webhooks and pins as the lock statement read them, until a statement changes them.
    getRoom: async (uuid) => state.locked.get(uuid)?.row ?? reader.getRoom(uuid),
    listWebhooks: async (room) => (state.locked.get(room)?.hasWebhooks === false ? [] : reader.listWebhooks(room)),
    async agentKey(room, agent) {
      const keys = state.locked.get(room)?.keys;
      if (keys === undefined) return reader.agentKey(room, agent);
      const pubkeyHex = keys[agent];
      return pubkeyHex === undefined ? undefined : { pubkeyHex };
    },
    insertRoom: async (r) => {
      state.created.push(r.uuid);
      await run(
        `INSERT INTO rooms (uuid, description, is_public, protocol_mode, mode, status, owner_token_hash, created_at, last_activity_at, expires_at,
           message_count, agent_count, head_size, head_leaf, head_root, frontier, checkpoint, arbiter_watermark, arbiter_calls, arbiter_tokens,
           arbiter_items, last_extraction_error)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22)`,
        [r.uuid, r.description, r.isPublic, r.protocolMode, r.mode, r.status, r.ownerTokenHash, r.createdAt, r.lastActivityAt, r.expiresAt,
          r.messageCount, r.agentCount, r.headSize, r.headLeaf, r.headRoot, r.frontier, r.checkpoint, r.arbiterWatermark, r.arbiterCalls,
          r.arbiterTokens, r.arbiterItems, r.lastExtractionError],
      );
    },
    // Held, with the events, for the transaction's last statement.
    async updateRoomsAfterAppend(list) {
      if (!holds()) throw new Error("updateRoomsAfterAppend: a batch's heads are written after its savepoints");
      state.held.rooms.push(...list);
    },
    async updateArbiterState(uuid, s) {
      const cols = { arbiterWatermark: "arbiter_watermark", arbiterCalls: "arbiter_calls", arbiterTokens: "arbiter_tokens", arbiterItems: "arbiter_items", lastExtractionError: "last_extraction_error" } as const;
      const set = (Object.keys(s) as (keyof typeof cols)[]).filter((k) => s[k] !== undefined);
      if (set.length === 0) return;
      await run(`UPDATE rooms SET ${set.map((k, i) => `${cols[k]} = $${i + 2}`).join(", ")} WHERE uuid = $1`, [uuid, ...set.map((k) => s[k])]);
    },
    async insertEvents(rows) {
      if (!holds()) throw new Error("insertEvents: a batch's events are written after its savepoints");
      state.held.events.push(...rows);
      for (const e of rows) heads.set(e.room, Math.max(heads.get(e.room) ?? 0, e.seq));
    },
    // An agent who posted in the room before has its row for good (until the room goes): only its
    // first post in the room, as this instance knows it, costs a statement.
    async addAgent(room, agent, seq) {
      const key = `${room}\n${agent}`;
      if (state.knownAgents.has(key)) return false;
      const posted = state.roomAgents.get(room);
      const locked = state.locked.get(room);
      if (posted && locked && holds()) {
        if (posted.size === locked.agentCount) {
          if (posted.has(agent) || state.joined.some(([r, a]) => r === room && a === agent)) return false;
          const [joined, agents] = [state.joined.length, state.agents.length];
          state.held.agents.push({ room, agentId: agent, firstSeq: seq });
          state.joined.push([room, agent]);
          state.agents.push(key);
          state.heldUndo?.push(() => void ((state.joined.length = joined), (state.agents.length = agents)));
          return true;
        }
        state.roomAgents.delete(room); // another instance added agents: no longer all known here
      }
      const added = (await run(
        `INSERT INTO room_agents (room, agent_id, first_seq) VALUES ($1, $2, $3)
         ON CONFLICT (room, agent_id) DO UPDATE SET first_seq = excluded.first_seq WHERE room_agents.first_seq = 0`,
        [room, agent, seq],
        "add_agent",
      )) === 1;
      state.agents.push(key);
      return added;
    },
    async useNonce(room, pubkey, nonce, seq) {
      if (state.optimistic && holds()) {
        if (state.held.nonces.some(([r, p, n]) => r === room && p === pubkey && n === nonce)) return false;
        state.held.nonces.push([room, pubkey, nonce, seq]);
        return true;
      }
      return (await run(`INSERT INTO signature_nonces (room, pubkey_hex, nonce, seq) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, [room, pubkey, nonce, seq], "use_nonce")) === 1;
    },
    async pinAgentKey(room, agentId, pubkeyHex) {
      const locked = state.locked.get(room);
      if (locked) locked.keys = undefined;
      await run(
        `INSERT INTO room_agents (room, agent_id, first_seq, pubkey_hex) VALUES ($1, $2, 0, $3)
         ON CONFLICT (room, agent_id) DO UPDATE SET pubkey_hex = excluded.pubkey_hex`,
        [room, agentId, pubkeyHex],
      );
    },
    async deleteRoomData(uuid, keepTombstone) {
      // The cascade removes every row the room had but its log, which has no foreign key
      // (schema-pg.ts); a tombstone is a fresh rooms row with no data.
      await run(`DELETE FROM events WHERE room = $1`, [uuid]);
      await run(`DELETE FROM messages WHERE room = $1`, [uuid]);
      const gone = await one<RoomRow>(`DELETE FROM rooms WHERE uuid = $1 RETURNING ${ROOM_COLS}`, [uuid]);
      // Announced with the commit: the other instances end the room's streams and drop its kept row.
      if (gone) heads.set(uuid, ROOM_GONE);
      state.roomAgents.delete(uuid);
      if (gone && keepTombstone) {
        await writer.insertRoom({ ...gone, status: "expired", description: "", frontier: "", checkpoint: "" });
      }
    },
    insertMessage: (m) => hold((held) => held.messages.push(m)),
    async saveThread(room, t, openerKey) {
      const r = rows.threadRow(t, openerKey);
      await run(
        `INSERT INTO threads (room, id, subject, subject_key, current_value, status, opened_by, opened_by_auth, opener_key, revisions_count,
           last_revision, confirmations, created_at, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)
         ON CONFLICT (room, id) DO UPDATE SET subject = excluded.subject, subject_key = excluded.subject_key, current_value = excluded.current_value,
           status = excluded.status, opened_by = excluded.opened_by, opened_by_auth = excluded.opened_by_auth, opener_key = excluded.opener_key,
           revisions_count = excluded.revisions_count, last_revision = excluded.last_revision, confirmations = excluded.confirmations,
           created_at = excluded.created_at, updated_at = excluded.updated_at`,
        [room, r.id, r.subject, r.subjectKey, r.currentValue, r.status, r.openedBy, r.openedByAuth, r.openerKey, r.revisionsCount,
          r.lastRevision, r.confirmations, r.createdAt, r.updatedAt],
        "save_thread",
      );
    },
    async insertRevision(room, rev) {
      const r = rows.revisionRow(rev);
      await run(
        `INSERT INTO revisions (room, id, thread_id, kind, value, author_agent_id, auth, via, source_msg_id, quote, created_at)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`,
        [room, r.id, r.threadId, r.kind, r.value, r.authorAgentId, r.auth, r.via, r.sourceMsgId, r.quote, r.createdAt],
        "insert_revision",
      );
    },
    async saveDiscrepancy(room, d) {
      const r = rows.discrepancyRow(d);
      await run(
        `INSERT INTO discrepancies (room, id, thread_id, description, severity, source_msg_id, recorded_by, status, resolved_by, created_at, resolved_at)
         VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)
         ON CONFLICT (room, id) DO UPDATE SET thread_id = excluded.thread_id, description = excluded.description, severity = excluded.severity,
           source_msg_id = excluded.source_msg_id, recorded_by = excluded.recorded_by, status = excluded.status, resolved_by = excluded.resolved_by,
           created_at = excluded.created_at, resolved_at = excluded.resolved_at`,
        [room, r.id, r.threadId, r.description, r.severity, r.sourceMsgId, r.recordedBy, r.status, r.resolvedBy, r.createdAt, r.resolvedAt],
      );
    },
    async insertHandshake(room, h) {
      const r = rows.handshakeRow(h);
      await run(
        `INSERT INTO handshakes (room, id, agent_id, context_hash, auth, pubkey_hex, signature_hex, ts, nonce, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`,
        [room, r.id, r.agentId, r.contextHash, r.auth, r.pubkeyHex, r.signatureHex, r.ts, r.nonce, r.createdAt],
      );
    },
    async saveTask(room, task) {
      const r = rows.taskRow(task);
      await run(
        `INSERT INTO tasks (room, id, status, priority, claimant, lease_until, lease_hash, data) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)
         ON CONFLICT (room, id) DO UPDATE SET status = excluded.status, priority = excluded.priority, claimant = excluded.claimant,
           lease_until = excluded.lease_until, lease_hash = excluded.lease_hash, data = excluded.data`,
        [room, r.id, r.status, r.priority, r.claimant, r.leaseUntil, r.leaseHash, r.data],
        "save_task",
      );
    },
    async saveBoardAgent(room, agent) {
      const r = rows.boardAgentRow(agent);
      await run(
        `INSERT INTO board_agents (room, agent_id, capabilities, auth, key_ref, last_seen, lost) VALUES ($1,$2,$3,$4,$5,$6,$7)
         ON CONFLICT (room, agent_id) DO UPDATE SET capabilities = excluded.capabilities, auth = excluded.auth, key_ref = excluded.key_ref,
           last_seen = excluded.last_seen, lost = excluded.lost`,
        [room, r.agentId, r.capabilities, r.auth, r.keyRef, r.lastSeen, r.lost],
        "save_board_agent",
      );
    },
    saveTurnsRoom: (room, turnsRoom) => hold((held) => setHeld(state, held.turnRooms, room, [room, turnsRoom] as const)),
    saveTurn: (room, turn) => hold((held) => setHeld(state, held.turns, `${room}\n${turn.id}`, [room, turn] as const)),
    insertWebhook: async (w) =>
      void (await run(
        `INSERT INTO webhooks (id, room, kind, url, events, format, mentioning, room_url, secret_hash, created_at, consecutive_dead, disabled_at,
           disabled_reason, expiry_alerted_for) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)`,
        [w.id, w.room, w.kind, w.url, w.events, w.format, w.mentioning, w.roomUrl, w.secretHash, w.createdAt, w.consecutiveDead, w.disabledAt,
          w.disabledReason, w.expiryAlertedFor],
      )),
    deleteWebhook: async (room, id) => (await run(`DELETE FROM webhooks WHERE room = $1 AND id = $2`, [room, id])) === 1,
    insertDelivery: async (d) =>
      void (await run(
        `INSERT INTO webhook_deliveries (id, webhook_id, room, seq, event_type, payload, status, attempts, next_attempt_at, lease_until, claim,
           last_status, last_error, created_at, updated_at, delivered_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16)`,
        [d.id, d.webhookId, d.room, d.seq, d.eventType, d.payload, d.status, d.attempts, d.nextAttemptAt, d.leaseUntil, d.claim,
          d.lastStatus, d.lastError, d.createdAt, d.updatedAt, d.deliveredAt],
        "insert_delivery",
      )),
    // SKIP LOCKED: instances claiming at once take disjoint rows; the lease keeps the rows theirs
    // after this short transaction, until the attempt is recorded or the lease runs out (a crash).
    claimDeliveries: async (now, leaseUntil, claim, limit) =>
      (await client.query<DeliveryRow>(
        `WITH due AS (
           SELECT id FROM webhook_deliveries
           WHERE status IN ('pending', 'retrying') AND next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)
           ORDER BY next_attempt_at LIMIT $4 FOR UPDATE SKIP LOCKED)
         UPDATE webhook_deliveries d SET lease_until = $2, claim = $3 FROM due WHERE d.id = due.id
         RETURNING ${deliveryCols("d.")}`,
        [now, leaseUntil, claim, limit],
      )).rows,
    finishDelivery: async (id, claim, o) =>
      (await run(
        `UPDATE webhook_deliveries SET status = $3, attempts = $4, next_attempt_at = $5, last_status = $6, last_error = $7, delivered_at = $8,
           updated_at = $9, lease_until = NULL, claim = NULL WHERE id = $1 AND claim = $2`,
        [id, claim, o.status, o.attempts, o.nextAttemptAt, o.lastStatus, o.lastError, o.deliveredAt, o.updatedAt],
      )) === 1,
    resetDeadRun: async (id) => void (await run(`UPDATE webhooks SET consecutive_dead = 0 WHERE id = $1 AND consecutive_dead <> 0`, [id])),
    addDeadDelivery: async (id) =>
      (await client.query<{ n: number }>(`UPDATE webhooks SET consecutive_dead = consecutive_dead + 1 WHERE id = $1 RETURNING consecutive_dead AS n`, [id])).rows[0]?.n ?? 0,
    async disableWebhook(id, at, reason) {
      if ((await run(`UPDATE webhooks SET disabled_at = $2, disabled_reason = $3 WHERE id = $1 AND disabled_at IS NULL`, [id, at, reason])) !== 1) return false;
      await run(
        `UPDATE webhook_deliveries SET status = 'dead', last_error = $3, updated_at = $2, lease_until = NULL, claim = NULL
         WHERE webhook_id = $1 AND status IN ('pending', 'retrying')`,
        [id, at, reason],
      );
      return true;
    },
    markExpiryAlerted: async (room, expiresAt) => void (await run(`UPDATE webhooks SET expiry_alerted_for = $2 WHERE room = $1 AND kind = 'alerts'`, [room, expiresAt])),
    pruneDeliveries: (deliveredBefore, deadBefore) =>
      run(`DELETE FROM webhook_deliveries WHERE (status = 'delivered' AND created_at < $1) OR (status = 'dead' AND created_at < $2)`, [deliveredBefore, deadBefore]),
    async savepoint<T>(fn: () => Promise<T>): Promise<T> {
      if (pending !== undefined || open !== undefined) throw new Error("savepoints do not nest here");
      // The heads announced so far (a batch's appends are added after its writes: mostly none yet).
      const before = heads.size === 0 ? undefined : new Map(heads);
      // The transaction is lost already: the rest of the batch waits for the run that replaces it.
      if (state.aborted !== undefined) throw state.aborted;
      if (state.optimistic) {
        const wrote = writes;
        const mark = heldMark(state);
        try {
          return await fn();
        } catch (err) {
          // Its writes cannot be undone alone: the transaction is run again with savepoints.
          if (writes > wrote) state.aborted ??= new RetryWithSavepoints();
          backToMark(state.held, mark);
          restore(heads, before);
          throw err;
        } finally {
          state.heldUndo = undefined;
        }
      }
      const name = `sp${++savepoints}`;
      pending = name;
      const agents = state.agents.length;
      try {
        const value = await fn();
        if (open === name) await raw.query(`RELEASE SAVEPOINT ${name}`);
        return value;
      } catch (err) {
        if (open === name) await raw.query(`ROLLBACK TO SAVEPOINT ${name}`);
        state.agents.length = agents;
        restore(heads, before); // its appends were rolled back
        throw err;
      } finally {
        pending = open = undefined;
      }
    },
  };
  return (txHeads, txState) => {
    heads = txHeads;
    state = txState;
    savepoints = writes = 0;
    pending = open = undefined;
    return writer;
  };

  async function one<T>(text: string, values: unknown[]): Promise<T | undefined> {
    return (await client.query<T & pg.QueryResultRow>(text, values)).rows[0];
  }
}

/** Each pooled connection's writer (writerOf). */
const writers = new WeakMap<pg.PoolClient, ReturnType<typeof writerOf>>();

export interface PgStoreOptions {
  /** Pool size per instance. */
  maxConnections?: number;
}

/** Connects, applies the committed migrations (once, under an advisory lock) and returns the store. */
export async function openPgStore(url: string, options: PgStoreOptions = {}): Promise<Store & { pool: pg.Pool; url: string; origin: string }> {
  const { default: driver } = await import("pg");
  // Pipelined: a statement is sent without waiting for the answer to the one before, so a write
  // transaction sends BEGIN with its lock statement and its last rows with COMMIT (both()).
  const pool = new driver.Pool({ connectionString: url, max: options.maxConnections ?? 10, connectionTimeoutMillis: 5_000, pipeline: true });
  // An idle client that loses its connection (the database restarted) is dropped by the pool; the
  // error must not crash the process.
  pool.on("error", () => {});
  await migrateOnce(pool);
  const commitListeners: ((heads: ReadonlyMap<string, number>) => void)[] = [];
  const origin = randomUUID();
  const knownAgents = new Set<string>();
  const roomAgents = new Map<string, Set<string>>();
  // Reads outside a transaction take any pooled connection; a lost database answers 503.
  const pooled = { query: (config: pg.QueryConfig) => guarded(() => pool.query(config)) } as unknown as Queryable;
  const reader = readerOn(pooled);

  async function write<T>(lockRooms: readonly string[], fn: (tx: StoreWriter) => Promise<T>, options: WriteOptions = {}): Promise<T> {
    const client = await guarded(() => pool.connect());
    const heads: Heads = new Map();
    let broken = false;
    let state: TxState | undefined;
    try {
      state = { optimistic: options.optimistic === true, knownAgents, agents: [], roomAgents, joined: [], created: [], locked: new Map(), held: noneHeld() };
      if (lockRooms.length > 0) {
        const [, locked] = await both(
          client,
          () => client.query("BEGIN"),
          () => client.query<RoomRow & { hasWebhooks: boolean; keys: Record<string, string> }>({ name: "lock_rooms", text: LOCK_ROOMS, values: [[...new Set(lockRooms)].sort()] }),
        );
        for (const { hasWebhooks, keys, ...row } of locked.rows) state.locked.set(row.uuid, { row, hasWebhooks, keys, agentCount: row.agentCount });
      } else await client.query("BEGIN");
      let writerFor = writers.get(client);
      if (!writerFor) writers.set(client, (writerFor = writerOf(client)));
      const writer = writerFor(heads, state);
      const value = await fn(writer);
      // The held rows and the announcement (NOTIFY payloads are limited to 8000 bytes: in chunks).
      const announced = [...heads];
      const chunks: string[] = [];
      for (let i = 0; i < announced.length; i += NOTIFY_CHUNK) chunks.push(announcement(origin, announced.slice(i, i + NOTIFY_CHUNK)));
      // A statement failed outside any savepoint: PostgreSQL has aborted the transaction.
      if (state.aborted !== undefined) throw state.aborted;
      await writer.commit(chunks);
      if (knownAgents.size + state.agents.length > KNOWN_AGENTS_MAX) knownAgents.clear();
      for (const key of state.agents) knownAgents.add(key);
      for (const [room, agent] of state.joined) roomAgents.get(room)?.add(agent);
      for (const room of state.created) {
        roomAgents.set(room, new Set());
        if (roomAgents.size > ROOM_AGENTS_MAX) roomAgents.delete(roomAgents.keys().next().value!);
      }
      options.committed?.();
      if (heads.size > 0) for (const listener of commitListeners) listener(heads);
      return value;
    } catch (err) {
      broken = isUnreachable(err);
      if (!broken) await client.query("ROLLBACK").catch(() => (broken = true));
      if (broken) throw databaseUnavailable();
      // What made the transaction fail first (later statements only saw it aborted).
      throw state?.aborted ?? err;
    } finally {
      client.release(broken);
    }
  }

  return {
    ...reader,
    dialect: "postgres",
    onCommit: (listener) => void commitListeners.push(listener),
    async snapshot(fn) {
      const client = await guarded(() => pool.connect());
      let broken = false;
      try {
        await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        const value = await fn(readerOn(client));
        await client.query("COMMIT");
        return value;
      } catch (err) {
        broken = isUnreachable(err);
        if (!broken) await client.query("ROLLBACK").catch(() => (broken = true));
        if (broken) throw databaseUnavailable();
        throw err;
      } finally {
        client.release(broken);
      }
    },
    pool,
    url,
    origin,
    write,
    limits: pgBuckets(pool, guarded),
    jobs: {
      async leaseJob(name, holder, ttlMs, nowMs) {
        const r = await guarded(() =>
          pool.query(
            `INSERT INTO job_leases (name, holder, until_ms) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms
             WHERE job_leases.until_ms <= $4 OR job_leases.holder = excluded.holder
             RETURNING holder`,
            [name, holder, nowMs + ttlMs, nowMs],
          ),
        );
        return (r.rowCount ?? 0) === 1;
      },
      releaseJob: async (name, holder) => void (await guarded(() => pool.query(`DELETE FROM job_leases WHERE name = $1 AND holder = $2`, [name, holder]))),
    },
    close: () => pool.end(),
  };
}

/** Fills in the mention columns of messages stored before they existed, from their text (once: new rows carry them). */
async function backfillMentions(client: pg.PoolClient): Promise<void> {
  for (;;) {
    const { rows: list } = await client.query<{ room: string; seq: number; agentId: string; text: string }>(
      `SELECT room, seq, agent_id AS "agentId", text FROM messages WHERE mention_keys IS NULL LIMIT 500`,
    );
    if (list.length === 0) return;
    for (const m of list) {
      const c = rows.backfilledMentions(m);
      await client.query(`UPDATE messages SET mentions = $3, mention_keys = $4 WHERE room = $1 AND seq = $2`, [m.room, m.seq, c.mentions, c.mentionKeys]);
    }
  }
}

/** Applies drizzle/pg once: every starting instance takes the same advisory lock first. */
async function migrateOnce(pool: pg.Pool): Promise<void> {
  const client = await guarded(() => pool.connect());
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK]);
    try {
      const [{ drizzle }, { migrate }] = await Promise.all([import("drizzle-orm/node-postgres"), import("drizzle-orm/node-postgres/migrator")]);
      await migrate(drizzle(client), { migrationsFolder: MIGRATIONS });
      await backfillMentions(client);
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK]);
    }
  } finally {
    client.release();
  }
}
