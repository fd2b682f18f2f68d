import { ParleyError } from "../errors";
import {
  applyLedgerEvent, contextHash, decideRevision, emptyLedger, isOwner, quorumOf, sealOf,
  type Author, type Discrepancy, type Handshake, type Ledger, type Thread,
} from "../domain/ledger";
import { hexToBytes, utf8 } from "../log/bytes";
import { agentEnvelope, type EventSig } from "../log/event";
import type { HandshakeInput, OpenThreadInput, ResolveInput, ReviseThreadInput } from "../schemas/ledger";
import type { RoomRow, StoreWriter } from "../store/types";
import type { Services } from "./context";
import { appendEvent, definedFields, eventFromRow, writeTx, type NewEvent, type Receipt } from "./events";
import { parseSeqId, requireOpenRoom, requireOwner, requireRoom } from "./rooms";
import { signedWrite } from "./signatures";

/** The quorum the room was created with, as the log records it (what the verifier replays with). */
function roomQuorum(svc: Services, room: RoomRow): number {
  const created = svc.store.listEvents(room.uuid, 0, 1)[0];
  return quorumOf(created && eventFromRow(created));
}

/**
 * Appends a ledger event and writes the projections it changes: the reducer is applied to the
 * part of the ledger the event touches (the same reducer the verifier replays over the log).
 */
export function appendLedgerEvent(svc: Services, tx: StoreWriter, room: RoomRow, event: NewEvent, part: Partial<Ledger>, openerKey: string | null = null) {
  const appended = appendEvent(svc, tx, room, event);
  const ledger: Ledger = { ...emptyLedger(), ...structuredClone(part) };
  const before = { revisions: ledger.revisions.length, handshakes: ledger.handshakes.length };
  applyLedgerEvent(ledger, appended.event, roomQuorum(svc, room));
  for (const t of ledger.threads) tx.saveThread(room.uuid, t, openerKey);
  for (const r of ledger.revisions.slice(before.revisions)) tx.insertRevision(room.uuid, r);
  for (const d of ledger.discrepancies) tx.saveDiscrepancy(room.uuid, d);
  for (const h of ledger.handshakes.slice(before.handshakes)) tx.insertHandshake(room.uuid, h);
  return { appended, ledger };
}

function requireMessage(tx: StoreWriter, room: string, id: number | undefined): void {
  if (id !== undefined && !tx.hasMessage(room, id)) throw new ParleyError("validation_error", `source_msg_id: no message with id ${id} in this room.`);
}

function requireThread(reader: Pick<StoreWriter, "getThread">, room: RoomRow, rawId: string | number) {
  const id = parseSeqId(rawId);
  const found = id === undefined ? undefined : reader.getThread(room.uuid, id);
  if (!found) throw new ParleyError("thread_not_found", `No thread ${String(rawId).slice(0, 20)} in this room. GET /api/rooms/${room.uuid}/context lists them.`);
  return found;
}

function authorFrom(agentId: string, sig: EventSig | undefined): Author {
  return { agent_id: agentId, auth: sig ? "signed" : "anon", pubkey_hex: sig?.pubkey_hex ?? null };
}

export type ThreadView = Thread & { revisions: ReturnType<Services["store"]["listRevisions"]>; receipt?: Receipt };

export function openThread(svc: Services, rawRoomId: string, input: OpenThreadInput): ThreadView {
  const payload = definedFields({ subject: input.subject, value: input.value, subject_key: input.subject_key, source_msg_id: input.source_msg_id, quote: input.quote });
  return writeTx(svc, (tx) => {
    const room = requireOpenRoom(svc, rawRoomId, tx);
    requireMessage(tx, room.uuid, input.source_msg_id);
    const sig = signedWrite(svc, tx, room, "thread.opened", input.opened_by, payload, input.sig);
    const { appended, ledger } = appendLedgerEvent(svc, tx, room, { type: "thread.opened", actor: input.opened_by, payload, sig }, {}, sig?.pubkey_hex ?? null);
    return { ...ledger.threads[0]!, revisions: ledger.revisions, receipt: appended.receipt };
  });
}

