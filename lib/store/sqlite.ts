// The embedded store: one SQLite file (WAL) under PARLEY_DATA_DIR, nothing to set up.
//
// Transactions can await, so two connections keep them apart: one write connection, used only by
// the transaction that holds the writer lock (a promise chain: one write transaction at a time),
// and one read connection for everything outside a transaction, which sees only committed rows.
// No other request's statement can therefore run inside an open transaction, or see or lose its
// uncommitted rows.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { PROJECT_ROOT } from "../paths";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { drizzle } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { and, asc, count, desc, eq, gt, isNull, lte, ne, sql } from "drizzle-orm";
import * as schema from "./schema";
import type { DeliveryRow, DeliveryStatus, EventRow, Heads, MessageRow, RoomListQuery, RoomRow, Store, StoreReader, StoreWriter, WriteOptions } from "./repository";
import { MemoryBuckets } from "./memory-limits";
import { adminReaderOn, adminWriterOn } from "./admin-sqlite";
import * as rows from "./rows";
import type { TurnsRoom, TurnState } from "../domain/turns";
import { ROOM_COLS } from "./rows";

const { rooms, events, messages, threads, revisions, discrepancies, handshakes, tasks, boardAgents, turnRooms, turns, webhooks, webhookDeliveries } = schema;
const MIGRATIONS = path.join(PROJECT_ROOT, "drizzle");

const SORT_COLUMNS = {
  active: [desc(rooms.lastActivityAt)],
  new: [desc(rooms.createdAt)],
  messages: [desc(rooms.messageCount), desc(rooms.lastActivityAt)],
  agents: [desc(rooms.agentCount), desc(rooms.lastActivityAt)],
} as const;


function connect(file: string, readonly: boolean): Database.Database {
  const db = new Database(file, { readonly });
  db.pragma("busy_timeout = 5000");
  if (!readonly) {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL"); // WAL + NORMAL: commits survive a process crash and do not fsync
    // WAL checkpoints (the fsyncs) run on another thread; this connection only checkpoints if that
    // thread is gone or kept from restarting the WAL (about 200 MB of WAL).
    db.pragma("wal_autocheckpoint = 50000");
    db.pragma("foreign_keys = ON");
  }
  return db;
}

const MESSAGE_COLS = `room, seq, agent_id AS agentId, text, ts, reply_to AS replyTo, mentions, mention_keys AS mentionKeys, auth, key_ref AS keyRef,
  pubkey_hex AS pubkeyHex, signature_hex AS signatureHex, ts_iso AS tsIso, memory_root AS memoryRoot, hash`;

