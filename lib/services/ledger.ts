import { ParleyError } from "../errors";
import {
  contextHash, decideRevision, isOwner, sealOf, type Author, type Discrepancy, type Handshake, type Thread,
} from "../domain/ledger";
import { hexToBytes, utf8 } from "../log/bytes";
import { agentEnvelope, type EventSig } from "../log/event";
import type { HandshakeInput, OpenThreadInput, ResolveInput, ReviseThreadInput } from "../schemas/ledger";
import type { Revision } from "../domain/ledger";
import type { RoomRow, StoreReader } from "../store/types";
import type { Services } from "./context";
import { appendEvent, definedFields, write, type Receipt, type Tx } from "./events";
import { parseRoomId, parseSeqId, requireOpenRoom, requireOwner, requireRoom } from "./access";
import { roomQuorum } from "./projector";
import { signedWrite } from "./signatures";

async function requireMessage(tx: Pick<StoreReader, "hasMessage">, room: string, id: number | undefined): Promise<void> {
  if (id !== undefined && !(await tx.hasMessage(room, id))) throw new ParleyError("validation_error", `source_msg_id: no message with id ${id} in this room.`);
}

async function requireThread(reader: Pick<StoreReader, "getThread">, room: RoomRow, rawId: string | number) {
  const id = parseSeqId(rawId);
  const found = id === undefined ? undefined : await reader.getThread(room.uuid, id);
  if (!found) throw new ParleyError("thread_not_found", `No thread ${String(rawId).slice(0, 20)} in this room. GET /api/rooms/${room.uuid}/context lists them.`);
  return found;
}

function authorFrom(agentId: string, sig: EventSig | undefined): Author {
  return { agent_id: agentId, auth: sig ? "signed" : "anon", pubkey_hex: sig?.pubkey_hex ?? null };
}

export type ThreadView = Thread & { revisions: Revision[]; receipt?: Receipt };

export function openThread(svc: Services, rawRoomId: string, input: OpenThreadInput): Promise<ThreadView> {
  const payload = definedFields({ subject: input.subject, value: input.value, subject_key: input.subject_key, source_msg_id: input.source_msg_id, quote: input.quote });
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    await requireMessage(tx, room.uuid, input.source_msg_id);
    const sig = await signedWrite(svc, tx, room, "thread.opened", input.opened_by, payload, input.sig);
    const appended = await appendEvent(svc, tx, room, { type: "thread.opened", actor: input.opened_by, payload, sig }, { openerKey: sig?.pubkey_hex ?? null });
    const ledger = appended.projected.ledger!;
    return { ...ledger.threads[0]!, revisions: ledger.revisions, receipt: appended.receipt };
  });
}

export function reviseThread(svc: Services, rawRoomId: string, rawThreadId: string, input: ReviseThreadInput): Promise<ThreadView> {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const { thread, openerKey } = await requireThread(tx, room, rawThreadId);
    await requireMessage(tx, room.uuid, input.source_msg_id);
    const payload = definedFields({ thread_id: thread.id, kind: input.kind, value: input.value, source_msg_id: input.source_msg_id, quote: input.quote });
    // A revision that changes nothing (a repeated confirm) writes nothing: no nonce used, no key pinned.
    const claimed: Author = { agent_id: input.agent_id, auth: input.sig ? "signed" : "anon", pubkey_hex: input.sig?.pubkey_hex.toLowerCase() ?? null };
    const unchanged = decideRevision(thread, openerKey, input.kind, claimed);
    if (unchanged.ok && unchanged.effect === "none") return { ...thread, revisions: await tx.listRevisions(room.uuid, thread.id) };
    const sig = await signedWrite(svc, tx, room, "thread.revised", input.agent_id, payload, input.sig);
    const decision = decideRevision(thread, openerKey, input.kind, authorFrom(input.agent_id, sig));
    if (!decision.ok) throw new ParleyError(decision.code, decision.detail);
    if (decision.effect === "none") return { ...thread, revisions: await tx.listRevisions(room.uuid, thread.id) };
    const appended = await appendEvent(svc, tx, room, { type: "thread.revised", actor: input.agent_id, payload, sig }, { ledger: { threads: [thread] }, openerKey });
    const revised = appended.projected.ledger!.threads[0]!;
    let receipt = appended.receipt;
    if (thread.status === "agreed" && revised.status === "disputed") {
      receipt = (await recordDiscrepancy(svc, tx, appended.room, {
        description: `${input.agent_id} contradicts the agreed "${thread.subject}" (${thread.current_value})${input.value ? `: ${input.value}` : ""}.`,
        severity: "medium", thread_id: thread.id, source_msg_id: input.source_msg_id,
      })).receipt;
    }
    return { ...revised, revisions: await tx.listRevisions(room.uuid, thread.id), receipt };
  });
}

/** A discrepancy the service records (a contradiction of an agreed thread, or found by the arbiter). */
export async function recordDiscrepancy(svc: Services, tx: Tx, room: RoomRow, d: { description: string; severity: Discrepancy["severity"]; thread_id?: number; source_msg_id?: number }, actor = "server") {
  return appendEvent(svc, tx, room, { type: "discrepancy.recorded", actor, payload: definedFields(d) });
}

