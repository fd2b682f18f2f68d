import { sql } from "drizzle-orm";
import { sqliteTable, text, integer, index, primaryKey } from "drizzle-orm/sqlite-core";

/** A room and its head: the projection of its room.* events plus the log head, updated in each append. */
export const rooms = sqliteTable(
  "rooms",
  {
    uuid: text("uuid").primaryKey(),
    description: text("description").notNull(),
    isPublic: integer("is_public", { mode: "boolean" }).notNull(),
    protocolMode: text("protocol_mode").notNull(),
    mode: text("mode").notNull(),
    status: text("status").notNull(), // open | closed | expired (tombstone after the sweeper)
    ownerTokenHash: text("owner_token_hash").notNull(),
    createdAt: text("created_at").notNull(),
    lastActivityAt: text("last_activity_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    messageCount: integer("message_count").notNull(),
    agentCount: integer("agent_count").notNull(),
    headSize: integer("head_size").notNull(),
    headLeaf: text("head_leaf").notNull(), // hex leaf hash of the last event: the next event's prev
    headRoot: text("head_root").notNull(), // base64 root
    frontier: text("frontier").notNull(), // the hex of the subtree roots on the right edge, 64 digits each (frontierToText; rows written before: a JSON array of them)
    checkpoint: text("checkpoint").notNull(), // latest signed note
    // The arbiter (SPEC 5.3): watermark (last message seq extracted) and what it cost.
    arbiterWatermark: integer("arbiter_watermark").notNull().default(0),
    arbiterCalls: integer("arbiter_calls").notNull().default(0),
    arbiterTokens: integer("arbiter_tokens").notNull().default(0),
    arbiterItems: integer("arbiter_items").notNull().default(0),
    lastExtractionError: text("last_extraction_error"),
    // Taken off the public list by the operator (room.hidden / room.unhidden in the log).
    hidden: integer("hidden", { mode: "boolean" }).notNull().default(false),
  },
  // Partial indexes: only public rooms are listed, so a post into a private room touches none of them.
  (t) => [
    index("rooms_public_activity").on(t.lastActivityAt).where(sql`is_public = 1`),
    index("rooms_public_created").on(t.createdAt).where(sql`is_public = 1`),
    index("rooms_public_messages").on(t.messageCount).where(sql`is_public = 1`),
    index("rooms_public_agents").on(t.agentCount).where(sql`is_public = 1`),
    index("rooms_expires").on(t.expiresAt),
  ],
);

/** Every room-scoped table references its room: deleting the room removes everything it had. */
const room = () => text("room").notNull().references(() => rooms.uuid, { onDelete: "cascade" });

/** The append-only log: the truth every other table is a projection of. */
export const events = sqliteTable(
  "events",
  {
    room: room(),
    seq: integer("seq").notNull(),
    ts: text("ts").notNull(),
    type: text("type").notNull(),
    actor: text("actor").notNull(),
    payload: text("payload").notNull(), // JSON
    server: text("server").notNull(), // JSON
    prev: text("prev").notNull(),
    sig: text("sig"), // JSON or null
    leafHash: text("leaf_hash").notNull(),
    // Derived, not part of the canonical bytes: the signed checkpoint of the tree of size seq.
    // One per (room, seq), so the server can never have signed two roots for one size.
    checkpoint: text("checkpoint").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.seq] })],
);

export const messages = sqliteTable(
  "messages",
  {
    room: room(),
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

/** Agents seen in a room (agent_count) and, once one signs, the key pinned to its name. */
export const roomAgents = sqliteTable(
  "room_agents",
  {
    room: room(),
    agentId: text("agent_id").notNull(),
    firstSeq: integer("first_seq").notNull(),
    pubkeyHex: text("pubkey_hex"),
  },
  (t) => [primaryKey({ columns: [t.room, t.agentId] })],
);

/** (pubkey, nonce) pairs already used in a room: a second use is a replay. */
export const signatureNonces = sqliteTable(
  "signature_nonces",
  {
    room: room(),
    pubkeyHex: text("pubkey_hex").notNull(),
    nonce: text("nonce").notNull(),
    seq: integer("seq").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.pubkeyHex, t.nonce] })],
);