/** The reads, prepared once on one connection. Synchronous underneath; async to match PostgreSQL. */
function readerOn(sqlite: Database.Database) {
  const db = drizzle(sqlite, { schema });
  const p = sql.placeholder;
  /** A room that takes writes at `now`: open, and not past its expiry. */
  const liveRoom = (now: string) => and(eq(rooms.status, "open"), gt(rooms.expiresAt, now));
  // A plain statement (drizzle's row mapping was most of a room read, one per write and per turn).
  const getRoom = sqlite.prepare<{ uuid: string }, RoomRow>(`SELECT ${ROOM_COLS} FROM rooms WHERE uuid = @uuid`);
  const getRooms = sqlite.prepare<[string], RoomRow>(`SELECT ${ROOM_COLS} FROM rooms WHERE uuid IN (SELECT value FROM json_each(?))`);
  /** SQLite keeps booleans as 0 and 1. */
  const roomOf = (row: RoomRow) => {
    row.isPublic = Boolean(row.isPublic);
    row.hidden = Boolean(row.hidden);
    return row;
  };
  // The hot page reads as plain statements: drizzle's row mapping took a third of a 100-message page.
  const listMessages = sqlite.prepare<{ room: string; since: number; limit: number }, MessageRow>(
    `SELECT ${MESSAGE_COLS} FROM messages WHERE room = @room AND seq > @since ORDER BY seq LIMIT @limit`,
  );
  const tailMessages = sqlite.prepare<{ room: string; limit: number }, MessageRow>(`SELECT ${MESSAGE_COLS} FROM messages WHERE room = @room ORDER BY seq DESC LIMIT @limit`);
  // The keys are a JSON array: json_each matches one element exactly, whatever the name holds.
  const addressed = sql`${messages.mentionKeys} <> '[]' AND EXISTS (SELECT 1 FROM json_each(${messages.mentionKeys}) WHERE json_each.value = ${p("key")})`;
  const listMentioning = db.select().from(messages)
    .where(and(eq(messages.room, p("room")), gt(messages.seq, p("since")), lte(messages.seq, p("upTo")), addressed))
    .orderBy(asc(messages.seq)).limit(p("limit")).prepare();
  const tailMentioning = db.select().from(messages)
    .where(and(eq(messages.room, p("room")), lte(messages.seq, p("upTo")), addressed))
    .orderBy(desc(messages.seq)).limit(p("limit")).prepare();
  const hasMessage = db.select({ seq: messages.seq }).from(messages).where(and(eq(messages.room, p("room")), eq(messages.seq, p("seq")))).prepare();
  const listEvents = sqlite.prepare<{ room: string; since: number; limit: number }, EventRow>(
    `SELECT room, seq, ts, type, actor, payload, server, prev, sig, leaf_hash AS leafHash, checkpoint FROM events WHERE room = @room AND seq > @since ORDER BY seq LIMIT @limit`,
  );
  const leafHashes = db
    .select({ leafHash: events.leafHash })
    .from(events)
    .where(and(eq(events.room, p("room")), gt(events.seq, p("after")), lte(events.seq, p("size"))))
    .orderBy(asc(events.seq))
    .prepare();
  const checkpointAt = db.select({ checkpoint: events.checkpoint }).from(events).where(and(eq(events.room, p("room")), eq(events.seq, p("size")))).prepare();
  // A plain statement too: every unsigned post asks whether its agent has a pinned key.
  const agentKey = sqlite.prepare<{ room: string; agent: string }, { pubkeyHex: string | null }>(
    `SELECT pubkey_hex AS pubkeyHex FROM room_agents WHERE room = @room AND agent_id = @agent`,
  );
  // rowid order is id order: a task's row is inserted with its task.created event and only updated after.
  const openAtPriority = db.select().from(tasks)
    .where(and(eq(tasks.room, p("room")), eq(tasks.status, "open"), eq(tasks.priority, p("priority"))))
    .orderBy(sql`rowid`).limit(p("limit")).offset(p("offset")).prepare();
  const getTaskRow = db.select().from(tasks).where(and(eq(tasks.room, p("room")), eq(tasks.id, p("id")))).prepare();
  const getBoardAgentRow = db.select().from(boardAgents).where(and(eq(boardAgents.room, p("room")), eq(boardAgents.agentId, p("agentId")))).prepare();
  const getTurnsRoomRow = db.select().from(turnRooms).where(eq(turnRooms.room, p("room"))).prepare();
  const getTurnRow = db.select().from(turns).where(and(eq(turns.room, p("room")), eq(turns.id, p("id")))).prepare();
  const ping = sqlite.prepare("select 1");
  const getWebhook = db.select().from(webhooks).where(and(eq(webhooks.room, p("room")), eq(webhooks.id, p("id")))).prepare();
  // rowid order is registration order.
  const listWebhooks = db.select().from(webhooks).where(eq(webhooks.room, p("room"))).orderBy(sql`rowid`).prepare();
  const listDeliveries = db.select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, p("webhookId")))
    .orderBy(sql`rowid DESC`).limit(p("limit")).prepare();
  const deliveryCounts = db.select({ status: webhookDeliveries.status, n: count() }).from(webhookDeliveries)
    .where(eq(webhookDeliveries.webhookId, p("webhookId"))).groupBy(webhookDeliveries.status).prepare();

  const reader: StoreReader = {
    ...adminReaderOn(sqlite),
    async getRoom(uuid) {
      const row = getRoom.get({ uuid });
      return row && roomOf(row);
    },
    getRooms: async (uuids) => getRooms.all(JSON.stringify(uuids)).map(roomOf),
    async listPublicRooms(query: RoomListQuery) {
      const where = and(
        eq(rooms.isPublic, true),
        eq(rooms.hidden, false),
        ne(rooms.status, "expired"),
        gt(rooms.expiresAt, query.now),
        // Wildcards in the search text are literal: escape them and name the escape character.
        query.q ? sql`${rooms.description} LIKE ${`%${escapeLike(query.q)}%`} ESCAPE '\\'` : undefined,
      );
      const list = db.select().from(rooms).where(where).orderBy(...SORT_COLUMNS[query.sort]).limit(query.limit).offset(query.offset).all();
      const total = db.select({ n: count() }).from(rooms).where(where).get()?.n ?? 0;
      return { rows: list, total };
    },
    listEvents: async (room, since, limit) => listEvents.all({ room, since, limit }),
    leafHashes: async (room, size, after = 0) => leafHashes.all({ room, size, after }).map((r) => r.leafHash),
    checkpointAt: async (room, size) => checkpointAt.get({ room, size })?.checkpoint,
    agentKey: async (room, agent) => agentKey.get({ room, agent }),
    expiredRooms: async (now, limit) =>
      db.select({ uuid: rooms.uuid }).from(rooms).where(and(lte(rooms.expiresAt, now), ne(rooms.status, "expired"))).limit(limit).all().map((r) => r.uuid),
    counts: async () => ({
      rooms: db.select({ n: count() }).from(rooms).where(ne(rooms.status, "expired")).get()?.n ?? 0,
      events: db.select({ n: count() }).from(events).get()?.n ?? 0,
    }),
    ping: async () => void ping.get(),

    listMessages: async (room, since, limit) => listMessages.all({ room, since, limit }),
    tailMessages: async (room, limit) => tailMessages.all({ room, limit }).reverse(),
    listMentioning: async (room, key, since, upTo, limit) => listMentioning.all({ room, key, since, upTo, limit }),
    tailMentioning: async (room, key, upTo, limit) => tailMentioning.all({ room, key, upTo, limit }).reverse(),
    hasMessage: async (room, seq) => hasMessage.get({ room, seq }) !== undefined,

    async getThread(room, id) {
      const row = db.select().from(threads).where(and(eq(threads.room, room), eq(threads.id, id))).get();
      return row && { thread: rows.toThread(row), openerKey: row.openerKey };
    },
    listThreads: async (room) => db.select().from(threads).where(eq(threads.room, room)).orderBy(asc(threads.id)).all().map(rows.toThread),
    listRevisions: async (room, threadId) =>
      db.select().from(revisions)
        .where(and(eq(revisions.room, room), threadId === undefined ? undefined : eq(revisions.threadId, threadId)))
        .orderBy(asc(revisions.id)).all().map(rows.toRevision),
    listDiscrepancies: async (room) => db.select().from(discrepancies).where(eq(discrepancies.room, room)).orderBy(asc(discrepancies.id)).all().map(rows.toDiscrepancy),
    listHandshakes: async (room) => db.select().from(handshakes).where(eq(handshakes.room, room)).orderBy(asc(handshakes.id)).all().map(rows.toHandshake),

    getTask: async (room, id) => {
      const row = getTaskRow.get({ room, id });
      return row && rows.toTask(row);
    },
    listTasks: async (room, status) =>
      db.select().from(tasks).where(and(eq(tasks.room, room), status === undefined ? undefined : eq(tasks.status, status))).orderBy(asc(tasks.id)).all().map(rows.toTask),
    openTasksAtPriority: async (room, priority, limit, offset) => openAtPriority.all({ room, priority, limit, offset }).map(rows.toTask),
    listBoardAgents: async (room) => db.select().from(boardAgents).where(eq(boardAgents.room, room)).orderBy(asc(boardAgents.agentId)).all().map(rows.toBoardAgent),
    getBoardAgent: async (room, agentId) => {
      const row = getBoardAgentRow.get({ room, agentId });
      return row && rows.toBoardAgent(row);
    },
    // Both only in live rooms: a closed room's board stands still until it is reopened, and an
    // expired one waits to be purged (the sweepers would otherwise find the same rows forever).
    expiredLeases: async (now, limit) =>
      db.select({ room: tasks.room, id: tasks.id }).from(tasks).innerJoin(rooms, eq(rooms.uuid, tasks.room))
        .where(and(eq(tasks.status, "claimed"), lte(tasks.leaseUntil, now), liveRoom(now))).limit(limit).all(),
    silentAgents: async (cutoff, now, limit) =>
      db.select({ room: boardAgents.room, agentId: boardAgents.agentId }).from(boardAgents).innerJoin(rooms, eq(rooms.uuid, boardAgents.room))
        .where(and(eq(boardAgents.lost, false), lte(boardAgents.lastSeen, cutoff), liveRoom(now))).limit(limit).all(),

    getTurnsRoom: async (room) => {
      const row = getTurnsRoomRow.get({ room });
      return row && rows.toTurnsRoom(row);
    },
    getTurn: async (room, id) => {
      const row = getTurnRow.get({ room, id });
      return row && rows.toTurn(row);
    },
    listTurns: async (room) => db.select().from(turns).where(eq(turns.room, room)).orderBy(asc(turns.id)).all().map(rows.toTurn),
    lastTurns: async (room, limit) => db.select().from(turns).where(eq(turns.room, room)).orderBy(desc(turns.id)).limit(limit).all().map(rows.toTurn).reverse(),
    // Only in live rooms: a closed room's clock stands still until it is reopened.
    dueTurns: async (now, limit) =>
      db.select({ room: turns.room, id: turns.id }).from(turns).innerJoin(rooms, eq(rooms.uuid, turns.room))
        .where(and(sql`${turns.status} IN ('ready', 'claimed')`, lte(turns.deadline, now), liveRoom(now))).limit(limit).all(),

    getWebhook: async (room, id) => getWebhook.get({ room, id }),
    listWebhooks: async (room) => listWebhooks.all({ room }),
    listDeliveries: async (webhookId, limit) => listDeliveries.all({ webhookId, limit }) as DeliveryRow[],
    async deliveryCounts(webhookId) {
      const counts: Record<DeliveryStatus, number> = { pending: 0, retrying: 0, delivered: 0, dead: 0 };
      for (const r of deliveryCounts.all({ webhookId })) counts[r.status as DeliveryStatus] = r.n;
      return counts;
    },
    roomsNearExpiry: async (now, until, limit) =>
      db.selectDistinct({ uuid: rooms.uuid }).from(webhooks).innerJoin(rooms, eq(rooms.uuid, webhooks.room))
        .where(and(
          eq(webhooks.kind, "alerts"), isNull(webhooks.disabledAt), ne(rooms.status, "expired"), gt(rooms.expiresAt, now), lte(rooms.expiresAt, until),
          sql`(${webhooks.expiryAlertedFor} IS NULL OR ${webhooks.expiryAlertedFor} <> ${rooms.expiresAt})`,
        )).limit(limit).all().map((r) => r.uuid),
  };
  return { reader, db };
}

