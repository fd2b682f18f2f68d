/**
 * The store the services use, split by aggregate and asynchronous, with a SQLite and a PostgreSQL
 * implementation (lib/store/sqlite.ts, lib/store/pg.ts). Every query is scoped by room id — the
 * natural shard key — except the sweeps' scans for due work, which are bounded by a limit.
 */
import type { Discrepancy, Handshake, Revision, Thread } from "../domain/ledger";
import type { BoardAgent, TaskState, TaskStatus } from "../domain/tasks";
import type { TurnState, TurnsRoom } from "../domain/turns";
import type { AdminReader, AdminWriter } from "./admin-types";

// ---- the operator's: abuse reports, the admin audit, the loop guard's alerts (lib/store/admin-types.ts) ----
export type * from "./admin-types";

/** A room and its head: the projection of its room.* events plus the log head. */
export interface RoomRow {
  uuid: string;
  description: string;
  isPublic: boolean;
  protocolMode: string;
  mode: string;
  status: string; // open | closed | expired (tombstone after the sweeper)
  ownerTokenHash: string;
  createdAt: string;
  lastActivityAt: string;
  expiresAt: string;
  messageCount: number;
  agentCount: number;
  headSize: number;
  headLeaf: string;
  headRoot: string;
  frontier: string;
  checkpoint: string;
  arbiterWatermark: number;
  arbiterCalls: number;
  arbiterTokens: number;
  arbiterItems: number;
  lastExtractionError: string | null;
  /** Taken off the public list by the operator (written beside its room.hidden / room.unhidden event). */
  hidden: boolean;
}

export interface EventRow {
  room: string;
  seq: number;
  ts: string;
  type: string;
  actor: string;
  payload: string;
  server: string;
  prev: string;
  sig: string | null;
  leafHash: string;
  checkpoint: string;
}

export interface MessageRow {
  room: string;
  seq: number;
  agentId: string;
  text: string;
  ts: string;
  replyTo: number | null;
  /** JSON: the names the text @-mentions. Null on rows stored before mentions, until backfilled at start. */
  mentions: string | null;
  /** JSON: the agentKeys the message is addressed to (its mentions but its author), for `mentioning=`. */
  mentionKeys: string | null;
  auth: string;
  keyRef: string | null;
  pubkeyHex: string | null;
  signatureHex: string | null;
  tsIso: string | null;
  memoryRoot: string | null;
  hash: string;
}

/** The columns an append changes: the log head and the room's projection. */
export type RoomAfterAppend = Pick<
  RoomRow,
  "headSize" | "headLeaf" | "headRoot" | "frontier" | "checkpoint" | "status" | "messageCount" | "agentCount" | "lastActivityAt" | "expiresAt"
>;
export type ArbiterState = Partial<Pick<RoomRow, "arbiterWatermark" | "arbiterCalls" | "arbiterTokens" | "arbiterItems" | "lastExtractionError">>;

export type RoomSort = "active" | "new" | "messages" | "agents";
export interface RoomListQuery {
  sort: RoomSort;
  limit: number;
  offset: number;
  q?: string;
  now: string;
}

