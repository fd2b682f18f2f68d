// The PostgreSQL schema: the same tables and columns as schema.ts (SQLite), in PostgreSQL's types.
// Times stay ISO 8601 text and JSON stays text, so both backends store and return the same bytes
// (leaf hashes are computed over what is read back). Every room-scoped table references rooms with
// ON DELETE CASCADE: deleting a room removes everything it had, but for its log (events and
// messages, below). Migrations: drizzle/pg.
import { sql } from "drizzle-orm";
import { bigint, boolean, doublePrecision, index, integer, pgTable, primaryKey, text } from "drizzle-orm/pg-core";

export const rooms = pgTable(
  "rooms",
  {
    uuid: text("uuid").primaryKey(),
    description: text("description").notNull(),
    isPublic: boolean("is_public").notNull(),
    protocolMode: text("protocol_mode").notNull(),
    mode: text("mode").notNull(),
    status: text("status").notNull(),
    ownerTokenHash: text("owner_token_hash").notNull(),
    createdAt: text("created_at").notNull(),
    lastActivityAt: text("last_activity_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    messageCount: integer("message_count").notNull(),
    agentCount: integer("agent_count").notNull(),
    headSize: integer("head_size").notNull(),
    headLeaf: text("head_leaf").notNull(),
    headRoot: text("head_root").notNull(),
    frontier: text("frontier").notNull(),
    checkpoint: text("checkpoint").notNull(),
    arbiterWatermark: integer("arbiter_watermark").notNull().default(0),
    arbiterCalls: integer("arbiter_calls").notNull().default(0),
    arbiterTokens: integer("arbiter_tokens").notNull().default(0),
    arbiterItems: integer("arbiter_items").notNull().default(0),
    lastExtractionError: text("last_extraction_error"),
    hidden: boolean("hidden").notNull().default(false),
    // What the indexes below sort and search by, kept by PostgreSQL from the columns a write sets.
    // A room's head update (every batch that writes to it) then changes no indexed value of a
    // private room — the sort columns stay NULL, the expiry's hour mostly stays — so PostgreSQL
    // can make it a HOT update: the new row version on the same page, no index touched. Indexing
    // last_activity_at, message_count, agent_count and expires_at themselves made every head
    // update a new entry in five indexes (measured: 91 % HOT updates without them, and PostgreSQL's
    // CPU a post 8 % lower).
    publicActivity: text("public_activity").generatedAlwaysAs(sql`CASE WHEN is_public THEN last_activity_at END`),
    publicMessages: integer("public_messages").generatedAlwaysAs(sql`CASE WHEN is_public THEN message_count END`),
    publicAgents: integer("public_agents").generatedAlwaysAs(sql`CASE WHEN is_public THEN agent_count END`),
    /** expires_at to the hour ("2026-12-05T14"): the expiry sweep finds candidates by it. */
    expiresHour: text("expires_hour").notNull().generatedAlwaysAs(sql`left(expires_at, 13)`),
  },
  (t) => [
    index("rooms_public_activity").on(t.publicActivity).where(sql`is_public`),
    index("rooms_public_created").on(t.createdAt).where(sql`is_public`),
    index("rooms_public_messages").on(t.publicMessages).where(sql`is_public`),
    index("rooms_public_agents").on(t.publicAgents).where(sql`is_public`),
    index("rooms_expires").on(t.expiresHour),
  ],
);

const room = () => text("room").notNull().references(() => rooms.uuid, { onDelete: "cascade" });
/**
 * The log's rows (events, messages) name their room without a foreign key. They are written only
 * by a transaction that holds the room's row locked (LOCK_ROOMS), so the key's check, two for
 * every post (a SELECT … FOR KEY SHARE on rooms each), proved nothing the lock had not; without
 * them the POST load ran 10 % faster. Deleting a room deletes them itself (deleteRoomData).
 */
const logRoom = () => text("room").notNull();

export const events = pgTable(
  "events",
  {
    room: logRoom(),
    seq: integer("seq").notNull(),
    ts: text("ts").notNull(),
    type: text("type").notNull(),
    actor: text("actor").notNull(),
    payload: text("payload").notNull(),
    server: text("server").notNull(),
    prev: text("prev").notNull(),
    sig: text("sig"),
    leafHash: text("leaf_hash").notNull(),
    checkpoint: text("checkpoint").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.seq] })],
);

