/**
 * The operator's aggregate (SPEC 12 "Admin", "Abuse reports", "Loop guard"): abuse reports, the
 * admin audit, the loop guard's alerts and the cross-room reads the admin console needs. None of
 * it is a log event: reports and the audit outlive the rooms they name (no ON DELETE CASCADE), so
 * a deleted room's reports and its deletion stay on record; the loop guard's alerts go with their
 * room. Types only, no imports: lib/store/repository.ts gathers them.
 */

export type ReportStatus = "open" | "resolved";

export interface ReportRow {
  id: string;
  room: string;
  /** The message reported, when the reporter named one. */
  messageId: number | null;
  reason: string;
  /** A keyed hash (HMAC) of the reporter's address: enough to see one client filing many, not who it is. */
  reporter: string;
  createdAt: string;
  status: ReportStatus;
  resolvedAt: string | null;
  resolution: string | null;
}

/** An admin action, kept beyond the room's own log (which a deletion removes). */
export interface AuditRow {
  id: string;
  at: string;
  /** close | reopen | hide | unhide | delete | resolve_report */
  action: string;
  room: string | null;
  reportId: string | null;
  reason: string | null;
  /** console (a session) or api (the Bearer token) */
  via: string;
  /** The admin's client address. */
  ip: string;
  /** JSON: what the room held when it was deleted (messages, events, agents…), or other facts. */
  detail: string;
}

/** A monitor's finding stored for the admin console (the loop guard's). */
export interface AdminAlertRow {
  id: string;
  room: string;
  /** loop_guard_streak | loop_guard_pair */
  kind: string;
  /** What it is about, for deduplication: the agent's key, or the two agents' keys. */
  subject: string;
  summary: string;
  /** JSON facts. */
  detail: string;
  createdAt: string;
}

export type AdminRoomSort = "active" | "new" | "messages" | "events" | "agents" | "status";

export interface AdminRoomQuery {
  /** Text in the description, or the start of the room id. */
  q?: string;
  sort: AdminRoomSort;
  status?: "open" | "closed";
  visibility?: "public" | "private" | "hidden";
  limit: number;
  offset: number;
  /** Rooms past their expiry are not listed (they are gone for everyone else). */
  now: string;
}

/** A room as the console lists it. */
export interface AdminRoomRow {
  uuid: string;
  description: string;
  isPublic: boolean;
  hidden: boolean;
  mode: string;
  status: string;
  createdAt: string;
  lastActivityAt: string;
  expiresAt: string;
  messageCount: number;
  agentCount: number;
  headSize: number;
  lastExtractionError: string | null;
  /** Open abuse reports about the room. */
  openReports: number;
}

export interface AdminSummary {
  rooms: number;
  open: number;
  closed: number;
  public: number;
  hidden: number;
  messages: number;
  createdLastDay: number;
  activeLastHour: number;
  openReports: number;
  loopAlertsLastDay: number;
}

/** A webhook whose deliveries die, or that was disabled for it. */
export interface TroubledWebhookRow {
  id: string;
  room: string;
  kind: string;
  url: string;
  consecutiveDead: number;
  disabledAt: string | null;
  disabledReason: string | null;
}

export interface AdminReader {
  getReport(id: string): Promise<ReportRow | undefined>;
  /** Newest first; only those with `status` when given. */
  listReports(query: { status?: ReportStatus; room?: string; limit: number; offset: number }): Promise<{ rows: ReportRow[]; total: number }>;
  /** Newest first. */
  listAudit(query: { room?: string; limit: number }): Promise<AuditRow[]>;
  /** The room's latest audit row of these actions (ties in time: the later event seq first, as the log orders them). */
  lastAudit(room: string, actions: readonly string[]): Promise<AuditRow | undefined>;
  /** Newest first. */
  listAdminAlerts(limit: number): Promise<AdminAlertRow[]>;
  /** Whether an alert of `kind` about `subject` in `room` was raised at or after `since`. */
  hasAdminAlertSince(room: string, kind: string, subject: string, since: string): Promise<boolean>;
  adminListRooms(query: AdminRoomQuery): Promise<{ rows: AdminRoomRow[]; total: number }>;
  adminSummary(now: string): Promise<AdminSummary>;
  /** Live rooms whose last arbiter extraction failed. */
  roomsWithExtractionError(limit: number): Promise<{ uuid: string; error: string; lastActivityAt: string }[]>;
  /** Webhooks of live rooms that are disabled or whose latest deliveries died. */
  troubledWebhooks(limit: number): Promise<TroubledWebhookRow[]>;
  /** The loop guard's read: who wrote a room's newest `limit` messages and when, oldest first. */
  recentSpeakers(room: string, limit: number): Promise<{ seq: number; agentId: string; ts: string }[]>;
}

export interface AdminWriter {
  insertReport(row: ReportRow): Promise<void>;
  /** Resolves an open report; false when it was not open. */
  resolveReport(id: string, at: string, resolution: string | null): Promise<boolean>;
  /** Resolves every open report of a room (it was deleted); how many. */
  resolveRoomReports(room: string, at: string, resolution: string): Promise<number>;
  insertAudit(row: AuditRow): Promise<void>;
  insertAdminAlert(row: AdminAlertRow): Promise<void>;
  /** The public list's flag; the room.hidden / room.unhidden event is appended beside it. */
  setRoomHidden(room: string, hidden: boolean): Promise<void>;
}
