// How the operator's rows look in the admin API (snake_case, JSON parsed) and, through it, in the console.
import type { AdminAlertRow, AdminRoomRow, ReportRow } from "../store/types";

export function reportView(r: ReportRow) {
  return {
    id: r.id, room: r.room, message_id: r.messageId, reason: r.reason, reporter: r.reporter, created_at: r.createdAt,
    status: r.status, resolved_at: r.resolvedAt, resolution: r.resolution,
  };
}
export type ReportView = ReturnType<typeof reportView>;

export function adminRoomView(r: AdminRoomRow, url: string) {
  return {
    uuid: r.uuid, url, description: r.description, status: r.status as "open" | "closed", mode: r.mode as "open" | "turns",
    is_public: r.isPublic, hidden: r.hidden, created_at: r.createdAt, last_activity_at: r.lastActivityAt, expires_at: r.expiresAt,
    message_count: r.messageCount, agent_count: r.agentCount, events: r.headSize, open_reports: Number(r.openReports),
    last_extraction_error: r.lastExtractionError,
  };
}
export type AdminRoomView = ReturnType<typeof adminRoomView>;

/** One finding of the monitors, whatever gathered it. */
export interface AlertView {
  kind: "loop_guard_streak" | "loop_guard_pair" | "stalled_turn" | "expired_turn_lease" | "expired_task_lease" | "arbiter_error" | "webhook_dead" | "webhook_disabled";
  room: string;
  summary: string;
  /** When it was raised, or when the state it describes began. */
  at: string | null;
  detail: Record<string, unknown>;
}

export function loopAlertView(r: AdminAlertRow): AlertView {
  return { kind: r.kind as AlertView["kind"], room: r.room, summary: r.summary, at: r.createdAt, detail: JSON.parse(r.detail) as Record<string, unknown> };
}