export const messages = pgTable(
  "messages",
  {
    room: logRoom(),
    seq: integer("seq").notNull(),
    agentId: text("agent_id").notNull(),
    text: text("text").notNull(),
    ts: text("ts").notNull(),
    replyTo: integer("reply_to"),
    // JSON: the names the text @-mentions, and the agentKeys it is addressed to (mentioning=).
    // Null only on rows stored before they existed, filled in from the text at start.
    mentions: text("mentions"),
    mentionKeys: text("mention_keys"),
    auth: text("auth").notNull(),
    keyRef: text("key_ref"),
    pubkeyHex: text("pubkey_hex"),
    signatureHex: text("signature_hex"),
    tsIso: text("ts_iso"),
    memoryRoot: text("memory_root"),
    hash: text("hash").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.seq] }), index("messages_mentions_pending").on(t.room, t.seq).where(sql`mention_keys IS NULL`)],
);

export const roomAgents = pgTable(
  "room_agents",
  { room: room(), agentId: text("agent_id").notNull(), firstSeq: integer("first_seq").notNull(), pubkeyHex: text("pubkey_hex") },
  // The pinned keys alone: every write transaction's lock statement reads a room's pins
  // (lib/store/pg.ts, LOCK_ROOMS); without this index the planner scanned the whole table for
  // each locked room while it was small (a few pages), the lock statement's largest cost.
  (t) => [primaryKey({ columns: [t.room, t.agentId] }), index("room_agents_pinned").on(t.room).where(sql`pubkey_hex IS NOT NULL`)],
);

export const signatureNonces = pgTable(
  "signature_nonces",
  { room: room(), pubkeyHex: text("pubkey_hex").notNull(), nonce: text("nonce").notNull(), seq: integer("seq").notNull() },
  (t) => [primaryKey({ columns: [t.room, t.pubkeyHex, t.nonce] })],
);

export const threads = pgTable(
  "threads",
  {
    room: room(),
    id: integer("id").notNull(),
    subject: text("subject").notNull(),
    subjectKey: text("subject_key").notNull(),
    currentValue: text("current_value").notNull(),
    status: text("status").notNull(),
    openedBy: text("opened_by").notNull(),
    openedByAuth: text("opened_by_auth").notNull(),
    openerKey: text("opener_key"),
    revisionsCount: integer("revisions_count").notNull(),
    lastRevision: text("last_revision").notNull(),
    confirmations: text("confirmations").notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.id] })],
);

export const revisions = pgTable(
  "revisions",
  {
    room: room(),
    id: integer("id").notNull(),
    threadId: integer("thread_id").notNull(),
    kind: text("kind").notNull(),
    value: text("value").notNull(),
    authorAgentId: text("author_agent_id").notNull(),
    auth: text("auth").notNull(),
    via: text("via").notNull(),
    sourceMsgId: integer("source_msg_id"),
    quote: text("quote"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.id] }), index("revisions_thread").on(t.room, t.threadId)],
);

export const discrepancies = pgTable(
  "discrepancies",
  {
    room: room(),
    id: integer("id").notNull(),
    threadId: integer("thread_id"),
    description: text("description").notNull(),
    severity: text("severity").notNull(),
    sourceMsgId: integer("source_msg_id"),
    recordedBy: text("recorded_by").notNull(),
    status: text("status").notNull(),
    resolvedBy: text("resolved_by"),
    createdAt: text("created_at").notNull(),
    resolvedAt: text("resolved_at"),
  },
  (t) => [primaryKey({ columns: [t.room, t.id] })],
);

export const handshakes = pgTable(
  "handshakes",
  {
    room: room(),
    id: integer("id").notNull(),
    agentId: text("agent_id").notNull(),
    contextHash: text("context_hash").notNull(),
    auth: text("auth").notNull(),
    pubkeyHex: text("pubkey_hex"),
    signatureHex: text("signature_hex"),
    ts: text("ts"),
    nonce: text("nonce"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.id] })],
);

export const tasks = pgTable(
  "tasks",
  {
    room: room(),
    id: integer("id").notNull(),
    status: text("status").notNull(),
    priority: integer("priority").notNull(),
    claimant: text("claimant"),
    leaseUntil: text("lease_until"),
    leaseHash: text("lease_hash"),
    data: text("data").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.room, t.id] }),
    index("tasks_open").on(t.room, t.status, t.priority, t.id),
    index("tasks_lease").on(t.leaseUntil).where(sql`status = 'claimed'`),
  ],
);

export const boardAgents = pgTable(
  "board_agents",
  {
    room: room(),
    agentId: text("agent_id").notNull(),
    capabilities: text("capabilities").notNull(),
    auth: text("auth").notNull(),
    keyRef: text("key_ref"),
    lastSeen: text("last_seen").notNull(),
    lost: boolean("lost").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.agentId] }), index("board_agents_seen").on(t.lastSeen).where(sql`NOT lost`)],
);