/** Rows the writer keeps known at most (past this it starts again empty: a miss costs one read). */
const KNOWN_ROOMS_MAX = 4096;

/** Reads of the write connection that read no turns table, so need not write the held turn states first. */
const NO_TURNS_READ = new Set<string>(["getRoom", "agentKey", "listMessages", "tailMessages", "hasMessage", "listWebhooks", "checkpointAt"] satisfies (keyof StoreReader)[]);

/**
 * The writes, prepared once on the write connection; `heads` collects what the open transaction
 * appended. Turn states are held and written once each (`flushTurns`) before the writer next reads,
 * at a savepoint's bounds and before commit: every event of a reply saves its turns room again.
 */
function writerOn(sqlite: Database.Database, heads: Heads): StoreWriter & { flushTurns(): void; dropTurns(): void; forgetRooms(): void } {
  const { reader: rowReader, db } = readerOn(sqlite);
  const prep = (text: string) => sqlite.prepare(text);
  // The rooms' rows as they stand in the database for this connection (its open transaction
  // included), so that a write reads its room's row once rather than once per batch: every batch
  // of posts read it and it then changed only by this writer's head update, whose columns are
  // known. A row leaves when any statement changes or deletes it (a trigger of this connection
  // only), when a transaction or savepoint rolls back, and when another process has committed to
  // the file (data_version, checked once per transaction).
  const knownRooms = new Map<string, RoomRow>();
  sqlite.function("parley_room_changed", { deterministic: false }, (uuid: unknown) => {
    knownRooms.delete(uuid as string);
    return null;
  });
  sqlite.exec(`CREATE TEMP TRIGGER IF NOT EXISTS parley_room_updated AFTER UPDATE ON main.rooms BEGIN SELECT parley_room_changed(old.uuid); END;
    CREATE TEMP TRIGGER IF NOT EXISTS parley_room_deleted AFTER DELETE ON main.rooms BEGIN SELECT parley_room_changed(old.uuid); END;`);
  const knowRoom = (uuid: string, row: RoomRow) => {
    if (knownRooms.size >= KNOWN_ROOMS_MAX) knownRooms.clear();
    knownRooms.set(uuid, row);
  };
  const insertRoom = prep(
    `INSERT INTO rooms (uuid, description, is_public, protocol_mode, mode, status, owner_token_hash, created_at, last_activity_at, expires_at,
       message_count, agent_count, head_size, head_leaf, head_root, frontier, checkpoint, arbiter_watermark, arbiter_calls, arbiter_tokens,
       arbiter_items, last_extraction_error)
     VALUES (@uuid, @description, @isPublic, @protocolMode, @mode, @status, @ownerTokenHash, @createdAt, @lastActivityAt, @expiresAt,
       @messageCount, @agentCount, @headSize, @headLeaf, @headRoot, @frontier, @checkpoint, @arbiterWatermark, @arbiterCalls, @arbiterTokens,
       @arbiterItems, @lastExtractionError)`,
  );
  const updateRoomAfterAppend = prep(
    `UPDATE rooms SET head_size = @headSize, head_leaf = @headLeaf, head_root = @headRoot, frontier = @frontier, checkpoint = @checkpoint,
       status = @status, message_count = @messageCount, agent_count = @agentCount, last_activity_at = @lastActivityAt, expires_at = @expiresAt
     WHERE uuid = @uuid`,
  );
  const insertEvent = prep(
    `INSERT INTO events (room, seq, ts, type, actor, payload, server, prev, sig, leaf_hash, checkpoint)
     VALUES (@room, @seq, @ts, @type, @actor, @payload, @server, @prev, @sig, @leafHash, @checkpoint)`,
  );
  const insertMessage = prep(
    `INSERT INTO messages (room, seq, agent_id, text, ts, reply_to, mentions, mention_keys, auth, key_ref, pubkey_hex, signature_hex, ts_iso, memory_root, hash)
     VALUES (@room, @seq, @agentId, @text, @ts, @replyTo, @mentions, @mentionKeys, @auth, @keyRef, @pubkeyHex, @signatureHex, @tsIso, @memoryRoot, @hash)`,
  );
  const useNonce = prep(`INSERT INTO signature_nonces (room, pubkey_hex, nonce, seq) VALUES (@room, @pubkey, @nonce, @seq) ON CONFLICT DO NOTHING`);
  // An agent counts from its first message; a row made by pinning a key (first_seq 0: a signed
  // claim, join or thread before any message) is not one yet.
  const addAgent = prep(
    `INSERT INTO room_agents (room, agent_id, first_seq) VALUES (@room, @agent, @seq)
     ON CONFLICT (room, agent_id) DO UPDATE SET first_seq = excluded.first_seq WHERE room_agents.first_seq = 0`,
  );
  const pinAgentKey = prep(
    `INSERT INTO room_agents (room, agent_id, first_seq, pubkey_hex) VALUES (@room, @agentId, 0, @pubkeyHex)
     ON CONFLICT (room, agent_id) DO UPDATE SET pubkey_hex = excluded.pubkey_hex`,
  );
  const saveThread = prep(
    `INSERT INTO threads (room, id, subject, subject_key, current_value, status, opened_by, opened_by_auth, opener_key, revisions_count,
       last_revision, confirmations, created_at, updated_at)
     VALUES (@room, @id, @subject, @subjectKey, @currentValue, @status, @openedBy, @openedByAuth, @openerKey, @revisionsCount,
       @lastRevision, @confirmations, @createdAt, @updatedAt)
     ON CONFLICT (room, id) DO UPDATE SET subject = excluded.subject, subject_key = excluded.subject_key, current_value = excluded.current_value,
       status = excluded.status, opened_by = excluded.opened_by, opened_by_auth = excluded.opened_by_auth, opener_key = excluded.opener_key,
       revisions_count = excluded.revisions_count, last_revision = excluded.last_revision, confirmations = excluded.confirmations,
       created_at = excluded.created_at, updated_at = excluded.updated_at`,
  );
  const insertRevision = prep(
    `INSERT INTO revisions (room, id, thread_id, kind, value, author_agent_id, auth, via, source_msg_id, quote, created_at)
     VALUES (@room, @id, @threadId, @kind, @value, @authorAgentId, @auth, @via, @sourceMsgId, @quote, @createdAt)`,
  );
  const saveDiscrepancy = prep(
    `INSERT INTO discrepancies (room, id, thread_id, description, severity, source_msg_id, recorded_by, status, resolved_by, created_at, resolved_at)
     VALUES (@room, @id, @threadId, @description, @severity, @sourceMsgId, @recordedBy, @status, @resolvedBy, @createdAt, @resolvedAt)
     ON CONFLICT (room, id) DO UPDATE SET thread_id = excluded.thread_id, description = excluded.description, severity = excluded.severity,
       source_msg_id = excluded.source_msg_id, recorded_by = excluded.recorded_by, status = excluded.status, resolved_by = excluded.resolved_by,
       created_at = excluded.created_at, resolved_at = excluded.resolved_at`,
  );
  const insertHandshake = prep(
    `INSERT INTO handshakes (room, id, agent_id, context_hash, auth, pubkey_hex, signature_hex, ts, nonce, created_at)
     VALUES (@room, @id, @agentId, @contextHash, @auth, @pubkeyHex, @signatureHex, @ts, @nonce, @createdAt)`,
  );
  const upsertTask = prep(
    `INSERT INTO tasks (room, id, status, priority, claimant, lease_until, lease_hash, data)
     VALUES (@room, @id, @status, @priority, @claimant, @leaseUntil, @leaseHash, @data)
     ON CONFLICT (room, id) DO UPDATE SET status = excluded.status, priority = excluded.priority, claimant = excluded.claimant,
       lease_until = excluded.lease_until, lease_hash = excluded.lease_hash, data = excluded.data`,
  );
  const upsertBoardAgent = prep(
    `INSERT INTO board_agents (room, agent_id, capabilities, auth, key_ref, last_seen, lost)
     VALUES (@room, @agentId, @capabilities, @auth, @keyRef, @lastSeen, @lost)
     ON CONFLICT (room, agent_id) DO UPDATE SET capabilities = excluded.capabilities, auth = excluded.auth, key_ref = excluded.key_ref,
       last_seen = excluded.last_seen, lost = excluded.lost`,
  );
  const upsertTurnsRoom = prep(`INSERT INTO turn_rooms (room, status, data) VALUES (@room, @status, @data) ON CONFLICT (room) DO UPDATE SET status = excluded.status, data = excluded.data`);
  const upsertTurn = prep(
    `INSERT INTO turns (room, id, agent_id, status, deadline, lease_hash, data) VALUES (@room, @id, @agentId, @status, @deadline, @leaseHash, @data)
     ON CONFLICT (room, id) DO UPDATE SET agent_id = excluded.agent_id, status = excluded.status, deadline = excluded.deadline,
       lease_hash = excluded.lease_hash, data = excluded.data`,
  );
  const heldRooms = new Map<string, TurnsRoom>();
  const heldTurns = new Map<string, { room: string; turn: TurnState }>();
  function flushTurns(): void {
    for (const [room, r] of heldRooms) upsertTurnsRoom.run({ room, ...rows.turnsRoomRow(r) });
    for (const { room, turn } of heldTurns.values()) upsertTurn.run({ room, ...rows.turnRow(turn) });
    dropTurns();
  }
  function dropTurns(): void {
    // Most writes hold none (posts): clear() allocates a new table even for an empty Map.
    if (heldRooms.size > 0) heldRooms.clear();
    if (heldTurns.size > 0) heldTurns.clear();
  }
  // Every read on this connection sees the held turn states written, but for the hot reads of a
  // write that never touch the turns tables (a claim made ahead reads the waiting agent's key after
  // the reply's appends: flushing there wrote the turn it opens twice).
  const reader = Object.fromEntries(
    Object.entries(rowReader).map(([name, read]) => [
      name,
      NO_TURNS_READ.has(name) ? read : (...args: unknown[]) => (flushTurns(), (read as (...a: unknown[]) => unknown)(...args)),
    ]),
  ) as unknown as typeof rowReader;
  const deleteRoom = prep(`DELETE FROM rooms WHERE uuid = ?`);
  const insertWebhook = prep(
    `INSERT INTO webhooks (id, room, kind, url, events, format, mentioning, room_url, secret_hash, created_at, consecutive_dead, disabled_at,
       disabled_reason, expiry_alerted_for)
     VALUES (@id, @room, @kind, @url, @events, @format, @mentioning, @roomUrl, @secretHash, @createdAt, @consecutiveDead, @disabledAt,
       @disabledReason, @expiryAlertedFor)`,
  );
  const deleteWebhook = prep(`DELETE FROM webhooks WHERE room = @room AND id = @id`);
  const insertDelivery = prep(
    `INSERT INTO webhook_deliveries (id, webhook_id, room, seq, event_type, payload, status, attempts, next_attempt_at, lease_until, claim,
       last_status, last_error, created_at, updated_at, delivered_at)
     VALUES (@id, @webhookId, @room, @seq, @eventType, @payload, @status, @attempts, @nextAttemptAt, @leaseUntil, @claim,
       @lastStatus, @lastError, @createdAt, @updatedAt, @deliveredAt)`,
  );
  // One process: the write lock already keeps two claims apart; the lease covers a crash mid-attempt.
  const claimDeliveries = prep(
    `UPDATE webhook_deliveries SET lease_until = @leaseUntil, claim = @claim
     WHERE id IN (SELECT id FROM webhook_deliveries
                  WHERE status IN ('pending', 'retrying') AND next_attempt_at <= @now AND (lease_until IS NULL OR lease_until <= @now)
                  ORDER BY next_attempt_at LIMIT @limit)
     RETURNING id, webhook_id AS webhookId, room, seq, event_type AS eventType, payload, status, attempts, next_attempt_at AS nextAttemptAt,
       lease_until AS leaseUntil, claim, last_status AS lastStatus, last_error AS lastError, created_at AS createdAt, updated_at AS updatedAt,
       delivered_at AS deliveredAt`,
  );
  const finishDelivery = prep(
    `UPDATE webhook_deliveries SET status = @status, attempts = @attempts, next_attempt_at = @nextAttemptAt, last_status = @lastStatus,
       last_error = @lastError, delivered_at = @deliveredAt, updated_at = @updatedAt, lease_until = NULL, claim = NULL
     WHERE id = @id AND claim = @claim`,
  );
  const resetDeadRun = prep(`UPDATE webhooks SET consecutive_dead = 0 WHERE id = ? AND consecutive_dead <> 0`);
  const addDead = prep(`UPDATE webhooks SET consecutive_dead = consecutive_dead + 1 WHERE id = ? RETURNING consecutive_dead AS n`);
  const disableWebhook = prep(`UPDATE webhooks SET disabled_at = @at, disabled_reason = @reason WHERE id = @id AND disabled_at IS NULL`);
  const killOpenDeliveries = prep(
    `UPDATE webhook_deliveries SET status = 'dead', last_error = @reason, updated_at = @at, lease_until = NULL, claim = NULL
     WHERE webhook_id = @id AND status IN ('pending', 'retrying')`,
  );
  const markExpiryAlerted = prep(`UPDATE webhooks SET expiry_alerted_for = @expiresAt WHERE room = @room AND kind = 'alerts'`);
  const pruneDeliveries = prep(
    `DELETE FROM webhook_deliveries WHERE (status = 'delivered' AND created_at < @deliveredBefore) OR (status = 'dead' AND created_at < @deadBefore)`,
  );
  const bool = (b: boolean) => (b ? 1 : 0);
  // A batch's writes run one after another, each in its savepoint (they never nest): one name,
  // prepared once, instead of a statement parsed per write.
  const openSavepoint = sqlite.prepare("SAVEPOINT write");
  const releaseSavepoint = sqlite.prepare("RELEASE write");
  const rollbackSavepoint = sqlite.prepare("ROLLBACK TO write");

  return {
    ...reader,
    ...adminWriterOn(sqlite),
    flushTurns,
    dropTurns,
    forgetRooms: () => knownRooms.clear(),
    async getRoom(uuid) {
      const known = knownRooms.get(uuid);
      if (known) return { ...known };
      const row = await reader.getRoom(uuid);
      if (row) knowRoom(uuid, { ...row });
      return row;
    },
    insertRoom: async (r) => void insertRoom.run({ ...r, isPublic: bool(r.isPublic) }),
    async updateRoomsAfterAppend(list) {
      for (const [uuid, r] of list) {
        const known = knownRooms.get(uuid);
        updateRoomAfterAppend.run({ ...r, uuid }); // its trigger forgets the row: known again with exactly the columns written
        if (known) {
          const { headSize, headLeaf, headRoot, frontier, checkpoint, status, messageCount, agentCount, lastActivityAt, expiresAt } = r;
          knowRoom(uuid, { ...known, headSize, headLeaf, headRoot, frontier, checkpoint, status, messageCount, agentCount, lastActivityAt, expiresAt });
        }
      }
    },
    updateArbiterState: async (uuid, state) => void db.update(rooms).set(state).where(eq(rooms.uuid, uuid)).run(),
    async insertEvents(rows) {
      for (const e of rows) {
        insertEvent.run({ ...e, sig: e.sig ?? null });
        heads.set(e.room, Math.max(heads.get(e.room) ?? 0, e.seq));
      }
    },
    addAgent: async (room, agent, seq) => addAgent.run({ room, agent, seq }).changes === 1,
    useNonce: async (room, pubkey, nonce, seq) => useNonce.run({ room, pubkey, nonce, seq }).changes === 1,
    pinAgentKey: async (room, agentId, pubkeyHex) => void pinAgentKey.run({ room, agentId, pubkeyHex }),
    async deleteRoomData(uuid, keepTombstone) {
      // The cascade removes every row the room had; a tombstone is a fresh rooms row with no data.
      const row = await reader.getRoom(uuid);
      flushTurns(); // the cascade takes them too
      deleteRoom.run(uuid);
      if (row && keepTombstone) {
        insertRoom.run({ ...row, isPublic: bool(row.isPublic), status: "expired", description: "", frontier: "", checkpoint: "" });
      }
    },
    insertMessage: async (m) => void insertMessage.run(m),
    saveThread: async (room, t, openerKey) => void saveThread.run({ room, ...rows.threadRow(t, openerKey) }),
    insertRevision: async (room, r) => void insertRevision.run({ room, ...rows.revisionRow(r) }),
    saveDiscrepancy: async (room, d) => void saveDiscrepancy.run({ room, ...rows.discrepancyRow(d) }),
    insertHandshake: async (room, h) => void insertHandshake.run({ room, ...rows.handshakeRow(h) }),
    saveTask: async (room, t) => void upsertTask.run({ room, ...rows.taskRow(t) }),
    saveBoardAgent: async (room, a) => {
      const r = rows.boardAgentRow(a);
      upsertBoardAgent.run({ room, ...r, lost: bool(r.lost) });
    },
    saveTurnsRoom: async (room, r) => void heldRooms.set(room, r),
    saveTurn: async (room, t) => void heldTurns.set(`${room}\n${t.id}`, { room, turn: t }),
    insertWebhook: async (w) => void insertWebhook.run(w),
    deleteWebhook: async (room, id) => deleteWebhook.run({ room, id }).changes === 1,
    insertDelivery: async (d) => void insertDelivery.run(d),
    claimDeliveries: async (now, leaseUntil, claim, limit) => claimDeliveries.all({ now, leaseUntil, claim, limit }) as DeliveryRow[],
    finishDelivery: async (id, claim, o) => finishDelivery.run({ id, claim, ...o }).changes === 1,
    resetDeadRun: async (id) => void resetDeadRun.run(id),
    addDeadDelivery: async (id) => (addDead.get(id) as { n: number } | undefined)?.n ?? 0,
    async disableWebhook(id, at, reason) {
      if (disableWebhook.run({ id, at, reason }).changes !== 1) return false;
      killOpenDeliveries.run({ id, at, reason });
      return true;
    },
    markExpiryAlerted: async (room, expiresAt) => void markExpiryAlerted.run({ room, expiresAt }),
    pruneDeliveries: async (deliveredBefore, deadBefore) => pruneDeliveries.run({ deliveredBefore, deadBefore }).changes,
    async savepoint<T>(fn: () => Promise<T>): Promise<T> {
      const before = new Map(heads);
      flushTurns();
      openSavepoint.run();
      try {
        const value = await fn();
        flushTurns();
        releaseSavepoint.run();
        return value;
      } catch (err) {
        dropTurns();
        knownRooms.clear();
        rollbackSavepoint.run();
        releaseSavepoint.run();
        heads.clear();
        for (const [room, seq] of before) heads.set(room, seq); // its appends were rolled back
        throw err;
      }
    },
  };
}

