// The operator's aggregate on SQLite (lib/store/admin-types.ts). Statements are prepared on first
// use: readers are built for every snapshot connection, and most never ask the operator's questions.
import type Database from "better-sqlite3";
import type { AdminAlertRow, AdminReader, AdminRoomRow, AdminSummary, AdminWriter, AuditRow, ReportRow, TroubledWebhookRow } from "./admin-types";
import { ADMIN_ROOM_COLS, ADMIN_ROOM_ORDER, adminRoomWhere, ALERT_COLS, AUDIT_COLS, isoBefore, REPORT_COLS, TROUBLED_WEBHOOK_COLS } from "./admin-sql";

const DAY = 86_400_000;

function statements(sqlite: Database.Database): (text: string) => Database.Statement {
  const cache = new Map<string, Database.Statement>();
  return (text) => {
    let s = cache.get(text);
    if (!s) cache.set(text, (s = sqlite.prepare(text)));
    return s;
  };
}

export function adminReaderOn(sqlite: Database.Database): AdminReader {
  const stmt = statements(sqlite);
  const count = (text: string, ...args: unknown[]) => (stmt(text).get(...args) as { n: number }).n;
  return {
    getReport: async (id) => stmt(`SELECT ${REPORT_COLS} FROM abuse_reports WHERE id = ?`).get(id) as ReportRow | undefined,
    async listReports(q) {
      const filters: string[] = [];
      const args: unknown[] = [];
      if (q.status) {
        filters.push("status = ?");
        args.push(q.status);
      }
      if (q.room) {
        filters.push("room = ?");
        args.push(q.room);
      }
      const where = filters.length ? `WHERE ${filters.join(" AND ")}` : "";
      const rows = stmt(`SELECT ${REPORT_COLS} FROM abuse_reports ${where} ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?`).all(...args, q.limit, q.offset) as ReportRow[];
      return { rows, total: count(`SELECT count(*) AS n FROM abuse_reports ${where}`, ...args) };
    },
    listAudit: async (q) =>
      (q.room
        ? stmt(`SELECT ${AUDIT_COLS} FROM admin_audit WHERE room = ? ORDER BY at DESC, rowid DESC LIMIT ?`).all(q.room, q.limit)
        : stmt(`SELECT ${AUDIT_COLS} FROM admin_audit ORDER BY at DESC, rowid DESC LIMIT ?`).all(q.limit)) as AuditRow[],
    lastAudit: async (room, actions) =>
      stmt(`SELECT ${AUDIT_COLS} FROM admin_audit WHERE room = ? AND action IN (SELECT value FROM json_each(?)) ORDER BY at DESC, json_extract(detail, '$.seq') DESC NULLS LAST, rowid DESC LIMIT 1`)
        .get(room, JSON.stringify(actions)) as AuditRow | undefined,
    listAdminAlerts: async (limit) => stmt(`SELECT ${ALERT_COLS} FROM admin_alerts ORDER BY created_at DESC, rowid DESC LIMIT ?`).all(limit) as AdminAlertRow[],
    hasAdminAlertSince: async (room, kind, subject, since) =>
      stmt(`SELECT 1 FROM admin_alerts WHERE room = ? AND kind = ? AND subject = ? AND created_at >= ? LIMIT 1`).get(room, kind, subject, since) !== undefined,
    async adminListRooms(q) {
      const args: unknown[] = [];
      const where = adminRoomWhere(q, (value) => (args.push(value), "?"), (col, value) => `${col} = ${value ? 1 : 0}`);
      const rows = stmt(`SELECT ${ADMIN_ROOM_COLS} FROM rooms r WHERE ${where} ORDER BY ${ADMIN_ROOM_ORDER[q.sort]} LIMIT ? OFFSET ?`).all(...args, q.limit, q.offset) as AdminRoomRow[];
      return {
        rows: rows.map((r) => ({ ...r, isPublic: Boolean(r.isPublic), hidden: Boolean(r.hidden) })),
        total: count(`SELECT count(*) AS n FROM rooms r WHERE ${where}`, ...args),
      };
    },
    async adminSummary(now) {
      const rooms = stmt(
        `SELECT count(*) AS rooms, coalesce(sum(status = 'open'), 0) AS open, coalesce(sum(status = 'closed'), 0) AS closed,
           coalesce(sum(is_public), 0) AS public, coalesce(sum(hidden), 0) AS hidden, coalesce(sum(message_count), 0) AS messages,
           coalesce(sum(created_at > ?), 0) AS "createdLastDay", coalesce(sum(last_activity_at > ?), 0) AS "activeLastHour"
         FROM rooms WHERE status <> 'expired' AND expires_at > ?`,
      ).get(isoBefore(now, DAY), isoBefore(now, 3_600_000), now) as Omit<AdminSummary, "openReports" | "loopAlertsLastDay">;
      return {
        ...rooms,
        openReports: count(`SELECT count(*) AS n FROM abuse_reports WHERE status = 'open'`),
        loopAlertsLastDay: count(`SELECT count(*) AS n FROM admin_alerts WHERE created_at > ?`, isoBefore(now, DAY)),
      };
    },
    roomsWithExtractionError: async (limit) =>
      stmt(
        `SELECT uuid, last_extraction_error AS error, last_activity_at AS "lastActivityAt" FROM rooms
         WHERE last_extraction_error IS NOT NULL AND status <> 'expired' ORDER BY last_activity_at DESC LIMIT ?`,
      ).all(limit) as { uuid: string; error: string; lastActivityAt: string }[],
    troubledWebhooks: async (limit) =>
      stmt(
        `SELECT ${TROUBLED_WEBHOOK_COLS} FROM webhooks w JOIN rooms r ON r.uuid = w.room
         WHERE (w.disabled_at IS NOT NULL OR w.consecutive_dead > 0) AND r.status <> 'expired'
         ORDER BY w.disabled_at IS NULL, w.disabled_at DESC, w.consecutive_dead DESC LIMIT ?`,
      ).all(limit) as TroubledWebhookRow[],
    recentSpeakers: async (room, limit) =>
      (stmt(`SELECT seq, agent_id AS "agentId", ts FROM messages WHERE room = ? ORDER BY seq DESC LIMIT ?`).all(room, limit) as { seq: number; agentId: string; ts: string }[]).reverse(),
  };
}