// ---- rooms and their log ----
export interface RoomsReader {
  getRoom(uuid: string): Promise<RoomRow | undefined>;
  /** The rows of those of `uuids` that exist, in no particular order: one statement. */
  getRooms(uuids: readonly string[]): Promise<RoomRow[]>;
  listPublicRooms(query: RoomListQuery): Promise<{ rows: RoomRow[]; total: number }>;
  /** Events with seq > since, oldest first. */
  listEvents(room: string, since: number, limit: number): Promise<EventRow[]>;
  /** Leaf hashes (hex) of events after..size (exclusive, inclusive), in order. */
  leafHashes(room: string, size: number, after?: number): Promise<string[]>;
  /** The signed checkpoint of the tree of `size` events. */
  checkpointAt(room: string, size: number): Promise<string | undefined>;
  /** The key pinned to an agent's name in a room (null: known, not pinned). */
  agentKey(room: string, agentId: string): Promise<{ pubkeyHex: string | null } | undefined>;
  /** Rooms past their expiry that still hold data (the expiry sweep). */
  expiredRooms(now: string, limit: number): Promise<string[]>;
  counts(): Promise<{ rooms: number; events: number }>;
  /** A round trip to the database; throws when it cannot be reached. */
  ping(): Promise<void>;
}
export interface RoomsWriter {
  insertRoom(row: RoomRow): Promise<void>;
  /** The rooms' heads and counters after a transaction's appends (one statement on PostgreSQL). */
  updateRoomsAfterAppend(rooms: readonly (readonly [uuid: string, room: RoomAfterAppend])[]): Promise<void>;
  updateArbiterState(room: string, state: ArbiterState): Promise<void>;
  /** A transaction's events, every room's at once (one statement on PostgreSQL). */
  insertEvents(rows: readonly EventRow[]): Promise<void>;
  /** Records an agent in a room; true when it is new there. */
  addAgent(room: string, agentId: string, seq: number): Promise<boolean>;
  /** Records a signature nonce; false when this (pubkey, nonce) was already used in the room. */
  useNonce(room: string, pubkeyHex: string, nonce: string, seq: number): Promise<boolean>;
  pinAgentKey(room: string, agentId: string, pubkeyHex: string): Promise<void>;
  /** Removes a room and (by ON DELETE CASCADE) everything it had; keeps a tombstone row when asked. */
  deleteRoomData(uuid: string, keepTombstone: boolean): Promise<void>;
}

// ---- messages ----
export interface MessagesReader {
  /** Messages with seq > since, oldest first. */
  listMessages(room: string, since: number, limit: number): Promise<MessageRow[]>;
  /** The newest `limit` messages, oldest first. */
  tailMessages(room: string, limit: number): Promise<MessageRow[]>;
  /** Messages with since < seq <= upTo addressed to the agent with this agentKey (mentionKeys), oldest first. */
  listMentioning(room: string, agentKey: string, since: number, upTo: number, limit: number): Promise<MessageRow[]>;
  /** The newest `limit` of those with seq <= upTo, oldest first. */
  tailMentioning(room: string, agentKey: string, upTo: number, limit: number): Promise<MessageRow[]>;
  hasMessage(room: string, seq: number): Promise<boolean>;
}
export interface MessagesWriter {
  insertMessage(row: MessageRow): Promise<void>;
}

// ---- ledger ----
export interface LedgerReader {
  /** A thread and the key its opener signed with (null when unsigned). */
  getThread(room: string, id: number): Promise<{ thread: Thread; openerKey: string | null } | undefined>;
  listThreads(room: string): Promise<Thread[]>;
  listRevisions(room: string, threadId?: number): Promise<Revision[]>;
  listDiscrepancies(room: string): Promise<Discrepancy[]>;
  listHandshakes(room: string): Promise<Handshake[]>;
}
export interface LedgerWriter {
  saveThread(room: string, thread: Thread, openerKey: string | null): Promise<void>;
  insertRevision(room: string, revision: Revision): Promise<void>;
  saveDiscrepancy(room: string, discrepancy: Discrepancy): Promise<void>;
  insertHandshake(room: string, handshake: Handshake): Promise<void>;
}

// ---- task board ----
export interface BoardReader {
  getTask(room: string, id: number): Promise<TaskState | undefined>;
  /** A room's tasks, oldest first; only those with this status when given. */
  listTasks(room: string, status?: TaskStatus): Promise<TaskState[]>;
  /** Open tasks of one priority, oldest first, a page at a time (claim-next). */
  openTasksAtPriority(room: string, priority: number, limit: number, offset: number): Promise<TaskState[]>;
  listBoardAgents(room: string): Promise<BoardAgent[]>;
  getBoardAgent(room: string, agentId: string): Promise<BoardAgent | undefined>;
  /** Claimed tasks whose lease ran out at `now` (any live room): [room, task id]. */
  expiredLeases(now: string, limit: number): Promise<{ room: string; id: number }[]>;
  /** Agents not marked lost whose last heartbeat is at or before `cutoff` (any live room). */
  silentAgents(cutoff: string, now: string, limit: number): Promise<{ room: string; agentId: string }[]>;
}
export interface BoardWriter {
  saveTask(room: string, task: TaskState): Promise<void>;
  saveBoardAgent(room: string, agent: BoardAgent): Promise<void>;
}