export const turnRooms = pgTable("turn_rooms", {
  room: text("room").primaryKey().references(() => rooms.uuid, { onDelete: "cascade" }),
  status: text("status").notNull(),
  data: text("data").notNull(),
});

export const turns = pgTable(
  "turns",
  {
    room: room(),
    id: integer("id").notNull(),
    agentId: text("agent_id").notNull(),
    status: text("status").notNull(),
    deadline: text("deadline"),
    leaseHash: text("lease_hash"),
    data: text("data").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.id] }), index("turns_due").on(t.deadline).where(sql`status IN ('ready', 'claimed')`)],
);

/**
 * Token buckets shared by every instance. UNLOGGED: no WAL for a row that changes on every request;
 * after a database crash the table comes back empty, which only refills every bucket.
 */
export const rateBuckets = pgTable("rate_buckets", {
  key: text("key").primaryKey(),
  tokens: doublePrecision("tokens").notNull(),
  updatedMs: bigint("updated_ms", { mode: "number" }).notNull(),
  /** Whether the last request took a token (read back by the same statement that decided it). */
  taken: boolean("taken").notNull(),
});

/** Leases on background jobs (sweeps, timers, arbiter runs) so each runs on one instance at a time. */
export const jobLeases = pgTable("job_leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  untilMs: bigint("until_ms", { mode: "number" }).notNull(),
});

/** Webhooks (SPEC 12): as in schema.ts. Never log events; the secret is derived, only its SHA-256 kept. */
export const webhooks = pgTable(
  "webhooks",
  {
    id: text("id").primaryKey(),
    room: room(),
    kind: text("kind").notNull(),
    url: text("url").notNull(),
    events: text("events"),
    format: text("format").notNull(),
    mentioning: text("mentioning"),
    roomUrl: text("room_url").notNull(),
    secretHash: text("secret_hash").notNull(),
    createdAt: text("created_at").notNull(),
    consecutiveDead: integer("consecutive_dead").notNull().default(0),
    disabledAt: text("disabled_at"),
    disabledReason: text("disabled_reason"),
    expiryAlertedFor: text("expiry_alerted_for"),
  },
  (t) => [index("webhooks_room").on(t.room)],
);

/** The webhook outbox: written with the event; claimed FOR UPDATE SKIP LOCKED with a lease. */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: text("id").primaryKey(),
    webhookId: text("webhook_id").notNull().references(() => webhooks.id, { onDelete: "cascade" }),
    room: room(),
    seq: integer("seq"),
    eventType: text("event_type").notNull(),
    payload: text("payload"),
    status: text("status").notNull(),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: text("next_attempt_at").notNull(),
    leaseUntil: text("lease_until"),
    claim: text("claim"),
    lastStatus: integer("last_status"),
    lastError: text("last_error"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    deliveredAt: text("delivered_at"),
  },
  (t) => [
    index("webhook_deliveries_due").on(t.nextAttemptAt).where(sql`status IN ('pending', 'retrying')`),
    index("webhook_deliveries_webhook").on(t.webhookId, t.createdAt),
  ],
);

/** The operator's records, as in schema.ts: reports and the audit outlive their room, the loop guard's alerts do not. */
export const abuseReports = pgTable(
  "abuse_reports",
  {
    id: text("id").primaryKey(),
    room: text("room").notNull(),
    messageId: integer("message_id"),
    reason: text("reason").notNull(),
    reporter: text("reporter").notNull(),
    createdAt: text("created_at").notNull(),
    status: text("status").notNull(),
    resolvedAt: text("resolved_at"),
    resolution: text("resolution"),
  },
  (t) => [index("abuse_reports_status").on(t.status, t.createdAt), index("abuse_reports_room").on(t.room)],
);

export const adminAudit = pgTable(
  "admin_audit",
  {
    id: text("id").primaryKey(),
    at: text("at").notNull(),
    action: text("action").notNull(),
    room: text("room"),
    reportId: text("report_id"),
    reason: text("reason"),
    via: text("via").notNull(),
    ip: text("ip").notNull(),
    detail: text("detail").notNull(),
  },
  (t) => [index("admin_audit_at").on(t.at), index("admin_audit_room").on(t.room, t.at)],
);

export const adminAlerts = pgTable(
  "admin_alerts",
  {
    id: text("id").primaryKey(),
    room: room(),
    kind: text("kind").notNull(),
    subject: text("subject").notNull(),
    summary: text("summary").notNull(),
    detail: text("detail").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [index("admin_alerts_created").on(t.createdAt), index("admin_alerts_subject").on(t.room, t.kind, t.subject, t.createdAt)],
);
