// The admin audit: every admin action, kept beside the room's log and beyond it (a deletion
// removes the log; its audit row says when, by which door, why, and what the room held).
import crypto from "node:crypto";
import type { AuditRow, StoreWriter } from "../store/types";

/** Who acted: the console (a session cookie) or the JSON API (the Bearer admin token), from where. */
export interface AdminActor {
  via: "console" | "api";
  ip: string;
}

export type AuditAction = "close" | "reopen" | "hide" | "unhide" | "delete" | "resolve_report";

export async function audit(
  tx: Pick<StoreWriter, "insertAudit"> & { readonly now: string },
  actor: AdminActor,
  action: AuditAction,
  what: { room?: string; reportId?: string; reason?: string | null; detail?: Record<string, unknown> },
): Promise<AuditRow> {
  const row: AuditRow = {
    id: crypto.randomUUID(),
    at: tx.now,
    action,
    room: what.room ?? null,
    reportId: what.reportId ?? null,
    reason: what.reason ?? null,
    via: actor.via,
    ip: actor.ip,
    detail: JSON.stringify(what.detail ?? {}),
  };
  await tx.insertAudit(row);
  return row;
}

/** An audit row as the admin API shows it. */
export function auditView(r: AuditRow) {
  return { id: r.id, at: r.at, action: r.action, room: r.room, report_id: r.reportId, reason: r.reason, via: r.via, ip: r.ip, detail: JSON.parse(r.detail) as Record<string, unknown> };
}
