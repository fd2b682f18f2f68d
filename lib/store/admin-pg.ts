// The operator's aggregate on PostgreSQL (lib/store/admin-types.ts).
import type pg from "pg";
import type { AdminAlertRow, AdminReader, AdminRoomRow, AdminSummary, AdminWriter, AuditRow, ReportRow, TroubledWebhookRow } from "./admin-types";
import { ADMIN_ROOM_COLS, ADMIN_ROOM_ORDER, adminRoomWhere, ALERT_COLS, AUDIT_COLS, isoBefore, REPORT_COLS, TROUBLED_WEBHOOK_COLS } from "./admin-sql";

type Queryable = Pick<pg.ClientBase, "query">;
const DAY = 86_400_000;

export function adminPgReader(db: Queryable): AdminReader {
  const all = async <T>(text: string, values: unknown[] = []): Promise<T[]> => (await db.query<T & pg.QueryResultRow>({ text, values })).rows;
  const one = async <T>(text: string, values: unknown[] = []): Promise<T | undefined> => (await all<T>(text, values))[0];
  const count = async (text: string, values: unknown[] = []) => (await one<{ n: number }>(text, values))?.n ?? 0;
  return {
    getReport: (id) => one<ReportRow>(`SELECT ${REPORT_COLS} FROM abuse_reports WHERE id = $1`, [id]),
    async listReports(q) {
      const filters: string[] = [];
      const values: unknown[] = [];
      if (q.status) {
        values.push(q.status);
        filters.push(`status = $${values.length}`);
      }
      if (q.room) {
        values.push(q.room);
        filters.push(`room = $${values.length}`);
      }
      const where = filters.length ? `WHERE ${filters.join(" AND ")}` : "";
      const rows = await all<ReportRow>(
        `SELECT ${REPORT_COLS} FROM abuse_reports ${where} ORDER BY created_at DESC, id LIMIT ${Number(q.limit)} OFFSET ${Number(q.offset)}`,
        values,
      );
      return { rows, total: await count(`SELECT count(*)::int AS n FROM abuse_reports ${where}`, values) };
    },
    listAudit: (q) =>
      q.room
        ? all<AuditRow>(`SELECT ${AUDIT_COLS} FROM admin_audit WHERE room = $1 ORDER BY at DESC, id LIMIT $2`, [q.room, q.limit])
        : all<AuditRow>(`SELECT ${AUDIT_COLS} FROM admin_audit ORDER BY at DESC, id LIMIT $1`, [q.limit]),
    lastAudit: (room, actions) =>
      one<AuditRow>(`SELECT ${AUDIT_COLS} FROM admin_audit WHERE room = $1 AND action = ANY($2::text[]) ORDER BY at DESC, (detail::jsonb->>'seq')::bigint DESC NULLS LAST, id LIMIT 1`, [room, [...actions]]),
    listAdminAlerts: (limit) => all<AdminAlertRow>(`SELECT ${ALERT_COLS} FROM admin_alerts ORDER BY created_at DESC, id LIMIT $1`, [limit]),
    hasAdminAlertSince: async (room, kind, subject, since) =>
      (await one(`SELECT 1 FROM admin_alerts WHERE room = $1 AND kind = $2 AND subject = $3 AND created_at >= $4 LIMIT 1`, [room, kind, subject, since])) !== undefined,
    async adminListRooms(q) {
      const values: unknown[] = [];
      const where = adminRoomWhere(q, (value) => `$${values.push(value)}`, (col, value) => (value ? col : `NOT ${col}`));
      const rows = await all<AdminRoomRow>(
        `SELECT ${ADMIN_ROOM_COLS.replace(`AS "openReports"`, `::int AS "openReports"`)} FROM rooms r WHERE ${where}
         ORDER BY ${ADMIN_ROOM_ORDER[q.sort]} LIMIT ${Number(q.limit)} OFFSET ${Number(q.offset)}`,
        values,
      );
      return { rows, total: await count(`SELECT count(*)::int AS n FROM rooms r WHERE ${where}`, values) };
    },
    async adminSummary(now) {
      const rooms = await one<Omit<AdminSummary, "openReports" | "loopAlertsLastDay">>(
        `SELECT count(*)::int AS rooms, count(*) FILTER (WHERE status = 'open')::int AS open, count(*) FILTER (WHERE status = 'closed')::int AS closed,
           count(*) FILTER (WHERE is_public)::int AS public, count(*) FILTER (WHERE hidden)::int AS hidden,
           coalesce(sum(message_count), 0)::int AS messages, count(*) FILTER (WHERE created_at > $1)::int AS "createdLastDay",
           count(*) FILTER (WHERE last_activity_at > $2)::int AS "activeLastHour"
         FROM rooms WHERE status <> 'expired' AND expires_at > $3`,
        [isoBefore(now, DAY), isoBefore(now, 3_600_000), now],
      );
      return {
        ...rooms!,
        openReports: await count(`SELECT count(*)::int AS n FROM abuse_reports WHERE status = 'open'`),
        loopAlertsLastDay: await count(`SELECT count(*)::int AS n FROM admin_alerts WHERE created_at > $1`, [isoBefore(now, DAY)]),
      };
    },
    roomsWithExtractionError: (limit) =>
      all(
        `SELECT uuid, last_extraction_error AS error, last_activity_at AS "lastActivityAt" FROM rooms
         WHERE last_extraction_error IS NOT NULL AND status <> 'expired' ORDER BY last_activity_at DESC LIMIT $1`,
        [limit],
      ),
    troubledWebhooks: (limit) =>
      all<TroubledWebhookRow>(
        `SELECT ${TROUBLED_WEBHOOK_COLS} FROM webhooks w JOIN rooms r ON r.uuid = w.room
         WHERE (w.disabled_at IS NOT NULL OR w.consecutive_dead > 0) AND r.status <> 'expired'
         ORDER BY w.disabled_at IS NULL, w.disabled_at DESC, w.consecutive_dead DESC LIMIT $1`,
        [limit],
      ),
    recentSpeakers: async (room, limit) =>
      (await all<{ seq: number; agentId: string; ts: string }>(`SELECT seq, agent_id AS "agentId", ts FROM messages WHERE room = $1 ORDER BY seq DESC LIMIT $2`, [room, limit])).reverse(),
  };
}