export async function getThread(svc: Services, rawRoomId: string, rawThreadId: string): Promise<ThreadView> {
  const room = await requireRoom(svc, rawRoomId);
  const { thread } = await requireThread(svc.store, room, rawThreadId);
  return { ...thread, revisions: await svc.store.listRevisions(room.uuid, thread.id) };
}

export async function listThreadRevisions(svc: Services, rawRoomId: string, rawThreadId: string) {
  return (await getThread(svc, rawRoomId, rawThreadId)).revisions;
}

type Context = Awaited<ReturnType<typeof buildContext>>;
interface CachedContext {
  context: Context;
  json?: string;
}
const contextCache = (svc: Services) => svc.caches.of<CachedContext>("context", 512);

async function buildContext(svc: Services, room: RoomRow) {
  const threads = await svc.store.listThreads(room.uuid);
  const hash = contextHash(threads);
  return {
    room_uuid: room.uuid,
    protocol_mode: room.protocolMode as "standard" | "premium",
    threads,
    discrepancies: await svc.store.listDiscrepancies(room.uuid),
    context_hash: hash,
    sealed: sealOf(threads, await svc.store.listHandshakes(room.uuid), hash),
    agree_quorum: await roomQuorum(svc.store, room.uuid),
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
async function cachedContext(svc: Services, rawRoomId: string): Promise<CachedContext> {
  const room = await requireRoom(svc, rawRoomId);
  const key = `${room.headSize}:${room.arbiterWatermark}:${room.lastExtractionError ?? ""}`;
  const cache = contextCache(svc);
  return cache.peek(room.uuid, key) ?? cache.set(room.uuid, key, { context: await buildContext(svc, room) });
}

export async function getContext(svc: Services, rawRoomId: string): Promise<Context> {
  return (await cachedContext(svc, rawRoomId)).context;
}

/** The same context, serialised once per change of the room. */
export async function getContextJson(svc: Services, rawRoomId: string): Promise<string> {
  const entry = await cachedContext(svc, rawRoomId);
  return (entry.json ??= JSON.stringify(entry.context));
}

export function handshake(svc: Services, rawRoomId: string, input: HandshakeInput) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const room = await requireOpenRoom(svc, id, tx);
    const threads = await tx.listThreads(room.uuid);
    const current = contextHash(threads);
    if (input.context_hash.toLowerCase() !== current) {
      throw new ParleyError("stale_context_hash", `The ledger changed: the current context_hash is ${current}. Read /context again, then handshake that hash.`);
    }
    const payload = { context_hash: current };
    const sig = await signedWrite(svc, tx, room, "handshake.signed", input.agent_id, payload, input.sig);
    const appended = await appendEvent(svc, tx, room, { type: "handshake.signed", actor: input.agent_id, payload, sig });
    const ledger = appended.projected.ledger!;
    return {
      handshake: withSignatureValidity(svc, room.uuid, ledger.handshakes[0]!),
      context_hash: current,
      sealed: sealOf(threads, await tx.listHandshakes(room.uuid)),
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

export async function listHandshakes(svc: Services, rawRoomId: string) {
  const room = await requireRoom(svc, rawRoomId);
  return (await svc.store.listHandshakes(room.uuid)).map((h) => withSignatureValidity(svc, room.uuid, h));
}

/** The related thread's owner (by agent_id, or key when it signed) or the room owner's token. */
export function resolveDiscrepancy(svc: Services, rawRoomId: string, rawId: string, input: ResolveInput, bearer: string | undefined) {
  const roomId = parseRoomId(rawRoomId);
  return write(svc, [roomId], async (tx) => {
    const room = await requireOpenRoom(svc, roomId, tx);
    const id = Number(rawId);
    const d = (await tx.listDiscrepancies(room.uuid)).find((x) => x.id === id);
    if (!d) throw new ParleyError("discrepancy_not_found", `No discrepancy ${String(rawId).slice(0, 20)} in this room.`);
    if (d.status === "resolved") return { ...d, receipt: null as Receipt | null };
    let actor = "owner";
    let sig: EventSig | undefined;
    const payload = { discrepancy_id: d.id };
    if (bearer) requireOwner(svc, room, bearer);
    else {
      if (!input.agent_id) throw new ParleyError("not_owner", "Resolving needs the room owner's token, or the agent_id of the related thread's owner.");
      sig = await signedWrite(svc, tx, room, "discrepancy.resolved", input.agent_id, payload, input.sig);
      const related = d.thread_id !== null ? await tx.getThread(room.uuid, d.thread_id) : undefined;
      if (!related || !isOwner(related.thread, related.openerKey, authorFrom(input.agent_id, sig))) throw new ParleyError("not_owner", "Only the related thread's owner or the room owner may resolve this discrepancy.");
      actor = input.agent_id;
    }
    const appended = await appendEvent(svc, tx, room, { type: "discrepancy.resolved", actor, payload, sig }, { ledger: { discrepancies: [d] } });
    return { ...appended.projected.ledger!.discrepancies[0]!, receipt: appended.receipt as Receipt | null };
  });
}

