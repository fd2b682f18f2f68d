// Row mappers shared by both backends: the tables have the same columns in SQLite and PostgreSQL,
// read back under the same (camelCase) names, with JSON kept as text.
import type { Auth, Discrepancy, Handshake, Revision, RevisionKind, Thread, ThreadStatus } from "../domain/ledger";
import { addressedKeys, mentionsOf, type Message } from "../domain/message";
import type { BoardAgent, TaskState, TaskStatus } from "../domain/tasks";
import type { EventSig, LogEvent } from "../log/event";
import type { EventRow, MessageRow } from "./repository";
import { deadlineOf, type TurnState, type TurnStatus, type TurnsRoom, type TurnsStatus } from "../domain/turns";

/** A rooms row under its RoomRow names, for both backends' SQL (SQLite reads the booleans back as 0/1). */
export const ROOM_COLS = `uuid, description, is_public AS "isPublic", protocol_mode AS "protocolMode", mode, status,
  owner_token_hash AS "ownerTokenHash", created_at AS "createdAt", last_activity_at AS "lastActivityAt", expires_at AS "expiresAt",
  message_count AS "messageCount", agent_count AS "agentCount", head_size AS "headSize", head_leaf AS "headLeaf",
  head_root AS "headRoot", frontier, checkpoint, arbiter_watermark AS "arbiterWatermark", arbiter_calls AS "arbiterCalls",
  arbiter_tokens AS "arbiterTokens", arbiter_items AS "arbiterItems", last_extraction_error AS "lastExtractionError", hidden`;

export interface RevisionRow { id: number; threadId: number; kind: string; value: string; authorAgentId: string; auth: string; via: string; sourceMsgId: number | null; quote: string | null; createdAt: string }
export interface ThreadRow {
  id: number; subject: string; subjectKey: string; currentValue: string; status: string; openedBy: string; openedByAuth: string;
  openerKey: string | null; revisionsCount: number; lastRevision: string; confirmations: string; createdAt: string; updatedAt: string;
}
export interface DiscrepancyRow {
  id: number; threadId: number | null; description: string; severity: string; sourceMsgId: number | null; recordedBy: string;
  status: string; resolvedBy: string | null; createdAt: string; resolvedAt: string | null;
}
export interface HandshakeRow { id: number; agentId: string; contextHash: string; auth: string; pubkeyHex: string | null; signatureHex: string | null; ts: string | null; nonce: string | null; createdAt: string }
export interface TaskRow { id: number; status: string; priority: number; claimant: string | null; leaseUntil: string | null; leaseHash: string | null; data: string }
export interface BoardAgentRow { agentId: string; capabilities: string; auth: string; keyRef: string | null; lastSeen: string; lost: boolean }
export interface TurnsRoomRow { status: string; data: string }
export interface TurnRow { id: number; agentId: string; status: string; deadline: string | null; leaseHash: string | null; data: string }

export function toRevision(r: RevisionRow): Revision {
  return {
    id: r.id, thread_id: r.threadId, kind: r.kind as RevisionKind, value: r.value, author_agent_id: r.authorAgentId, auth: r.auth as Auth,
    via: r.via as Revision["via"], source_msg_id: r.sourceMsgId, quote: r.quote, created_at: r.createdAt, seq: r.id,
  };
}

export function toThread(r: ThreadRow): Thread {
  return {
    id: r.id, subject: r.subject, subject_key: r.subjectKey, current_value: r.currentValue, status: r.status as ThreadStatus,
    opened_by: r.openedBy, opened_by_auth: r.openedByAuth as Auth, revisions_count: r.revisionsCount,
    last_revision: JSON.parse(r.lastRevision) as Revision, confirmations: JSON.parse(r.confirmations) as Thread["confirmations"],
    created_at: r.createdAt, updated_at: r.updatedAt,
  };
}

export function toDiscrepancy(r: DiscrepancyRow): Discrepancy {
  return {
    id: r.id, thread_id: r.threadId, description: r.description, severity: r.severity as Discrepancy["severity"], source_msg_id: r.sourceMsgId,
    recorded_by: r.recordedBy, status: r.status as Discrepancy["status"], resolved_by: r.resolvedBy, created_at: r.createdAt, resolved_at: r.resolvedAt,
  };
}

export function toHandshake(r: HandshakeRow): Handshake {
  return {
    id: r.id, agent_id: r.agentId, context_hash: r.contextHash, auth: r.auth as Auth, pubkey_hex: r.pubkeyHex,
    signature_hex: r.signatureHex, ts: r.ts, nonce: r.nonce, created_at: r.createdAt,
  };
}