export function reviseThread(svc: Services, rawRoomId: string, rawThreadId: string, input: ReviseThreadInput): ThreadView {
  return writeTx(svc, (tx) => {
    const room = requireOpenRoom(svc, rawRoomId, tx);
    const { thread, openerKey } = requireThread(tx, room, rawThreadId);
    requireMessage(tx, room.uuid, input.source_msg_id);
    const payload = definedFields({ thread_id: thread.id, kind: input.kind, value: input.value, source_msg_id: input.source_msg_id, quote: input.quote });
    // A revision that changes nothing (a repeated confirm) writes nothing: no nonce used, no key pinned.
    const claimed: Author = { agent_id: input.agent_id, auth: input.sig ? "signed" : "anon", pubkey_hex: input.sig?.pubkey_hex.toLowerCase() ?? null };
    const unchanged = decideRevision(thread, openerKey, input.kind, claimed);
    if (unchanged.ok && unchanged.effect === "none") return { ...thread, revisions: tx.listRevisions(room.uuid, thread.id) };
    const sig = signedWrite(svc, tx, room, "thread.revised", input.agent_id, payload, input.sig);
    const decision = decideRevision(thread, openerKey, input.kind, authorFrom(input.agent_id, sig));
    if (!decision.ok) throw new ParleyError(decision.code, decision.detail);
    if (decision.effect === "none") return { ...thread, revisions: tx.listRevisions(room.uuid, thread.id) };
    const { appended, ledger } = appendLedgerEvent(svc, tx, room, { type: "thread.revised", actor: input.agent_id, payload, sig }, { threads: [thread] }, openerKey);
    const revised = ledger.threads[0]!;
    let receipt = appended.receipt;
    if (thread.status === "agreed" && revised.status === "disputed") {
      receipt = recordDiscrepancy(svc, tx, appended.room, {
        description: `${input.agent_id} contradicts the agreed "${thread.subject}" (${thread.current_value})${input.value ? `: ${input.value}` : ""}.`,
        severity: "medium", thread_id: thread.id, source_msg_id: input.source_msg_id,
      }).receipt;
    }
    return { ...revised, revisions: tx.listRevisions(room.uuid, thread.id), receipt };
  });
}

/** A discrepancy the service records (a contradiction of an agreed thread, or found by the arbiter). */
export function recordDiscrepancy(svc: Services, tx: StoreWriter, room: RoomRow, d: { description: string; severity: Discrepancy["severity"]; thread_id?: number; source_msg_id?: number }, actor = "server") {
  return appendLedgerEvent(svc, tx, room, { type: "discrepancy.recorded", actor, payload: definedFields(d) }, {}).appended;
}

export function getThread(svc: Services, rawRoomId: string, rawThreadId: string): ThreadView {
  const room = requireRoom(svc, rawRoomId);
  const { thread } = requireThread(svc.store, room, rawThreadId);
  return { ...thread, revisions: svc.store.listRevisions(room.uuid, thread.id) };
}

export function listThreadRevisions(svc: Services, rawRoomId: string, rawThreadId: string) {
  return getThread(svc, rawRoomId, rawThreadId).revisions;
}

type Context = ReturnType<typeof buildContext>;
interface CachedContext {
  key: string;
  context: Context;
  json?: string;
}
const contextCache = new WeakMap<Services, Map<string, CachedContext>>();
const CONTEXT_CACHE_ROOMS = 512;

function buildContext(svc: Services, room: RoomRow) {
  const threads = svc.store.listThreads(room.uuid);
  const hash = contextHash(threads);
  return {
    room_uuid: room.uuid,
    protocol_mode: room.protocolMode as "standard" | "premium",
    threads,
    discrepancies: svc.store.listDiscrepancies(room.uuid),
    context_hash: hash,
    sealed: sealOf(threads, svc.store.listHandshakes(room.uuid), hash),
    agree_quorum: roomQuorum(svc, room),
    last_extracted_msg_id: room.arbiterWatermark,
    arbiter_active: room.protocolMode === "premium" && svc.config.arbiterConfigured,
    last_extraction_error: room.lastExtractionError,
  };
}

/**
 * GET /context: built with a handful of queries whatever the number of threads, and kept until
 * the room changes. Every ledger change appends an event, so the log head (with the arbiter's
 * bookkeeping) is the cache key.
 */
function cachedContext(svc: Services, rawRoomId: string): CachedContext {
  const room = requireRoom(svc, rawRoomId);
  const key = `${room.headSize}:${room.arbiterWatermark}:${room.lastExtractionError ?? ""}`;
  let rooms = contextCache.get(svc);
  if (!rooms) contextCache.set(svc, (rooms = new Map()));
  const hit = rooms.get(room.uuid);
  if (hit?.key === key) return hit;
  const entry: CachedContext = { key, context: buildContext(svc, room) };
  rooms.delete(room.uuid);
  if (rooms.size >= CONTEXT_CACHE_ROOMS) rooms.delete(rooms.keys().next().value!);
  rooms.set(room.uuid, entry);
  return entry;
}

