import crypto from "node:crypto";
import { ParleyError } from "../errors";
import { expiresAt, isExpired } from "../domain/room";
import { ZERO_HASH_HEX } from "../log/event";
import { bytesToBase64 } from "../log/bytes";
import { EMPTY_ROOT } from "../log/merkle";
import type { CreateRoomInput, ListRoomsInput } from "../schemas/rooms";
import type { RoomRow, StoreReader } from "../store/types";
import { isoNow, roomLife, type Caller, type Services } from "./context";
import { hashToken, parseRoomId, requireOwner, requireRoom } from "./access";
import { refuseSecrets } from "../domain/secrets";
import { appendEvent, write, type Receipt } from "./events";
import { ROOM_GONE } from "../realtime/notifier";
import type { TurnsConfigInput } from "../schemas/turns";
import type { TurnsConfig } from "../domain/turns";
import { speakingOrder } from "../domain/turns";
import { startTurns } from "./turns";
import { audit, type AdminActor } from "../admin/audit";
import { isAdminToken } from "../admin/auth";
import { loopGuardOf } from "./loop-guard";

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

export const roomUrl = (caller: Caller, uuid: string) => `${caller.origin}/${uuid}`;

export async function createRoom(svc: Services, caller: Caller, input: CreateRoomInput) {
  await svc.limiter.take(`rooms:${caller.ip}`, svc.config.rate.roomsPerHour, 3_600_000, "rooms created from your address");
  if (input.protocol_mode === "premium" && !svc.config.arbiterConfigured) {
    throw new ParleyError("arbiter_unavailable", "Premium rooms need an LLM arbiter, and none is configured on this server. Create a standard room.");
  }
  const uuid = crypto.randomUUID();
  const ownerToken = crypto.randomBytes(24).toString("base64url");
  const now = svc.clock.now();
  const nowIso = new Date(now).toISOString(); // the transaction's time (one clock reading for the room and its events)
  const expires = new Date(expiresAt(now, now, roomLife(svc))).toISOString();
  const turns = input.mode === "turns" && input.turns ? turnsConfig(input.turns) : undefined;
  const payload = { description: input.description, is_public: input.is_public, protocol_mode: input.protocol_mode, mode: input.mode, ...(turns ? { turns } : {}) };
  // The server writes room.created, but the description and the participants' names are the creator's text.
  refuseSecrets(payload);

  const { room, receipt } = await write(svc, [], async (tx) => {
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
      frontier: "",
      checkpoint: "",
      arbiterWatermark: 0,
      arbiterCalls: 0,
      arbiterTokens: 0,
      arbiterItems: 0,
      lastExtractionError: null,
      hidden: false,
    };
    await tx.insertRoom(row);
    const created = await appendEvent(svc, tx, row, { type: "room.created", actor: "server", payload, server: { expires_at: expires, agree_quorum: svc.config.agreeQuorum } });
    if (turns) await startTurns(svc, tx, created, turns);
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

/** roomInfo and the loop guard's counters (read through `reader`: inside a transaction, the transaction). */
async function roomInfoWithGuard(svc: Services, caller: Caller, room: RoomRow, reader: Pick<StoreReader, "recentSpeakers"> = svc.store, nowMs?: number) {
  return { ...roomInfo(svc, caller, room), loop_guard: await loopGuardOf(svc, reader, room, nowMs) };
}

export async function getRoom(svc: Services, caller: Caller, rawId: string) {
  return roomInfoWithGuard(svc, caller, await requireRoom(svc, rawId));
}

export async function listRooms(svc: Services, caller: Caller, query: ListRoomsInput) {
  const { rows, total } = await svc.store.listPublicRooms({ ...query, now: isoNow(svc) });
  return { rooms: rows.map((r) => roomSummary(caller, r)), total };
}

/** Who changes a room's status: its owner (the owner token), or the operator (the admin token or console). */
export type StatusActor = { owner: true } | { admin: AdminActor; reason?: string };

/**
 * Closes or reopens a room as `who`. A room the operator closed stays closed for its owner: only
 * the operator reopens it (its admin audit says who closed it last).
 */
export async function setRoomStatusAs(svc: Services, caller: Caller, rawId: string, closed: boolean, who: StatusActor, check: (room: RoomRow) => void = () => {}) {
  const type = closed ? "room.closed" : "room.reopened";
  const id = parseRoomId(rawId);
  const done = await write(svc, [id], async (tx) => {
    const room = await requireRoom(svc, id, tx);
    check(room);
    // Closing a closed room (or reopening an open one) is a no-op, not a second event.
    if ((room.status === "closed") === closed) return { room, receipt: null as Receipt | null };
    const turnsStatus = room.mode === "turns" ? (await tx.getTurnsRoom(room.uuid))?.status : undefined;
    if (!closed && (turnsStatus === "completed" || turnsStatus === "cancelled")) {
      throw new ParleyError("room_closed", `This turns room is ${turnsStatus}: it stays read-only for good. Create a new room to go on.`);
    }
    if (!closed && "owner" in who && (await tx.lastAudit(room.uuid, ["close", "reopen"]))?.action === "close") {
      throw new ParleyError("forbidden", "The operator of this server closed this room; only the operator can reopen it.");
    }
    const reason = "admin" in who && who.reason ? who.reason : undefined;
    const appended = await appendEvent(svc, tx, room, { type, actor: "owner" in who ? "owner" : "admin", payload: reason ? { reason } : {} });
    if ("admin" in who) await audit(tx, who.admin, closed ? "close" : "reopen", { room: room.uuid, reason, detail: { seq: appended.event.seq } });
    return { room: appended.room, receipt: appended.receipt as Receipt | null };
  });
  // After the commit: the head's checkpoint is signed when the transaction's work is done.
  return { ...(await roomInfoWithGuard(svc, caller, done.room)), receipt: done.receipt };
}

/** The owner's door (POST /api/rooms/{id}/close, /reopen); the admin token there acts as the operator. */
function setRoomStatus(svc: Services, caller: Caller, rawId: string, bearer: string | undefined, closed: boolean) {
  if (isAdminToken(svc, bearer)) return setRoomStatusAs(svc, caller, rawId, closed, { admin: { via: "api", ip: caller.ip } });
  return setRoomStatusAs(svc, caller, rawId, closed, { owner: true }, (room) => requireOwner(svc, room, bearer));
}

export const closeRoom = (svc: Services, caller: Caller, id: string, bearer?: string) => setRoomStatus(svc, caller, id, bearer, true);
export const reopenRoom = (svc: Services, caller: Caller, id: string, bearer?: string) => setRoomStatus(svc, caller, id, bearer, false);

/** DELETE /api/rooms/{id}: the owner token, or the admin token (then it is the operator's deletion, audited). */
export async function deleteRoom(svc: Services, rawId: string, bearer: string | undefined, caller?: Caller): Promise<{ deleted: string }> {
  if (isAdminToken(svc, bearer)) return removeRoom(svc, rawId, { admin: { via: "api", ip: caller?.ip ?? "unknown" } });
  return removeRoom(svc, rawId, { owner: true }, (room) => requireOwner(svc, room, bearer));
}

/**
 * Removes a room and everything it had (the cascade). The operator's deletion leaves an admin audit
 * row (when, by which door, why, and the room's counts) and resolves the room's open reports.
 */
export async function removeRoom(svc: Services, rawId: string, who: StatusActor, check: (room: RoomRow) => void = () => {}): Promise<{ deleted: string }> {
  const id = parseRoomId(rawId);
  const { deleted } = await write(svc, [id], async (tx) => {
    const room = await requireRoom(svc, id, tx); // 410 for an expired room, swept or not, as on every route
    check(room);
    if ("admin" in who) {
      const reason = who.reason ?? null;
      const reports = await tx.resolveRoomReports(room.uuid, tx.now, `The room was deleted${reason ? `: ${reason}` : "."}`);
      await audit(tx, who.admin, "delete", {
        room: room.uuid,
        reason,
        detail: {
          messages: room.messageCount, events: room.headSize, agents: room.agentCount, mode: room.mode, status: room.status,
          is_public: room.isPublic, hidden: room.hidden, created_at: room.createdAt, description: room.description, reports_resolved: reports,
        },
      });
    }
    await tx.deleteRoomData(room.uuid, false);
    return { deleted: room.uuid };
  });
  roomGone(svc, deleted);
  return { deleted };
}

/** A deleted or swept room: its cached frames go and its streams and long-polls end now. */
function roomGone(svc: Services, uuid: string): void {
  svc.frames.forget(uuid);
  svc.notifier.publish(uuid, ROOM_GONE);
}

/**
 * Removes expired rooms' data and keeps a tombstone, so their URLs keep answering 410. Each room is
 * removed under its lock and only if it is still expired and not yet swept, so instances sweeping
 * at once remove each room once.
 */
export async function sweepExpiredRooms(svc: Services, batch = 100): Promise<number> {
  let removed = 0;
  for (;;) {
    const ids = await svc.store.expiredRooms(isoNow(svc), batch);
    for (const id of ids) {
      const swept = await write(svc, [id], async (tx) => {
        const room = await tx.getRoom(id);
        if (!room || room.status === "expired" || !isExpired(room, tx.now)) return false;
        await tx.deleteRoomData(id, true);
        return true;
      });
      if (swept) removed++;
      roomGone(svc, id);
    }
    if (ids.length < batch) return removed;
  }
}