export function toTask(r: TaskRow): TaskState {
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

export function toBoardAgent(r: BoardAgentRow): BoardAgent {
  return {
    agent_id: r.agentId, capabilities: JSON.parse(r.capabilities) as string[], auth: r.auth as BoardAgent["auth"], key_ref: r.keyRef,
    last_seen: r.lastSeen, lost: r.lost,
  };
}

export function toTurnsRoom(r: TurnsRoomRow): TurnsRoom {
  const rest = JSON.parse(r.data) as Omit<TurnsRoom, "status">;
  return {
    status: r.status as TurnsStatus, reason: rest.reason, config: rest.config, participants: rest.participants, round: rest.round,
    current: rest.current, last_agent: rest.last_agent, proposal: rest.proposal, updated_at: rest.updated_at,
  };
}

export function toTurn(r: TurnRow): TurnState {
  const t = JSON.parse(r.data) as Omit<TurnState, "agent_id" | "status" | "lease_hash">;
  // The public key order of a turn, whatever order the columns were read in.
  return {
    id: t.id, round: t.round, slot: t.slot, agent_id: r.agentId, phase: t.phase, status: r.status as TurnStatus, available_at: t.available_at,
    claim_by: t.claim_by, lease_until: t.lease_until, result: t.result, reason: t.reason, message_id: t.message_id, opened_at: t.opened_at,
    closed_at: t.closed_at, lease_hash: r.leaseHash, claim_seq: t.claim_seq,
  };
}

// ---- the other way: domain values to rows (both backends write these columns) ----
export const threadRow = (t: Thread, openerKey: string | null): ThreadRow => ({
  id: t.id, subject: t.subject, subjectKey: t.subject_key, currentValue: t.current_value, status: t.status,
  openedBy: t.opened_by, openedByAuth: t.opened_by_auth, openerKey, revisionsCount: t.revisions_count,
  lastRevision: JSON.stringify(t.last_revision), confirmations: JSON.stringify(t.confirmations), createdAt: t.created_at, updatedAt: t.updated_at,
});

export const revisionRow = (r: Revision): RevisionRow => ({
  id: r.id, threadId: r.thread_id, kind: r.kind, value: r.value, authorAgentId: r.author_agent_id, auth: r.auth,
  via: r.via, sourceMsgId: r.source_msg_id, quote: r.quote, createdAt: r.created_at,
});

export const discrepancyRow = (d: Discrepancy): DiscrepancyRow => ({
  id: d.id, threadId: d.thread_id, description: d.description, severity: d.severity, sourceMsgId: d.source_msg_id,
  recordedBy: d.recorded_by, status: d.status, resolvedBy: d.resolved_by, createdAt: d.created_at, resolvedAt: d.resolved_at,
});

export const handshakeRow = (h: Handshake): HandshakeRow => ({
  id: h.id, agentId: h.agent_id, contextHash: h.context_hash, auth: h.auth, pubkeyHex: h.pubkey_hex,
  signatureHex: h.signature_hex, ts: h.ts, nonce: h.nonce, createdAt: h.created_at,
});

/** The query columns of a task beside the rest as JSON. */
export function taskRow(t: TaskState): TaskRow {
  const { status, priority, claimant, lease_until, lease_hash, ...rest } = t;
  return { id: t.id, status, priority, claimant, leaseUntil: lease_until, leaseHash: lease_hash, data: JSON.stringify(rest) };
}

export const boardAgentRow = (a: BoardAgent): BoardAgentRow => ({
  agentId: a.agent_id, capabilities: JSON.stringify(a.capabilities), auth: a.auth, keyRef: a.key_ref, lastSeen: a.last_seen, lost: a.lost,
});

export function turnsRoomRow(r: TurnsRoom): TurnsRoomRow {
  const { status, ...rest } = r;
  return { status, data: JSON.stringify(rest) };
}

export function turnRow(t: TurnState): TurnRow {
  const { agent_id, status, lease_hash, ...rest } = t;
  return { id: t.id, agentId: agent_id, status, deadline: deadlineOf(t), leaseHash: lease_hash, data: JSON.stringify(rest) };
}

// ---- events and messages ----

export function eventToRow(event: LogEvent, leafHash: string, checkpoint: string): EventRow {
  return {
    room: event.room,
    seq: event.seq,
    ts: event.ts,
    type: event.type,
    actor: event.actor,
    payload: JSON.stringify(event.payload),
    server: JSON.stringify(event.server),
    prev: event.prev,
    sig: event.sig ? JSON.stringify(event.sig) : null,
    leafHash,
    checkpoint,
  };
}

export function eventFromRow(row: EventRow): LogEvent {
  return {
    v: 1,
    room: row.room,
    seq: row.seq,
    ts: row.ts,
    type: row.type,
    actor: row.actor,
    payload: JSON.parse(row.payload) as Record<string, unknown>,
    server: JSON.parse(row.server) as Record<string, unknown>,
    prev: row.prev,
    ...(row.sig ? { sig: JSON.parse(row.sig) as EventSig } : {}),
  };
}

export function messageFromRow(row: MessageRow): Message {
  return {
    id: row.seq,
    agent_id: row.agentId,
    text: row.text,
    timestamp: row.ts,
    reply_to: row.replyTo,
    // Null only on a row stored before mentions were (until the start-up backfill reaches it).
    mentions: row.mentions === null ? mentionsOf(row.text) : (JSON.parse(row.mentions) as string[]),
    auth: row.auth as Message["auth"],
    key_ref: row.keyRef,
    pubkey_hex: row.pubkeyHex,
    signature_hex: row.signatureHex,
    ts_iso: row.tsIso,
    memory_root: row.memoryRoot,
    hash: row.hash,
  };
}

export function messageToRow(room: string, message: Message): MessageRow {
  return {
    room,
    seq: message.id,
    agentId: message.agent_id,
    text: message.text,
    ts: message.timestamp,
    replyTo: message.reply_to,
    ...mentionColumns(message),
    auth: message.auth,
    keyRef: message.key_ref,
    pubkeyHex: message.pubkey_hex,
    signatureHex: message.signature_hex,
    tsIso: message.ts_iso,
    memoryRoot: message.memory_root,
    hash: message.hash,
  };
}

/**
 * A message's mention columns: `mentions` as the message shows them, and `mention_keys`, the
 * agentKeys it is addressed to (its author excepted), which `mentioning=` reads match on.
 */
export function mentionColumns(message: Pick<Message, "agent_id" | "mentions">): Pick<MessageRow, "mentions" | "mentionKeys"> {
  return { mentions: JSON.stringify(message.mentions), mentionKeys: JSON.stringify(addressedKeys(message)) };
}

/** The mention columns of a row stored before they existed, computed from its text (the start-up backfill). */
export const backfilledMentions = (row: { agentId: string; text: string }) => mentionColumns({ agent_id: row.agentId, mentions: mentionsOf(row.text) });