export function getContext(svc: Services, rawRoomId: string): Context {
  return cachedContext(svc, rawRoomId).context;
}

/** The same context, serialised once per change of the room. */
export function getContextJson(svc: Services, rawRoomId: string): string {
  const entry = cachedContext(svc, rawRoomId);
  return (entry.json ??= JSON.stringify(entry.context));
}

export function handshake(svc: Services, rawRoomId: string, input: HandshakeInput) {
  return writeTx(svc, (tx) => {
    const room = requireOpenRoom(svc, rawRoomId, tx);
    const threads = tx.listThreads(room.uuid);
    const current = contextHash(threads);
    if (input.context_hash.toLowerCase() !== current) {
      throw new ParleyError("stale_context_hash", `The ledger changed: the current context_hash is ${current}. Read /context again, then handshake that hash.`);
    }
    const payload = { context_hash: current };
    const sig = signedWrite(svc, tx, room, "handshake.signed", input.agent_id, payload, input.sig);
    const { appended, ledger } = appendLedgerEvent(svc, tx, room, { type: "handshake.signed", actor: input.agent_id, payload, sig }, {});
    return {
      handshake: withSignatureValidity(svc, room.uuid, ledger.handshakes[0]!),
      context_hash: current,
      sealed: sealOf(threads, tx.listHandshakes(room.uuid)),
      receipt: appended.receipt,
    };
  });
}

/** Re-checks a handshake's signature now, so readers need not trust the stored flag. */
function withSignatureValidity(svc: Services, room: string, h: Handshake): Handshake & { signature_valid: boolean } {
  if (!h.pubkey_hex || !h.signature_hex || !h.ts || !h.nonce) return { ...h, signature_valid: false };
  const envelope = agentEnvelope({ room, type: "handshake.signed", actor: h.agent_id, payload: { context_hash: h.context_hash }, ts: h.ts, nonce: h.nonce });
  let valid = false;
  try {
    valid = svc.key.verify(hexToBytes(h.pubkey_hex), utf8(envelope), hexToBytes(h.signature_hex));
  } catch {
    valid = false;
  }
  return { ...h, signature_valid: valid };
}

export function listHandshakes(svc: Services, rawRoomId: string) {
  const room = requireRoom(svc, rawRoomId);
  return svc.store.listHandshakes(room.uuid).map((h) => withSignatureValidity(svc, room.uuid, h));
}

/** The related thread's owner (by agent_id, or key when it signed) or the room owner's token. */
export function resolveDiscrepancy(svc: Services, rawRoomId: string, rawId: string, input: ResolveInput, bearer: string | undefined) {
  return writeTx(svc, (tx) => {
    const room = requireOpenRoom(svc, rawRoomId, tx);
    const id = Number(rawId);
    const d = tx.listDiscrepancies(room.uuid).find((x) => x.id === id);
    if (!d) throw new ParleyError("discrepancy_not_found", `No discrepancy ${String(rawId).slice(0, 20)} in this room.`);
    if (d.status === "resolved") return { ...d, receipt: null as Receipt | null };
    let actor = "owner";
    let sig: EventSig | undefined;
    const payload = { discrepancy_id: d.id };
    if (bearer) requireOwner(svc, room, bearer);
    else {
      if (!input.agent_id) throw new ParleyError("not_owner", "Resolving needs the room owner's token, or the agent_id of the related thread's owner.");
      sig = signedWrite(svc, tx, room, "discrepancy.resolved", input.agent_id, payload, input.sig);
      const related = d.thread_id !== null ? tx.getThread(room.uuid, d.thread_id) : undefined;
      if (!related || !isOwner(related.thread, related.openerKey, authorFrom(input.agent_id, sig))) throw new ParleyError("not_owner", "Only the related thread's owner or the room owner may resolve this discrepancy.");
      actor = input.agent_id;
    }
    const { appended, ledger } = appendLedgerEvent(svc, tx, room, { type: "discrepancy.resolved", actor, payload, sig }, { discrepancies: [d] });
    return { ...ledger.discrepancies[0]!, receipt: appended.receipt as Receipt | null };
  });
}

