import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { drizzle } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { and, asc, count, desc, eq, gt, lte, ne, sql } from "drizzle-orm";
import * as schema from "./schema";
import type { RoomListQuery, RoomRow, Store, StoreWriter } from "./types";
import type { Auth, Discrepancy, Handshake, Revision, RevisionKind, Thread, ThreadStatus } from "../domain/ledger";
import type { BoardAgent, TaskState, TaskStatus } from "../domain/tasks";
import { deadlineOf, type TurnState, type TurnStatus, type TurnsRoom, type TurnsStatus } from "../domain/turns";

const { rooms, events, messages, roomAgents, signatureNonces, threads, revisions, discrepancies, handshakes } = schema;
const { tasks, boardAgents } = schema; // task board (issue 7)
const { turnRooms, turns } = schema; // turns mode (issue 6)
const ROOM_TABLES = [events, messages, roomAgents, signatureNonces, threads, revisions, discrepancies, handshakes, tasks, boardAgents, turnRooms, turns];
const MIGRATIONS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../drizzle");

const SORT_COLUMNS = {
  active: [desc(rooms.lastActivityAt)],
  new: [desc(rooms.createdAt)],
  messages: [desc(rooms.messageCount), desc(rooms.lastActivityAt)],
  agents: [desc(rooms.agentCount), desc(rooms.lastActivityAt)],
} as const;

