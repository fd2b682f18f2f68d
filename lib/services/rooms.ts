import crypto from "node:crypto";
import { ParleyError, roomExpired, roomNotFound } from "../errors";
import { expiresAt, isExpired } from "../domain/room";
import { ZERO_HASH_HEX } from "../log/event";
import { bytesToBase64 } from "../log/bytes";
import { EMPTY_ROOT } from "../log/merkle";
import type { CreateRoomInput, ListRoomsInput } from "../schemas/rooms";
import type { RoomRow } from "../store/types";
import { isoNow, roomLife, type Caller, type Services } from "./context";
import { appendEvent, writeTx, type Receipt } from "./events";
import { ROOM_GONE } from "../realtime/notifier";
import type { TurnsConfigInput } from "../schemas/turns";
import type { TurnsConfig } from "../domain/turns";
import { speakingOrder } from "../domain/turns";
import { startTurns } from "./turns";

/** The turns config as logged: participants in speaking order, every default filled in. */
function turnsConfig(t: TurnsConfigInput): TurnsConfig {
  return {
    participants: speakingOrder(t.participants, t.first),
    max_rounds: t.max_rounds,
    turn_timeout_s: t.turn_timeout_s,
    delay_s: t.delay_s,
    policy: t.policy,
    supervisor: t.supervisor ?? null,
    absent_after: t.absent_after,
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Room ids: UUIDs, upper case accepted and normalised, anything else 400 invalid_uuid. */
export function parseRoomId(raw: string): string {
  const id = raw; // not trimmed: " <uuid>" (a leading %20) is not a room id
  if (!UUID.test(id)) throw new ParleyError("invalid_uuid", `"${raw.slice(0, 60)}" is not a room id: expected a UUID such as 3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23.`);
  return id.toLowerCase();
}

export const roomUrl = (caller: Caller, uuid: string) => `${caller.origin}/${uuid}`;

/** The room, or 404 room_not_found / 410 room_expired. */
export function requireRoom(svc: Services, rawId: string, reader = svc.store as Pick<Services["store"], "getRoom">): RoomRow {
  const room = reader.getRoom(parseRoomId(rawId));
  if (!room) throw roomNotFound();
  if (isExpired(room, isoNow(svc))) throw roomExpired();
  return room;
}

/** True for a room id whose room existed and has expired (its URL answers 410). */
export function roomIsExpired(svc: Services, rawId: string): boolean {
  const room = svc.store.getRoom(rawId.toLowerCase());
  return room !== undefined && isExpired(room, isoNow(svc));
}

/** Same as requireRoom, and 409 room_closed when the room no longer accepts writes. */
export function requireOpenRoom(svc: Services, rawId: string, reader: Pick<Services["store"], "getRoom"> & Partial<Pick<Services["store"], "getTurnsRoom">>): RoomRow {
  const room = requireRoom(svc, rawId, reader);
  if (room.status === "closed") {
    const ended = room.mode === "turns" ? reader.getTurnsRoom?.(room.uuid)?.status : undefined;
    if (ended === "completed" || ended === "cancelled") {
      throw new ParleyError("room_closed", `This turns room is ${ended} and read-only. Stop posting to it.`);
    }
    throw new ParleyError("room_closed", "This room is closed by its owner and is read-only. Stop posting to it.");
  }
  return room;
}

/** Tokens (owner, lease) are stored as their SHA-256 only. */
export const hashToken = (token: string) => crypto.createHash("sha256").update(token).digest("hex");

/** Whether `token` is the one whose SHA-256 is `hashHex`, compared in constant time. */
export function tokenMatches(hashHex: string | null, token: string): boolean {
  if (hashHex === null) return false;
  const given = Buffer.from(hashToken(token), "hex");
  const held = Buffer.from(hashHex, "hex");
  return given.length === held.length && crypto.timingSafeEqual(given, held);
}

/** A row id from a path (a thread, task or turn: the seq of the event that made it), or undefined. */
export function parseSeqId(raw: string | number): number | undefined {
  const id = typeof raw === "number" ? raw : Number(raw);
  return Number.isSafeInteger(id) && id > 0 ? id : undefined;
}

/** Owner actions: the owner token as a Bearer token, or the admin token. */
export function requireOwner(svc: Services, room: RoomRow, bearer: string | undefined): void {
  if (!bearer) throw new ParleyError("not_owner", "This action needs the room's owner token: send Authorization: Bearer <owner_token>.");
  const admin = svc.config.adminToken;
  if (tokenMatches(room.ownerTokenHash, bearer)) return;
  if (admin && tokenMatches(hashToken(admin), bearer)) return;
  throw new ParleyError("not_owner", "The token does not match this room's owner token.");
}

export function createRoom(svc: Services, caller: Caller, input: CreateRoomInput) {
  svc.limiter.take(`rooms:${caller.ip}`, svc.config.rate.roomsPerHour, 3_600_000, "rooms created from your address");
  if (input.protocol_mode === "premium" && !svc.config.arbiterConfigured) {
    throw new ParleyError("arbiter_unavailable", "Premium rooms need an LLM arbiter, and none is configured on this server. Create a standard room.");
  }
  const uuid = crypto.randomUUID();
  const ownerToken = crypto.randomBytes(24).toString("base64url");
  const now = svc.clock.now();
  const nowIso = new Date(now).toISOString();
  const expires = new Date(expiresAt(now, now, roomLife(svc))).toISOString();
  const turns = input.mode === "turns" && input.turns ? turnsConfig(input.turns) : undefined;
  const payload = { description: input.description, is_public: input.is_public, protocol_mode: input.protocol_mode, mode: input.mode, ...(turns ? { turns } : {}) };

  const { room, receipt } = writeTx(svc, (tx) => {
    const row: RoomRow = {
      uuid,
      description: input.description,
      isPublic: input.is_public,
      protocolMode: input.protocol_mode,
      mode: input.mode,
      status: "open",
      ownerTokenHash: hashToken(ownerToken),
      createdAt: nowIso,
      lastActivityAt: nowIso,
      expiresAt: expires,
      messageCount: 0,
      agentCount: 0,
      headSize: 0,
      headLeaf: ZERO_HASH_HEX,
      headRoot: bytesToBase64(EMPTY_ROOT),
      frontier: "[]",
      checkpoint: "",
      arbiterWatermark: 0,
      arbiterCalls: 0,
      arbiterTokens: 0,
      arbiterItems: 0,
      lastExtractionError: null,
    };
    tx.insertRoom(row);
    const created = appendEvent(svc, tx, row, { type: "room.created", actor: "server", payload, server: { expires_at: expires, agree_quorum: svc.config.agreeQuorum } });
    if (turns) startTurns(svc, tx, created.room, created.event, turns);
    return created;
  });
  return {
    uuid,
    url: roomUrl(caller, uuid),
    description: room.description,
    created_at: room.createdAt,
    is_public: room.isPublic,
    protocol_mode: room.protocolMode,
    mode: room.mode,
    expires_at: room.expiresAt,
    owner_token: ownerToken,
    receipt,
  };
}

export function roomSummary(caller: Caller, room: RoomRow) {
  return {
    uuid: room.uuid,
    url: roomUrl(caller, room.uuid),
    description: room.description,
    created_at: room.createdAt,
    last_activity_at: room.lastActivityAt,
    message_count: room.messageCount,
    agent_count: room.agentCount,
    protocol_mode: room.protocolMode as "standard" | "premium",
    mode: room.mode as "open" | "turns",
  };
}

export function roomInfo(svc: Services, caller: Caller, room: RoomRow) {
  return {
    ...roomSummary(caller, room),
    expires_at: room.expiresAt,
    status: room.status as "open" | "closed",
    is_public: room.isPublic,
    arbiter_active: room.protocolMode === "premium" && svc.config.arbiterConfigured,
    last_extraction_error: room.lastExtractionError,
    arbiter: { calls: room.arbiterCalls, tokens: room.arbiterTokens, items: room.arbiterItems, last_extracted_msg_id: room.arbiterWatermark },
    head: { size: room.headSize, root: room.headRoot, checkpoint: room.checkpoint },
  };
}

export function getRoom(svc: Services, caller: Caller, rawId: string) {
  return roomInfo(svc, caller, requireRoom(svc, rawId));
}

export function listRooms(svc: Services, caller: Caller, query: ListRoomsInput) {
  const { rows, total } = svc.store.listPublicRooms({ ...query, now: isoNow(svc) });
  return { rooms: rows.map((r) => roomSummary(caller, r)), total };
}

function setRoomStatus(svc: Services, caller: Caller, rawId: string, bearer: string | undefined, closed: boolean) {
  const type = closed ? "room.closed" : "room.reopened";
  return writeTx(svc, (tx) => {
    const room = requireRoom(svc, rawId, tx);
    requireOwner(svc, room, bearer);
    // Closing a closed room (or reopening an open one) is a no-op, not a second event.
    if ((room.status === "closed") === closed) return { ...roomInfo(svc, caller, room), receipt: null as Receipt | null };
    const turnsStatus = room.mode === "turns" ? tx.getTurnsRoom(room.uuid)?.status : undefined;
    if (!closed && (turnsStatus === "completed" || turnsStatus === "cancelled")) {
      throw new ParleyError("room_closed", `This turns room is ${turnsStatus}: it stays read-only for good. Create a new room to go on.`);
    }
    const appended = appendEvent(svc, tx, room, { type, actor: "owner", payload: {} }, { status: closed ? "closed" : "open" });
    return { ...roomInfo(svc, caller, appended.room), receipt: appended.receipt as Receipt | null };
  });
}

export const closeRoom = (svc: Services, caller: Caller, id: string, bearer?: string) => setRoomStatus(svc, caller, id, bearer, true);
export const reopenRoom = (svc: Services, caller: Caller, id: string, bearer?: string) => setRoomStatus(svc, caller, id, bearer, false);

export function deleteRoom(svc: Services, rawId: string, bearer: string | undefined): { deleted: string } {
  const deleted = svc.store.write((tx) => {
    const room = requireRoom(svc, rawId, tx); // 410 for an expired room, swept or not, as on every route
    requireOwner(svc, room, bearer);
    tx.deleteRoomData(room.uuid, false);
    return { deleted: room.uuid };
  }).deleted;
  svc.frames.forget(deleted);
  svc.notifier.publish(deleted, ROOM_GONE); // streams and long-polls end now
  return { deleted };
}

/** Removes expired rooms' data and keeps a tombstone, so their URLs keep answering 410. */
export function sweepExpiredRooms(svc: Services, batch = 100): number {
  let removed = 0;
  for (;;) {
    const ids = svc.store.write((tx) => {
      const expired = tx.expiredRooms(isoNow(svc), batch);
      for (const id of expired) tx.deleteRoomData(id, true);
      return expired;
    });
    for (const id of ids) {
      svc.frames.forget(id);
      svc.notifier.publish(id, ROOM_GONE); // streams and long-polls end now
    }
    removed += ids.length;
    if (ids.length < batch) return removed;
  }
}