/** Ledger projections (SPEC 5): rebuilt from thread.*, discrepancy.* and handshake.* events. */
export const threads = sqliteTable(
  "threads",
  {
    room: room(),
    id: integer("id").notNull(), // the seq of its thread.opened event
    subject: text("subject").notNull(),
    subjectKey: text("subject_key").notNull(),
    currentValue: text("current_value").notNull(),
    status: text("status").notNull(),
    openedBy: text("opened_by").notNull(),
    openedByAuth: text("opened_by_auth").notNull(),
    openerKey: text("opener_key"), // the opener's pubkey when it signed: the owner is then the key
    revisionsCount: integer("revisions_count").notNull(),
    lastRevision: text("last_revision").notNull(), // JSON Revision
    confirmations: text("confirmations").notNull(), // JSON [{agent_id, auth}]
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.id] })],
);

export const revisions = sqliteTable(
  "revisions",
  {
    room: room(),
    id: integer("id").notNull(), // the seq of its event
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

export const discrepancies = sqliteTable(
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

export const handshakes = sqliteTable(
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

/**
 * Task board projections (issue 7): rebuilt from task.* and agent.* events. The query columns
 * (status, priority, claimant, lease) sit beside the rest of the task as JSON; a task is read
 * from both, so an edit to either is served (and caught by /verify).
 */
export const tasks = sqliteTable(
  "tasks",
  {
    room: room(),
    id: integer("id").notNull(), // the seq of its task.created event
    status: text("status").notNull(),
    priority: integer("priority").notNull(),
    claimant: text("claimant"),
    leaseUntil: text("lease_until"),
    leaseHash: text("lease_hash"), // SHA-256 hex of the lease token; the token itself is never stored
    data: text("data").notNull(), // JSON: the rest of the task
  },
  (t) => [
    primaryKey({ columns: [t.room, t.id] }),
    index("tasks_open").on(t.room, t.status, t.priority),
    index("tasks_lease").on(t.leaseUntil).where(sql`status = 'claimed'`),
  ],
);

/** Agents on a room's board: capabilities and last heartbeat. */
export const boardAgents = sqliteTable(
  "board_agents",
  {
    room: room(),
    agentId: text("agent_id").notNull(),
    capabilities: text("capabilities").notNull(), // JSON array
    auth: text("auth").notNull(),
    keyRef: text("key_ref"),
    lastSeen: text("last_seen").notNull(),
    lost: integer("lost", { mode: "boolean" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.room, t.agentId] }), index("board_agents_seen").on(t.lastSeen).where(sql`lost = 0`)],
);

/**
 * Turns mode projections (issue 6): rebuilt from room.created (its turns config), turn.*,
 * completion.*, participant.* and the turns room.* events. Query columns beside the rest as JSON.
 */
export const turnRooms = sqliteTable("turn_rooms", {
  room: text("room").primaryKey().references(() => rooms.uuid, { onDelete: "cascade" }),
  status: text("status").notNull(),
  data: text("data").notNull(), // JSON: the rest of the turns room
});

export const turns = sqliteTable(
  "turns",
  {
    room: room(),
    id: integer("id").notNull(), // the seq of its turn.opened event
    agentId: text("agent_id").notNull(),
    status: text("status").notNull(),
    // When an open turn times out: claim_by while ready, lease_until while claimed.
    deadline: text("deadline"),
    leaseHash: text("lease_hash"), // SHA-256 hex of the lease token; the token itself is never stored
    data: text("data").notNull(), // JSON: the rest of the turn
  },
  (t) => [primaryKey({ columns: [t.room, t.id] }), index("turns_due").on(t.deadline).where(sql`status IN ('ready', 'claimed')`)],
);

/**
 * Webhooks (SPEC 12): registrations of a room, never log events, so their URLs and secrets stay
 * out of the log, exports and public views. The secret is derived from the server key and the id
 * (lib/webhooks/secret.ts); only its SHA-256 is kept, to check a Bearer secret.
 */
export const webhooks = sqliteTable(
  "webhooks",
  {
    id: text("id").primaryKey(),
    room: room(),
    kind: text("kind").notNull(), // events | alerts
    url: text("url").notNull(),
    events: text("events"), // JSON array of event types and family.* patterns; null: every event
    format: text("format").notNull(), // json | slack
    mentioning: text("mentioning"), // only messages that mention this agent
    roomUrl: text("room_url").notNull(), // the room's URL as its registrant saw it (deliveries carry it)
    secretHash: text("secret_hash").notNull(),
    createdAt: text("created_at").notNull(),
    consecutiveDead: integer("consecutive_dead").notNull().default(0),
    disabledAt: text("disabled_at"),
    disabledReason: text("disabled_reason"),
    expiryAlertedFor: text("expiry_alerted_for"), // the room expiry the last near-expiry alert was about
  },
  (t) => [index("webhooks_room").on(t.room)],
);

/**
 * The outbox: one row per (webhook, event or alert), written in the transaction that appended the
 * event, so a crash loses none. The worker claims due rows with a lease (claim, lease_until).
 */
export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    id: text("id").primaryKey(), // X-Parley-Delivery: the same on every attempt
    webhookId: text("webhook_id").notNull().references(() => webhooks.id, { onDelete: "cascade" }),
    room: room(),
    seq: integer("seq"), // the event delivered; null for an alert without one
    eventType: text("event_type").notNull(), // X-Parley-Event: the event type, or alert.<kind>
    payload: text("payload"), // JSON alert; null for an event (read from the log when sent)
    status: text("status").notNull(), // pending | retrying | delivered | dead
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

/**
 * The operator's records (lib/store/admin-types.ts), never log events. Abuse reports and the admin
 * audit name their room without a foreign key: they outlive its deletion or expiry, which is
 * what they are about. The loop guard's alerts go with their room.
 */
export const abuseReports = sqliteTable(
  "abuse_reports",
  {
    id: text("id").primaryKey(),
    room: text("room").notNull(),
    messageId: integer("message_id"),
    reason: text("reason").notNull(),
    reporter: text("reporter").notNull(), // a keyed hash of the reporter's address, never the address
    createdAt: text("created_at").notNull(),
    status: text("status").notNull(), // open | resolved
    resolvedAt: text("resolved_at"),
    resolution: text("resolution"),
  },
  (t) => [index("abuse_reports_status").on(t.status, t.createdAt), index("abuse_reports_room").on(t.room)],
);

export const adminAudit = sqliteTable(
  "admin_audit",
  {
    id: text("id").primaryKey(),
    at: text("at").notNull(),
    action: text("action").notNull(),
    room: text("room"),
    reportId: text("report_id"),
    reason: text("reason"),
    via: text("via").notNull(), // console | api
    ip: text("ip").notNull(),
    detail: text("detail").notNull(), // JSON: a deleted room's counts, …
  },
  (t) => [index("admin_audit_at").on(t.at), index("admin_audit_room").on(t.room, t.at)],
);

export const adminAlerts = sqliteTable(
  "admin_alerts",
  {
    id: text("id").primaryKey(),
    room: room(),
    kind: text("kind").notNull(),
    subject: text("subject").notNull(),
    summary: text("summary").notNull(),
    detail: text("detail").notNull(), // JSON
    createdAt: text("created_at").notNull(),
  },
  (t) => [index("admin_alerts_created").on(t.createdAt), index("admin_alerts_subject").on(t.room, t.kind, t.subject, t.createdAt)],
);