/** Opens (creating if needed) the SQLite database in dataDir and applies the committed migrations. */
export function openSqliteStore(dataDir: string): Store {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, "parley.db");
  const sqlite = new Database(file);
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("busy_timeout = 5000");
  sqlite.pragma("synchronous = NORMAL"); // WAL + NORMAL: commits survive a process crash and do not fsync
  // WAL checkpoints (the fsyncs) run on another thread; the main thread only checkpoints if that
  // thread falls far behind (about 40 MB of WAL).
  sqlite.pragma("wal_autocheckpoint = 10000");
  const checkpointer = startCheckpointer(file);
  sqlite.pragma("foreign_keys = ON");
  const db = drizzle(sqlite, { schema });
  migrate(db, { migrationsFolder: MIGRATIONS });

  const p = sql.placeholder;
  /** A room that takes writes at `now`: open, and not past its expiry. */
  const liveRoom = (now: string) => and(eq(rooms.status, "open"), gt(rooms.expiresAt, now));
  // The hot paths, prepared once.
  const getRoom = db.select().from(rooms).where(eq(rooms.uuid, p("uuid"))).prepare();
  const listMessages = db
    .select()
    .from(messages)
    .where(and(eq(messages.room, p("room")), gt(messages.seq, p("since"))))
    .orderBy(asc(messages.seq))
    .limit(p("limit"))
    .prepare();
  const tailMessages = db
    .select()
    .from(messages)
    .where(eq(messages.room, p("room")))
    .orderBy(desc(messages.seq))
    .limit(p("limit"))
    .prepare();
  const hasMessage = db
    .select({ seq: messages.seq })
    .from(messages)
    .where(and(eq(messages.room, p("room")), eq(messages.seq, p("seq"))))
    .prepare();
  const listEvents = db
    .select()
    .from(events)
    .where(and(eq(events.room, p("room")), gt(events.seq, p("since"))))
    .orderBy(asc(events.seq))
    .limit(p("limit"))
    .prepare();
  const leafHashes = db
    .select({ leafHash: events.leafHash })
    .from(events)
    .where(and(eq(events.room, p("room")), gt(events.seq, p("after")), lte(events.seq, p("size"))))
    .orderBy(asc(events.seq))
    .prepare();
  const checkpointAt = db
    .select({ checkpoint: events.checkpoint })
    .from(events)
    .where(and(eq(events.room, p("room")), eq(events.seq, p("size"))))
    .prepare();
  const agentKey = db
    .select({ pubkeyHex: roomAgents.pubkeyHex })
    .from(roomAgents)
    .where(and(eq(roomAgents.room, p("room")), eq(roomAgents.agentId, p("agent"))))
    .prepare();
  const insertEvent = db.insert(events).values({
    room: p("room"), seq: p("seq"), ts: p("ts"), type: p("type"), actor: p("actor"), payload: p("payload"),
    server: p("server"), prev: p("prev"), sig: p("sig"), leafHash: p("leafHash"), checkpoint: p("checkpoint"),
  }).prepare();
  // drizzle types `set` without placeholders; a placeholder wrapped in sql`` is accepted.
  const ph = (name: string) => sql`${p(name)}`;
  const updateRoomAfterAppend = db.update(rooms).set({
    headSize: ph("headSize"), headLeaf: ph("headLeaf"), headRoot: ph("headRoot"), frontier: ph("frontier"),
    checkpoint: ph("checkpoint"), status: ph("status"), messageCount: ph("messageCount"), agentCount: ph("agentCount"),
    lastActivityAt: ph("lastActivityAt"), expiresAt: ph("expiresAt"),
  }).where(eq(rooms.uuid, p("uuid"))).prepare();
  const insertMessage = db.insert(messages).values({
    room: p("room"), seq: p("seq"), agentId: p("agentId"), text: p("text"), ts: p("ts"), replyTo: p("replyTo"),
    auth: p("auth"), keyRef: p("keyRef"), pubkeyHex: p("pubkeyHex"), signatureHex: p("signatureHex"),
    tsIso: p("tsIso"), memoryRoot: p("memoryRoot"), hash: p("hash"),
  }).prepare();
  const useNonce = db
    .insert(signatureNonces)
    .values({ room: p("room"), pubkeyHex: p("pubkey"), nonce: p("nonce"), seq: p("seq") })
    .onConflictDoNothing()
    .prepare();
  // An agent counts from its first message; a row made by pinning a key (first_seq 0: a signed
  // claim, join or thread before any message) is not one yet.
  const addAgent = sqlite.prepare(
    `INSERT INTO room_agents (room, agent_id, first_seq) VALUES (@room, @agent, @seq)
     ON CONFLICT (room, agent_id) DO UPDATE SET first_seq = excluded.first_seq WHERE room_agents.first_seq = 0`,
  );

  // ---- task board (issue 7) ----
  const openAtPriority = db.select().from(tasks)
    .where(and(eq(tasks.room, p("room")), eq(tasks.status, "open"), eq(tasks.priority, p("priority"))))
    .orderBy(sql`rowid`).limit(p("limit")).offset(p("offset")).prepare();
  const getTaskRow = db.select().from(tasks).where(and(eq(tasks.room, p("room")), eq(tasks.id, p("id")))).prepare();
  const getBoardAgentRow = db.select().from(boardAgents).where(and(eq(boardAgents.room, p("room")), eq(boardAgents.agentId, p("agentId")))).prepare();
  // The upserts on the claim path, prepared once (plain SQL: drizzle builds an upsert per call).
  const upsertTask = sqlite.prepare(
    `INSERT INTO tasks (room, id, status, priority, claimant, lease_until, lease_hash, data)
     VALUES (@room, @id, @status, @priority, @claimant, @leaseUntil, @leaseHash, @data)
     ON CONFLICT (room, id) DO UPDATE SET status = excluded.status, priority = excluded.priority, claimant = excluded.claimant,
       lease_until = excluded.lease_until, lease_hash = excluded.lease_hash, data = excluded.data`,
  );
  const upsertBoardAgent = sqlite.prepare(
    `INSERT INTO board_agents (room, agent_id, capabilities, auth, key_ref, last_seen, lost)
     VALUES (@room, @agentId, @capabilities, @auth, @keyRef, @lastSeen, @lost)
     ON CONFLICT (room, agent_id) DO UPDATE SET capabilities = excluded.capabilities, auth = excluded.auth, key_ref = excluded.key_ref,
       last_seen = excluded.last_seen, lost = excluded.lost`,
  );
  const board = {
    getTask: (room: string, id: number) => {
      const row = getTaskRow.get({ room, id });
      return row && toTask(row);
    },
    listTasks: (room: string, status?: TaskStatus) =>
      db.select().from(tasks).where(and(eq(tasks.room, room), status === undefined ? undefined : eq(tasks.status, status))).orderBy(asc(tasks.id)).all().map(toTask),
    // rowid order is id order: a task's row is inserted with its task.created event and only updated after.
    openTasksAtPriority: (room: string, priority: number, limit: number, offset: number) =>
      openAtPriority.all({ room, priority, limit, offset }).map(toTask),
    listBoardAgents: (room: string) =>
      db.select().from(boardAgents).where(eq(boardAgents.room, room)).orderBy(asc(boardAgents.agentId)).all().map(toBoardAgent),
    getBoardAgent: (room: string, agentId: string) => {
      const row = getBoardAgentRow.get({ room, agentId });
      return row && toBoardAgent(row);
    },
    // Both only in live rooms: a closed room's board stands still until it is reopened, and an
    // expired one waits to be purged (the sweepers would otherwise find the same rows forever).
    expiredLeases: (now: string, limit: number) =>
      db.select({ room: tasks.room, id: tasks.id }).from(tasks).innerJoin(rooms, eq(rooms.uuid, tasks.room))
        .where(and(eq(tasks.status, "claimed"), lte(tasks.leaseUntil, now), liveRoom(now))).limit(limit).all(),
    silentAgents: (cutoff: string, now: string, limit: number) =>
      db.select({ room: boardAgents.room, agentId: boardAgents.agentId }).from(boardAgents).innerJoin(rooms, eq(rooms.uuid, boardAgents.room))
        .where(and(eq(boardAgents.lost, false), lte(boardAgents.lastSeen, cutoff), liveRoom(now))).limit(limit).all(),
  };
  const boardWriter = {
    saveTask(room: string, t: TaskState) {
      const { status, priority, claimant, lease_until, lease_hash, ...rest } = t;
      upsertTask.run({ room, id: t.id, status, priority, claimant, leaseUntil: lease_until, leaseHash: lease_hash, data: JSON.stringify(rest) });
    },
    saveBoardAgent(room: string, a: BoardAgent) {
      upsertBoardAgent.run({ room, agentId: a.agent_id, capabilities: JSON.stringify(a.capabilities), auth: a.auth, keyRef: a.key_ref, lastSeen: a.last_seen, lost: a.lost ? 1 : 0 });
    },
  };

  // ---- turns mode (issue 6) ----
  const getTurnsRoomRow = db.select().from(turnRooms).where(eq(turnRooms.room, p("room"))).prepare();
  const getTurnRow = db.select().from(turns).where(and(eq(turns.room, p("room")), eq(turns.id, p("id")))).prepare();
  const upsertTurnsRoom = sqlite.prepare(
    `INSERT INTO turn_rooms (room, status, data) VALUES (@room, @status, @data)
     ON CONFLICT (room) DO UPDATE SET status = excluded.status, data = excluded.data`,
  );
  const upsertTurn = sqlite.prepare(
    `INSERT INTO turns (room, id, agent_id, status, deadline, lease_hash, data) VALUES (@room, @id, @agentId, @status, @deadline, @leaseHash, @data)
     ON CONFLICT (room, id) DO UPDATE SET agent_id = excluded.agent_id, status = excluded.status, deadline = excluded.deadline,
       lease_hash = excluded.lease_hash, data = excluded.data`,
  );
  const turnsReader = {
    getTurnsRoom: (room: string) => {
      const row = getTurnsRoomRow.get({ room });
      return row && toTurnsRoom(row);
    },
    getTurn: (room: string, id: number) => {
      const row = getTurnRow.get({ room, id });
      return row && toTurn(row);
    },
    listTurns: (room: string) => db.select().from(turns).where(eq(turns.room, room)).orderBy(asc(turns.id)).all().map(toTurn),
    lastTurns: (room: string, limit: number) =>
      db.select().from(turns).where(eq(turns.room, room)).orderBy(desc(turns.id)).limit(limit).all().map(toTurn).reverse(),
    // Only in live rooms: a closed room's clock stands still until it is reopened.
    dueTurns: (now: string, limit: number) =>
      db.select({ room: turns.room, id: turns.id }).from(turns).innerJoin(rooms, eq(rooms.uuid, turns.room))
        .where(and(sql`${turns.status} IN ('ready', 'claimed')`, lte(turns.deadline, now), liveRoom(now))).limit(limit).all(),
  };
  const turnsWriter = {
    saveTurnsRoom(room: string, r: TurnsRoom) {
      const { status, ...rest } = r;
      upsertTurnsRoom.run({ room, status, data: JSON.stringify(rest) });
    },
    saveTurn(room: string, t: TurnState) {
      const { agent_id, status, lease_hash, ...rest } = t;
      const deadline = deadlineOf(t);
      upsertTurn.run({ room, id: t.id, agentId: agent_id, status, deadline, leaseHash: lease_hash, data: JSON.stringify(rest) });
    },
  };

  const reader = {
    ...board,
    ...turnsReader,
    getRoom: (uuid: string) => getRoom.get({ uuid }),
    listPublicRooms(query: RoomListQuery) {
      const where = and(
        eq(rooms.isPublic, true),
        ne(rooms.status, "expired"),
        gt(rooms.expiresAt, query.now),
        // Wildcards in the search text are literal: escape them and name the escape character.
        query.q ? sql`${rooms.description} LIKE ${`%${escapeLike(query.q)}%`} ESCAPE '\\'` : undefined,
      );
      const rows = db
        .select()
        .from(rooms)
        .where(where)
        .orderBy(...SORT_COLUMNS[query.sort])
        .limit(query.limit)
        .offset(query.offset)
        .all();
      const total = db.select({ n: count() }).from(rooms).where(where).get()?.n ?? 0;
      return { rows, total };
    },
    listMessages: (room: string, since: number, limit: number) => listMessages.all({ room, since, limit }),
    tailMessages: (room: string, limit: number) => tailMessages.all({ room, limit }).reverse(),
    hasMessage: (room: string, seq: number) => hasMessage.get({ room, seq }) !== undefined,
    listEvents: (room: string, since: number, limit: number) => listEvents.all({ room, since, limit }),
    leafHashes: (room: string, size: number, after = 0) => leafHashes.all({ room, size, after }).map((r) => r.leafHash),
    checkpointAt: (room: string, size: number) => checkpointAt.get({ room, size })?.checkpoint,
    agentKey: (room: string, agent: string) => agentKey.get({ room, agent }),
    ping: () => void sqlite.prepare("select 1").get(),
    getThread(room: string, id: number) {
      const row = db.select().from(threads).where(and(eq(threads.room, room), eq(threads.id, id))).get();
      return row && { thread: toThread(row), openerKey: row.openerKey };
    },
    listThreads: (room: string) => db.select().from(threads).where(eq(threads.room, room)).orderBy(asc(threads.id)).all().map(toThread),
    listRevisions: (room: string, threadId?: number) =>
      db
        .select()
        .from(revisions)
        .where(and(eq(revisions.room, room), threadId === undefined ? undefined : eq(revisions.threadId, threadId)))
        .orderBy(asc(revisions.id))
        .all()
        .map(toRevision),
    listDiscrepancies: (room: string) =>
      db.select().from(discrepancies).where(eq(discrepancies.room, room)).orderBy(asc(discrepancies.id)).all().map(toDiscrepancy),
    listHandshakes: (room: string) =>
      db.select().from(handshakes).where(eq(handshakes.room, room)).orderBy(asc(handshakes.id)).all().map(toHandshake),
    counts: () => ({
      rooms: db.select({ n: count() }).from(rooms).where(ne(rooms.status, "expired")).get()?.n ?? 0,
      events: db.select({ n: count() }).from(events).get()?.n ?? 0,
    }),
  };

  const writer: StoreWriter = {
    ...reader,
    ...boardWriter,
    ...turnsWriter,
    insertRoom: (row: RoomRow) => void db.insert(rooms).values(row).run(),
    updateRoomAfterAppend: (uuid, room) => void updateRoomAfterAppend.run({ ...room, uuid }),
    insertEvent: (row) => void insertEvent.run({ ...row, sig: row.sig ?? null }),
    insertMessage: (row) => void insertMessage.run(row),
    addAgent: (room, agent, seq) => addAgent.run({ room, agent, seq }).changes === 1,
    updateArbiterState: (uuid, state) => void db.update(rooms).set(state).where(eq(rooms.uuid, uuid)).run(),
    saveThread(room, t, openerKey) {
      const row = {
        room, id: t.id, subject: t.subject, subjectKey: t.subject_key, currentValue: t.current_value, status: t.status,
        openedBy: t.opened_by, openedByAuth: t.opened_by_auth, openerKey, revisionsCount: t.revisions_count,
        lastRevision: JSON.stringify(t.last_revision), confirmations: JSON.stringify(t.confirmations), createdAt: t.created_at, updatedAt: t.updated_at,
      };
      db.insert(threads).values(row).onConflictDoUpdate({ target: [threads.room, threads.id], set: row }).run();
    },
    insertRevision(room, r) {
      db.insert(revisions).values({
        room, id: r.id, threadId: r.thread_id, kind: r.kind, value: r.value, authorAgentId: r.author_agent_id, auth: r.auth,
        via: r.via, sourceMsgId: r.source_msg_id, quote: r.quote, createdAt: r.created_at,
      }).run();
    },
    saveDiscrepancy(room, d) {
      const row = {
        room, id: d.id, threadId: d.thread_id, description: d.description, severity: d.severity, sourceMsgId: d.source_msg_id,
        recordedBy: d.recorded_by, status: d.status, resolvedBy: d.resolved_by, createdAt: d.created_at, resolvedAt: d.resolved_at,
      };
      db.insert(discrepancies).values(row).onConflictDoUpdate({ target: [discrepancies.room, discrepancies.id], set: row }).run();
    },
    insertHandshake(room, h) {
      db.insert(handshakes).values({
        room, id: h.id, agentId: h.agent_id, contextHash: h.context_hash, auth: h.auth, pubkeyHex: h.pubkey_hex,
        signatureHex: h.signature_hex, ts: h.ts, nonce: h.nonce, createdAt: h.created_at,
      }).run();
    },
    useNonce: (room, pubkey, nonce, seq) => useNonce.run({ room, pubkey, nonce, seq }).changes === 1,
    pinAgentKey: (room, agentId, pubkeyHex) =>
      void db
        .insert(roomAgents)
        .values({ room, agentId, firstSeq: 0, pubkeyHex })
        .onConflictDoUpdate({ target: [roomAgents.room, roomAgents.agentId], set: { pubkeyHex } })
        .run(),
    deleteRoomData(uuid, keepTombstone) {
      for (const table of ROOM_TABLES) {
        db.delete(table).where(eq(table.room, uuid)).run();
      }
      if (keepTombstone) {
        db.update(rooms).set({ status: "expired", description: "", frontier: "[]", checkpoint: "" })
          .where(eq(rooms.uuid, uuid)).run();
      } else {
        db.delete(rooms).where(eq(rooms.uuid, uuid)).run();
      }
    },
    expiredRooms: (now, limit) =>
      db
        .select({ uuid: rooms.uuid })
        .from(rooms)
        .where(and(lte(rooms.expiresAt, now), ne(rooms.status, "expired")))
        .limit(limit)
        .all()
        .map((r) => r.uuid),
  };

  // One immediate transaction per write: concurrent writers queue on SQLite's lock, so a room's
  // seq and prev chain can never fork, even with several processes on one file.
  const immediate = sqlite.transaction((fn: (tx: StoreWriter) => unknown) => fn(writer));

  return {
    ...reader,
    write: <T>(fn: (tx: StoreWriter) => T) => immediate.immediate(fn) as T,
    close() {
      void checkpointer.terminate();
      sqlite.close();
    },
  };
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