export function adminPgWriter(client: Queryable): AdminWriter {
  const run = async (text: string, values: unknown[]) => (await client.query({ text, values })).rowCount ?? 0;
  return {
    insertReport: async (r) =>
      void (await run(
        `INSERT INTO abuse_reports (id, room, message_id, reason, reporter, created_at, status, resolved_at, resolution) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
        [r.id, r.room, r.messageId, r.reason, r.reporter, r.createdAt, r.status, r.resolvedAt, r.resolution],
      )),
    resolveReport: async (id, at, resolution) =>
      (await run(`UPDATE abuse_reports SET status = 'resolved', resolved_at = $2, resolution = $3 WHERE id = $1 AND status = 'open'`, [id, at, resolution])) === 1,
    resolveRoomReports: (room, at, resolution) =>
      run(`UPDATE abuse_reports SET status = 'resolved', resolved_at = $2, resolution = $3 WHERE room = $1 AND status = 'open'`, [room, at, resolution]),
    insertAudit: async (a) =>
      void (await run(
        `INSERT INTO admin_audit (id, at, action, room, report_id, reason, via, ip, detail) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
        [a.id, a.at, a.action, a.room, a.reportId, a.reason, a.via, a.ip, a.detail],
      )),
    insertAdminAlert: async (a) =>
      void (await run(
        `INSERT INTO admin_alerts (id, room, kind, subject, summary, detail, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7)`,
        [a.id, a.room, a.kind, a.subject, a.summary, a.detail, a.createdAt],
      )),
    setRoomHidden: async (room, hidden) => void (await run(`UPDATE rooms SET hidden = $2 WHERE uuid = $1`, [room, hidden])),
  };
}