/** Fills in the mention columns of messages stored before they existed, from their text (once: new rows carry them). */
function backfillMentions(conn: Database.Database): void {
  const pending = conn.prepare(`SELECT room, seq, agent_id AS agentId, text FROM messages WHERE mention_keys IS NULL LIMIT 500`);
  const update = conn.prepare(`UPDATE messages SET mentions = @mentions, mention_keys = @mentionKeys WHERE room = @room AND seq = @seq`);
  const batch = conn.transaction((list: { room: string; seq: number; agentId: string; text: string }[]) => {
    for (const m of list) update.run({ room: m.room, seq: m.seq, ...rows.backfilledMentions(m) });
  });
  for (;;) {
    const list = pending.all() as { room: string; seq: number; agentId: string; text: string }[];
    if (list.length === 0) return;
    batch(list);
  }
}

/** Opens (creating if needed) the SQLite database in dataDir and applies the committed migrations. */
export function openSqliteStore(dataDir: string): Store {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, "parley.db");
  const writeConn = connect(file, false);
  migrate(drizzle(writeConn, { schema }), { migrationsFolder: MIGRATIONS });
  backfillMentions(writeConn);
  const readConn = connect(file, true);
  const { reader } = readerOn(readConn);
  const heads: Heads = new Map();
  const tx = writerOn(writeConn, heads);
  const commitListeners: ((heads: ReadonlyMap<string, number>) => void)[] = [];

  // The writer lock: each write transaction runs after the previous one has settled.
  let tail: Promise<unknown> = Promise.resolve();
  // IMMEDIATE: the file's write lock from the start, so another process on the same file waits
  // (busy_timeout) instead of failing at commit.
  const begin = writeConn.prepare("BEGIN IMMEDIATE");
  const commit = writeConn.prepare("COMMIT");
  // Changes when another connection (another process on the file) has committed since it was read.
  const dataVersion = writeConn.prepare("PRAGMA data_version").pluck();
  let version = dataVersion.get();
  function write<T>(_rooms: readonly string[], fn: (tx: StoreWriter) => Promise<T>, options: WriteOptions = {}): Promise<T> {
    const run = async (): Promise<T> => {
      heads.clear();
      begin.run();
      const now = dataVersion.get();
      if (now !== version) {
        version = now;
        tx.forgetRooms();
      }
      let value: T;
      try {
        value = await fn(tx);
        tx.flushTurns();
        commit.run();
      } catch (err) {
        tx.dropTurns();
        tx.forgetRooms();
        if (writeConn.inTransaction) writeConn.exec("ROLLBACK");
        heads.clear();
        throw err;
      }
      const committed = new Map(heads);
      heads.clear();
      options.committed?.();
      if (committed.size > 0) for (const listener of commitListeners) listener(committed);
      return value;
    };
    return serially(run);
  }
  function serially<T>(run: () => Promise<T>): Promise<T> {
    const result = tail.then(run, run);
    tail = result.catch(() => {});
    return result;
  }
  const checkpointer = startCheckpointer(file, serially);

  return {
    ...reader,
    dialect: "sqlite",
    write,
    // Rate limits and job leases of a single process: in memory (one instance, nothing to share).
    limits: new MemoryBuckets(),
    jobs: { leaseJob: async () => true, releaseJob: async () => {} },
    onCommit: (listener) => void commitListeners.push(listener),
    async snapshot(fn) {
      // A connection of its own: its read transaction holds one WAL snapshot without holding back
      // the readers of the shared read connection.
      const conn = connect(file, true);
      try {
        conn.exec("BEGIN");
        const { reader: r } = readerOn(conn);
        return await fn(r);
      } finally {
        conn.close();
      }
    },
    async close() {
      await tail.catch(() => {});
      void checkpointer.terminate();
      readConn.close();
      writeConn.close();
    },
  };
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

