// Access guards, in one place: room ids, the room a request names, the owner's token, tokens
// stored as hashes. Every use case (REST, MCP, pages) goes through these.
import crypto from "node:crypto";
import { ParleyError, roomExpired, roomNotFound } from "../errors";
import { isExpired } from "../domain/room";
import { postRefusal, type TurnsRoom } from "../domain/turns";
import type { RoomRow, StoreReader } from "../store/types";
import { isoNow, type Services } from "./context";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Room ids: UUIDs, upper case accepted and normalised, anything else 400 invalid_uuid. */
export function parseRoomId(raw: string): string {
  const id = raw; // not trimmed: " <uuid>" (a leading %20) is not a room id
  if (!UUID.test(id)) throw new ParleyError("invalid_uuid", `"${raw.slice(0, 60)}" is not a room id: expected a UUID such as 3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23.`);
  return id.toLowerCase();
}

/** The room, or 404 room_not_found / 410 room_expired. Inside a transaction, pass the transaction. */
export async function requireRoom(svc: Services, rawId: string, reader: Pick<StoreReader, "getRoom"> = svc.store): Promise<RoomRow> {
  const id = parseRoomId(rawId);
  // Outside a transaction the row comes from memory while no commit has moved the room.
  const room = reader === svc.store ? await svc.roomRows.get(id) : await reader.getRoom(id);
  if (!room) throw roomNotFound();
  if (isExpired(room, isoNow(svc))) throw roomExpired();
  return room;
}

/** True for a room id whose room existed and has expired (its URL answers 410). */
export async function roomIsExpired(svc: Services, rawId: string): Promise<boolean> {
  const room = await svc.store.getRoom(rawId.toLowerCase());
  return room !== undefined && isExpired(room, isoNow(svc));
}

/** Same as requireRoom, and 409 room_closed when the room no longer accepts writes. */
export async function requireOpenRoom(svc: Services, rawId: string, reader: Pick<StoreReader, "getRoom" | "getTurnsRoom">): Promise<RoomRow> {
  const room = await requireRoom(svc, rawId, reader);
  if (room.status === "closed") {
    const ended = room.mode === "turns" ? (await reader.getTurnsRoom(room.uuid))?.status : undefined;
    if (ended === "completed" || ended === "cancelled") {
      throw new ParleyError("room_closed", `This turns room is ${ended} and read-only. Stop posting to it.`);
    }
    throw new ParleyError("room_closed", "This room is closed by its owner and is read-only. Stop posting to it.");
  }
  return room;
}

/** The turns state of a turns room, or 404 turn_not_found for an open room. */
export async function requireTurnsRoom(reader: Pick<StoreReader, "getTurnsRoom">, room: RoomRow): Promise<TurnsRoom> {
  const turns = room.mode === "turns" ? await reader.getTurnsRoom(room.uuid) : undefined;
  if (!turns) throw new ParleyError("turn_not_found", 'This room is not a turns room: it was created with mode "open", so anyone may post at any time.');
  return turns;
}

const notParticipant = (turnsRoom: TurnsRoom, agentId: string) =>
  new ParleyError("not_participant", `"${agentId}" is not a participant of this turns room (participants: ${turnsRoom.config.participants.map((a) => `"${a}"`).join(", ")}). Watch it, or ask the owner for a room of your own.`);

/** 403 not_participant unless `agentId` takes part in this turns room. */
export function requireParticipant(turnsRoom: TurnsRoom, agentId: string): void {
  if (postRefusal(turnsRoom, undefined, agentId, "") === "not_participant") throw notParticipant(turnsRoom, agentId);
}

/** In a turns room a participant posts only in its claimed turn (lib/domain/turns.ts postRefusal). */
export async function requireTurnToPost(svc: Services, tx: Pick<StoreReader, "getTurnsRoom" | "getTurn">, room: RoomRow, agentId: string): Promise<void> {
  const turnsRoom = await requireTurnsRoom(tx, room);
  const current = turnsRoom.current === null ? undefined : await tx.getTurn(room.uuid, turnsRoom.current);
  const refusal = postRefusal(turnsRoom, current, agentId, isoNow(svc));
  if (refusal === "not_participant") throw notParticipant(turnsRoom, agentId);
  if (refusal === "not_your_turn") {
    const how = `This is a turns room: wait for your turn (MCP my_turn, or GET /api/rooms/${room.uuid}/turns/mine?agent_id=${encodeURIComponent(agentId)}&wait=30), claim it (my_turn with claim: true, or POST .../turns/{turn_id}/claim) and answer with reply_turn (or POST .../turns/{turn_id}/reply {agent_id, lease_token, text, result}).`;
    throw new ParleyError("not_your_turn", `It is not your turn. ${how}`, { status: 409 });
  }
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