export function adminWriterOn(sqlite: Database.Database): AdminWriter {
  const stmt = statements(sqlite);
  return {
    insertReport: async (r) =>
      void stmt(
        `INSERT INTO abuse_reports (id, room, message_id, reason, reporter, created_at, status, resolved_at, resolution)
         VALUES (@id, @room, @messageId, @reason, @reporter, @createdAt, @status, @resolvedAt, @resolution)`,
      ).run(r),
    resolveReport: async (id, at, resolution) =>
      stmt(`UPDATE abuse_reports SET status = 'resolved', resolved_at = ?, resolution = ? WHERE id = ? AND status = 'open'`).run(at, resolution, id).changes === 1,
    resolveRoomReports: async (room, at, resolution) =>
      stmt(`UPDATE abuse_reports SET status = 'resolved', resolved_at = ?, resolution = ? WHERE room = ? AND status = 'open'`).run(at, resolution, room).changes,
    insertAudit: async (a) =>
      void stmt(`INSERT INTO admin_audit (id, at, action, room, report_id, reason, via, ip, detail) VALUES (@id, @at, @action, @room, @reportId, @reason, @via, @ip, @detail)`).run(a),
    insertAdminAlert: async (a) =>
      void stmt(`INSERT INTO admin_alerts (id, room, kind, subject, summary, detail, created_at) VALUES (@id, @room, @kind, @subject, @summary, @detail, @createdAt)`).run(a),
    setRoomHidden: async (room, hidden) => void stmt(`UPDATE rooms SET hidden = ? WHERE uuid = ?`).run(hidden ? 1 : 0, room),
  };
}
