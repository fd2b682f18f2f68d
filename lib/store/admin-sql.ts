// SQL the operator's aggregate shares between SQLite and PostgreSQL (lib/store/admin-sqlite.ts,
// admin-pg.ts). Aliases are quoted: PostgreSQL folds unquoted ones to lower case.
import type { AdminRoomQuery } from "./admin-types";

export const REPORT_COLS = `id, room, message_id AS "messageId", reason, reporter, created_at AS "createdAt", status, resolved_at AS "resolvedAt", resolution`;
export const AUDIT_COLS = `id, at, action, room, report_id AS "reportId", reason, via, ip, detail`;
export const ALERT_COLS = `id, room, kind, subject, summary, detail, created_at AS "createdAt"`;
export const TROUBLED_WEBHOOK_COLS = `w.id, w.room, w.kind, w.url, w.consecutive_dead AS "consecutiveDead", w.disabled_at AS "disabledAt", w.disabled_reason AS "disabledReason"`;

/** ORDER BY of the console's room list (whitelisted: never the caller's text). */
export const ADMIN_ROOM_ORDER = {
  active: "r.last_activity_at DESC",
  new: "r.created_at DESC",
  messages: "r.message_count DESC, r.last_activity_at DESC",
  events: "r.head_size DESC, r.last_activity_at DESC",
  agents: "r.agent_count DESC, r.last_activity_at DESC",
  status: "CASE r.status WHEN 'open' THEN 0 ELSE 1 END, r.last_activity_at DESC",
} as const;

export const ADMIN_ROOM_COLS = `r.uuid, r.description, r.is_public AS "isPublic", r.hidden, r.mode, r.status, r.created_at AS "createdAt",
  r.last_activity_at AS "lastActivityAt", r.expires_at AS "expiresAt", r.message_count AS "messageCount", r.agent_count AS "agentCount",
  r.head_size AS "headSize", r.last_extraction_error AS "lastExtractionError",
  (SELECT count(*) FROM abuse_reports a WHERE a.room = r.uuid AND a.status = 'open') AS "openReports"`;

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * The WHERE of the console's room list. `param` binds a value and returns its placeholder; `bool`
 * renders a test of a boolean column (the dialects store booleans differently).
 */
export function adminRoomWhere(q: AdminRoomQuery, param: (value: unknown) => string, bool: (col: string, value: boolean) => string): string {
  const where = [`r.status <> 'expired'`, `r.expires_at > ${param(q.now)}`];
  if (q.status) where.push(`r.status = ${param(q.status)}`);
  if (q.visibility === "public") where.push(bool("r.is_public", true), bool("r.hidden", false));
  if (q.visibility === "private") where.push(bool("r.is_public", false));
  if (q.visibility === "hidden") where.push(bool("r.hidden", true));
  if (q.q) {
    // The escape character is named: SQLite has none by default (PostgreSQL's is the backslash too).
    where.push(`(r.description LIKE ${param(`%${escapeLike(q.q)}%`)} ESCAPE '\\' OR r.uuid LIKE ${param(`${escapeLike(q.q.toLowerCase())}%`)} ESCAPE '\\')`);
  }
  return where.join(" AND ");
}

export const isoBefore = (now: string, ms: number) => new Date(Date.parse(now) - ms).toISOString();