const CHECKPOINTER = `
const fs = require("node:fs");
const os = require("node:os");
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.file);
// RESTART waits this long for a reader still on the WAL it would restart: a read statement of the
// main thread ends sooner; a snapshot held longer makes it fail, and it is tried again later.
db.pragma("busy_timeout = 10");
let asked = false;
let retryAt = 0;
parentPort.on("message", () => {
  let busy = 1;
  try { ({ busy } = db.pragma("wal_checkpoint(RESTART)")[0]); } catch { /* busy */ }
  if (busy) retryAt = Date.now() + workerData.retryMs;
  asked = false;
  parentPort.postMessage("restarted");
});
// The WAL's size without checkpointing it: the wal-index header in the -shm file
// (https://www.sqlite.org/walformat.html) holds the last frame (mxFrame, bytes 16-19) and how far
// checkpoints have copied (nBackfill, bytes 96-99), in the machine's byte order. Unreadable: undefined.
const header = Buffer.alloc(100);
const read32 = os.endianness() === "LE" ? (at) => header.readUInt32LE(at) : (at) => header.readUInt32BE(at);
// Opened for each look, so that no descriptor outlives the thread (terminate() closes none).
function walIndex() {
  let fd;
  try {
    fd = fs.openSync(workerData.file + "-shm", "r");
    if (fs.readSync(fd, header, 0, 100, 0) < 100) return undefined;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
  return { frames: read32(16), copied: read32(96) };
}
let lastFrames = -1;
let changedAt = Date.now();
setInterval(() => {
  if (asked) return;
  const wal = walIndex();
  if (wal) {
    const now = Date.now();
    if (wal.frames !== lastFrames) {
      lastFrames = wal.frames;
      changedAt = now;
    }
    // A small WAL still being written is left alone: once it is all copied, the next write
    // transaction restarts it, and that writes and fsyncs a new WAL header on the main thread.
    const waiting = wal.frames - wal.copied;
    if (waiting <= 0 || (waiting < workerData.checkpointPages && now - changedAt < workerData.idleMs)) return;
  }
  let log = 0;
  try { ({ log } = db.pragma("wal_checkpoint(PASSIVE)")[0]); } catch { return; /* busy: next time */ }
  if (log >= workerData.restartPages && Date.now() >= retryAt) {
    asked = true;
    parentPort.postMessage("quiet");
  }
}, workerData.intervalMs);
`;

