/**
 * The operator's actions, the same for the console and the JSON API (the adapters check who is
 * asking first). On a room each is an event of its log with actor `admin` (room.closed,
 * room.reopened, room.hidden, room.unhidden) and an admin audit row; a deletion removes the log,
 * so its audit row is its record.
 */
import { ParleyError } from "../errors";
import { parseRoomId, requireRoom } from "../services/access";
import type { Caller, Services } from "../services/context";
import { appendEvent, write } from "../services/events";
import { removeRoom, roomInfo, setRoomStatusAs } from "../services/rooms";
import { audit, type AdminActor } from "./audit";
import { reportView } from "./views";

export const closeRoomAsAdmin = (svc: Services, caller: Caller, actor: AdminActor, rawId: string, reason?: string) =>
  setRoomStatusAs(svc, caller, rawId, true, { admin: actor, reason });

export const reopenRoomAsAdmin = (svc: Services, caller: Caller, actor: AdminActor, rawId: string, reason?: string) =>
  setRoomStatusAs(svc, caller, rawId, false, { admin: actor, reason });

export const deleteRoomAsAdmin = (svc: Services, actor: AdminActor, rawId: string, reason?: string) => removeRoom(svc, rawId, { admin: actor, reason });

/**
 * Takes a room off the public list (or puts it back): a room.hidden / room.unhidden event and the
 * flag the list reads, in one transaction. The room is otherwise unchanged: its URL still works.
 */
export async function setRoomHidden(svc: Services, caller: Caller, actor: AdminActor, rawId: string, hidden: boolean, reason?: string) {
  const id = parseRoomId(rawId);
  const done = await write(svc, [id], async (tx) => {
    const room = await requireRoom(svc, id, tx);
    if (room.hidden === hidden) return { room, receipt: null };
    const appended = await appendEvent(svc, tx, room, { type: hidden ? "room.hidden" : "room.unhidden", actor: "admin", payload: reason ? { reason } : {} });
    await tx.setRoomHidden(room.uuid, hidden);
    await audit(tx, actor, hidden ? "hide" : "unhide", { room: room.uuid, reason, detail: { seq: appended.event.seq } });
    return { room: appended.room, receipt: appended.receipt };
  });
  // After the commit: the head's checkpoint is signed when the transaction's work is done.
  return { ...roomInfo(svc, caller, { ...done.room, hidden }), hidden, receipt: done.receipt };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const reportNotFound = () => new ParleyError("not_found", "No abuse report has this id. List them with GET /api/admin/reports.");

/** Resolves an open report (a resolved one stays as it was: 409 invalid_transition). */
export async function resolveReport(svc: Services, actor: AdminActor, rawId: string, resolution?: string) {
  if (!UUID.test(rawId)) throw reportNotFound();
  const id = rawId.toLowerCase();
  return write(svc, [], async (tx) => {
    const report = await tx.getReport(id);
    if (!report) throw reportNotFound();
    if (!(await tx.resolveReport(id, tx.now, resolution ?? null))) {
      throw new ParleyError("invalid_transition", `This report was already resolved at ${report.resolvedAt ?? "an earlier time"}.`);
    }
    await audit(tx, actor, "resolve_report", { room: report.room, reportId: id, reason: resolution ?? null });
    return reportView({ ...report, status: "resolved", resolvedAt: tx.now, resolution: resolution ?? null });
  });
}