// ---- turns ----
export interface TurnsReader {
  getTurnsRoom(room: string): Promise<TurnsRoom | undefined>;
  getTurn(room: string, id: number): Promise<TurnState | undefined>;
  /** A room's turns, oldest first. */
  listTurns(room: string): Promise<TurnState[]>;
  /** The newest `limit` turns, oldest first. */
  lastTurns(room: string, limit: number): Promise<TurnState[]>;
  /** Open turns past their deadline at `now` (any live room): [room, turn id]. */
  dueTurns(now: string, limit: number): Promise<{ room: string; id: number }[]>;
}
export interface TurnsWriter {
  saveTurnsRoom(room: string, turnsRoom: TurnsRoom): Promise<void>;
  saveTurn(room: string, turn: TurnState): Promise<void>;
}

// ---- webhooks (SPEC 12): registrations and their outbox of deliveries ----
export interface WebhookRow {
  id: string;
  room: string;
  kind: string; // events | alerts
  url: string;
  events: string | null; // JSON array of types and family.* patterns; null: every event
  format: string; // json | slack
  mentioning: string | null;
  roomUrl: string;
  secretHash: string;
  createdAt: string;
  consecutiveDead: number;
  disabledAt: string | null;
  disabledReason: string | null;
  expiryAlertedFor: string | null;
}

export type DeliveryStatus = "pending" | "retrying" | "delivered" | "dead";

export interface DeliveryRow {
  id: string;
  webhookId: string;
  room: string;
  seq: number | null;
  eventType: string;
  payload: string | null;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: string;
  leaseUntil: string | null;
  claim: string | null;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
  updatedAt: string;
  deliveredAt: string | null;
}

/** What an attempt changed: written only while the attempt's claim still holds the row. */
export type DeliveryOutcome = Pick<DeliveryRow, "status" | "attempts" | "nextAttemptAt" | "lastStatus" | "lastError" | "deliveredAt" | "updatedAt">;

export interface WebhooksReader {
  getWebhook(room: string, id: string): Promise<WebhookRow | undefined>;
  /** A room's webhooks, oldest first. */
  listWebhooks(room: string): Promise<WebhookRow[]>;
  /** A webhook's newest `limit` deliveries, newest first. */
  listDeliveries(webhookId: string, limit: number): Promise<DeliveryRow[]>;
  /** How many deliveries of a webhook are in each state. */
  deliveryCounts(webhookId: string): Promise<Record<DeliveryStatus, number>>;
  /**
   * Live rooms that expire in (now, until] and have an enabled alerts webhook not yet told about
   * that expiry (the near-expiry sweep).
   */
  roomsNearExpiry(now: string, until: string, limit: number): Promise<string[]>;
}
export interface WebhooksWriter {
  insertWebhook(row: WebhookRow): Promise<void>;
  /** True when it was there. Its deliveries go with it (ON DELETE CASCADE). */
  deleteWebhook(room: string, id: string): Promise<boolean>;
  insertDelivery(row: DeliveryRow): Promise<void>;
  /**
   * Claims up to `limit` due deliveries (pending or retrying, next attempt at or before `now`, no
   * running lease) for `claim` until `leaseUntil`. PostgreSQL: FOR UPDATE SKIP LOCKED, so
   * instances claiming at once never get the same row.
   */
  claimDeliveries(now: string, leaseUntil: string, claim: string, limit: number): Promise<DeliveryRow[]>;
  /** Records an attempt's outcome and ends the claim; false when the claim no longer holds the row. */
  finishDelivery(id: string, claim: string, outcome: DeliveryOutcome): Promise<boolean>;
  /** A delivered attempt: the webhook's run of dead deliveries ends. */
  resetDeadRun(webhookId: string): Promise<void>;
  /** A dead delivery: one more in the webhook's run of dead deliveries; returns the run's length. */
  addDeadDelivery(webhookId: string): Promise<number>;
  /**
   * Disables a webhook (once: false when it already was) and ends its open deliveries as dead with
   * `reason`.
   */
  disableWebhook(webhookId: string, at: string, reason: string): Promise<boolean>;
  /** Notes that a room's alerts webhooks were told about its expiry at `expiresAt`. */
  markExpiryAlerted(room: string, expiresAt: string): Promise<void>;
  /** Removes delivered deliveries created before `deliveredBefore` and dead ones before `deadBefore`. */
  pruneDeliveries(deliveredBefore: string, deadBefore: string): Promise<number>;
}