/** WAL pages past which the checkpointer restarts the WAL (16 MB). */
const RESTART_PAGES = 4096;
/** WAL pages not yet copied to the database file past which the checkpointer copies them (SQLite's own autocheckpoint: 4 MB). */
const CHECKPOINT_PAGES = 1000;
/** A WAL left unchanged this long is copied whatever its size, so that an idle database file is current. */
const CHECKPOINT_IDLE_MS = 30_000;

/**
 * A thread with its own connection that moves the WAL into the database file, off the main
 * thread: it looks ten times a second and copies once CHECKPOINT_PAGES are waiting, or the WAL
 * has been idle for CHECKPOINT_IDLE_MS. Not sooner: a WAL copied to its end is restarted by the next
 * write transaction, which then writes and fsyncs the new WAL's header on the main thread (measured
 * here: 0.4 ms, with the event loop blocked), so copying after every quiet 100 ms made nearly every
 * post of a quiet room pay an fsync that `synchronous = NORMAL` is chosen to avoid. Under
 * continuous writes those PASSIVE checkpoints never catch up with the writer, so the WAL would never
 * restart: once it is past RESTART_PAGES the thread asks for a quiet moment, which `serially` (the
 * writer queue) gives it as a turn of its own. The writes wait in the queue (reads and streams go
 * on) while it backfills the last frames and restarts the WAL, so the WAL stays bounded and no
 * commit pays for a checkpoint.
 */
function startCheckpointer(file: string, serially: (run: () => Promise<void>) => Promise<void>): Worker {
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  const worker = new Worker(CHECKPOINTER, { eval: true, workerData: { file, driver, intervalMs: 100, checkpointPages: CHECKPOINT_PAGES, idleMs: CHECKPOINT_IDLE_MS, restartPages: RESTART_PAGES, retryMs: 250 } });
  let restarted = () => {};
  const quiet = () =>
    new Promise<void>((resolve) => {
      // A thread that does not answer holds the writes for a second at most.
      const timer = setTimeout(done, 1000);
      function done() {
        clearTimeout(timer);
        restarted = () => {};
        resolve();
      }
      restarted = done;
      worker.postMessage("go");
    });
  worker.on("message", (msg) => {
    if (msg === "quiet") void serially(quiet);
    else if (msg === "restarted") restarted();
  });
  worker.on("error", (err) => console.error("WAL checkpointer stopped:", err.message));
  // After the listeners (a "message" listener refs the worker): the thread never keeps the process alive.
  worker.unref();
  return worker;
}