const CHECKPOINTER = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma("busy_timeout = 5000");
setInterval(() => {
  try { db.pragma("wal_checkpoint(PASSIVE)"); } catch { /* busy: next time */ }
}, workerData.intervalMs);
`;

/** A thread with its own connection that moves the WAL into the database file every second. */
function startCheckpointer(file: string): Worker {
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  const worker = new Worker(CHECKPOINTER, { eval: true, workerData: { file, driver, intervalMs: 1000 } });
  worker.on("error", (err) => console.error("WAL checkpointer stopped:", err.message));
  worker.unref();
  return worker;
}

function toRevision(r: typeof revisions.$inferSelect): Revision {
  return {
    id: r.id, thread_id: r.threadId, kind: r.kind as RevisionKind, value: r.value, author_agent_id: r.authorAgentId, auth: r.auth as Auth,
    via: r.via as Revision["via"], source_msg_id: r.sourceMsgId, quote: r.quote, created_at: r.createdAt, seq: r.id,
  };
}

function toThread(r: typeof threads.$inferSelect): Thread {
  return {
    id: r.id, subject: r.subject, subject_key: r.subjectKey, current_value: r.currentValue, status: r.status as ThreadStatus,
    opened_by: r.openedBy, opened_by_auth: r.openedByAuth as Auth, revisions_count: r.revisionsCount,
    last_revision: JSON.parse(r.lastRevision) as Revision, confirmations: JSON.parse(r.confirmations) as Thread["confirmations"],
    created_at: r.createdAt, updated_at: r.updatedAt,
  };
}

function toDiscrepancy(r: typeof discrepancies.$inferSelect): Discrepancy {
  return {
    id: r.id, thread_id: r.threadId, description: r.description, severity: r.severity as Discrepancy["severity"], source_msg_id: r.sourceMsgId,
    recorded_by: r.recordedBy, status: r.status as Discrepancy["status"], resolved_by: r.resolvedBy, created_at: r.createdAt, resolved_at: r.resolvedAt,
  };
}

function toHandshake(r: typeof handshakes.$inferSelect): Handshake {
  return {
    id: r.id, agent_id: r.agentId, context_hash: r.contextHash, auth: r.auth as Auth, pubkey_hex: r.pubkeyHex,
    signature_hex: r.signatureHex, ts: r.ts, nonce: r.nonce, created_at: r.createdAt,
  };
}

// ---- task board (issue 7) ----
function toTask(r: typeof tasks.$inferSelect): TaskState {
  const rest = JSON.parse(r.data) as Omit<TaskState, "status" | "priority" | "claimant" | "lease_until" | "lease_hash">;
  const t = { ...rest, status: r.status as TaskStatus, priority: r.priority, claimant: r.claimant, lease_until: r.leaseUntil, lease_hash: r.leaseHash };
  // The public key order of a task, whatever order the columns were read in.
  return {
    id: t.id, title: t.title, description: t.description, requires: t.requires, priority: t.priority, status: t.status,
    created_by: t.created_by, reviewer: t.reviewer, context_refs: t.context_refs, claimant: t.claimant, claimant_key: t.claimant_key,
    lease_until: t.lease_until, attempt: t.attempt, failures: t.failures, max_failures: t.max_failures, failure_reasons: t.failure_reasons,
    handoff: t.handoff, receipt: t.receipt, review: t.review, revision: t.revision, created_at: t.created_at, updated_at: t.updated_at,
    lease_hash: t.lease_hash,
  };
}

function toBoardAgent(r: typeof boardAgents.$inferSelect): BoardAgent {
  return {
    agent_id: r.agentId, capabilities: JSON.parse(r.capabilities) as string[], auth: r.auth as BoardAgent["auth"], key_ref: r.keyRef,
    last_seen: r.lastSeen, lost: r.lost,
  };
}

// ---- turns mode (issue 6) ----
function toTurnsRoom(r: typeof turnRooms.$inferSelect): TurnsRoom {
  const rest = JSON.parse(r.data) as Omit<TurnsRoom, "status">;
  return {
    status: r.status as TurnsStatus, reason: rest.reason, config: rest.config, participants: rest.participants, round: rest.round,
    current: rest.current, last_agent: rest.last_agent, proposal: rest.proposal, updated_at: rest.updated_at,
  };
}

function toTurn(r: typeof turns.$inferSelect): TurnState {
  const t = JSON.parse(r.data) as Omit<TurnState, "agent_id" | "status" | "lease_hash">;
  // The public key order of a turn, whatever order the columns were read in.
  return {
    id: t.id, round: t.round, slot: t.slot, agent_id: r.agentId, phase: t.phase, status: r.status as TurnStatus, available_at: t.available_at,
    claim_by: t.claim_by, lease_until: t.lease_until, result: t.result, reason: t.reason, message_id: t.message_id, opened_at: t.opened_at,
    closed_at: t.closed_at, lease_hash: r.leaseHash, claim_seq: t.claim_seq,
  };
}