// ---- rate limits (shared across instances on PostgreSQL) ----
export interface LimitsStore {
  /**
   * Takes `cost` tokens from the bucket `key` (capacity tokens, refilled over windowMs) at `nowMs`;
   * returns 0 when taken, else the seconds until one would be (nothing taken).
   */
  takeToken(key: string, capacity: number, windowMs: number, nowMs: number): Promise<number>;
  /** Drops buckets idle for more than an hour. */
  pruneBuckets(nowMs: number): Promise<void>;
}

// ---- background work that runs once across instances ----
export interface JobsStore {
  /**
   * Takes (or renews) the lease on job `name` for `holder` until nowMs + ttlMs; false when another
   * holder's lease is still running. A crashed holder's lease runs out and another takes over.
   */
  leaseJob(name: string, holder: string, ttlMs: number, nowMs: number): Promise<boolean>;
  releaseJob(name: string, holder: string): Promise<void>;
}

/** What a write transaction appended: the highest seq per room, announced after it commits. */
export type Heads = Map<string, number>;

export type StoreReader = RoomsReader & MessagesReader & LedgerReader & BoardReader & TurnsReader & WebhooksReader & AdminReader;

/** Writes: only reachable inside Store.write, so every write is in one transaction. */
export interface StoreWriter extends StoreReader, RoomsWriter, MessagesWriter, LedgerWriter, BoardWriter, TurnsWriter, WebhooksWriter, AdminWriter {
  /** Runs fn in a savepoint: a throw rolls back fn's writes only (group commit). */
  savepoint<T>(fn: () => Promise<T>): Promise<T>;
}

export interface WriteOptions {
  /**
   * Savepoints only where they are needed (PostgreSQL; SQLite's cost nothing): tx.savepoint(fn)
   * opens none, and a fn that throws after it wrote aborts the transaction with RetryWithSavepoints,
   * which the caller answers by running the whole transaction again without this option. A fn that
   * throws before writing (a failed check: the common case) costs nothing.
   */
  optimistic?: boolean;
  /**
   * Runs once the transaction has committed, before the commit's readers are woken (the
   * listeners of onCommit): what it hands on from the transaction is then there when they read.
   */
  committed?: () => void;
}

/** The transaction was abandoned, nothing of it written: run it again with savepoints. */
export class RetryWithSavepoints extends Error {
  constructor() {
    super("a savepoint was needed: run the transaction again with savepoints");
  }
}

export interface Store extends StoreReader {
  readonly dialect: "sqlite" | "postgres";
  readonly limits: LimitsStore;
  readonly jobs: JobsStore;
  /**
   * One transaction. `rooms` are the rooms it will append to: they are locked, in sorted order,
   * before fn runs (PostgreSQL: the rooms rows FOR UPDATE; SQLite: the database's one writer), so
   * one writer per room holds across instances and two batches cannot deadlock.
   */
  write<T>(rooms: readonly string[], fn: (tx: StoreWriter) => Promise<T>, options?: WriteOptions): Promise<T>;
  /**
   * Reads in one consistent snapshot of the database (a read-only transaction of its own): what a
   * whole-room read (export, verify) needs so that no write lands between its queries.
   */
  snapshot<T>(fn: (reader: StoreReader) => Promise<T>): Promise<T>;
  /** Hears every commit of this instance that appended events: the rooms and their new heads. */
  onCommit(listener: (heads: ReadonlyMap<string, number>) => void): void;
  close(): Promise<void>;
}
