/**
 * What the operator reads: rooms (private ones too), abuse reports, the monitors' alerts gathered
 * from what the store can tell, the audit and a summary. Reads only.
 */
import { requireRoom } from "../services/access";
import { isoNow, type Caller, type Services } from "../services/context";
import { roomInfo, roomUrl } from "../services/rooms";
import { loopGuardOf } from "../services/loop-guard";
import type { AdminRoomQuery, ReportStatus } from "../store/types";
import { auditView } from "./audit";
import { adminRoomView, loopAlertView, reportView, type AlertView } from "./views";

export async function listAdminRooms(svc: Services, caller: Caller, query: Omit<AdminRoomQuery, "now">) {
  const { rows, total } = await svc.store.adminListRooms({ ...query, now: isoNow(svc) });
  return { rooms: rows.map((r) => adminRoomView(r, roomUrl(caller, r.uuid))), total };
}

/** A room as the operator sees it: its info and counters, its reports, and the admin actions on it. */
export async function adminRoom(svc: Services, caller: Caller, rawId: string) {
  const room = await requireRoom(svc, rawId);
  const [reports, actions, loopGuard] = await Promise.all([
    svc.store.listReports({ room: room.uuid, limit: 100, offset: 0 }),
    svc.store.listAudit({ room: room.uuid, limit: 100 }),
    loopGuardOf(svc, svc.store, room),
  ]);
  return {
    room: { ...roomInfo(svc, caller, room), hidden: room.hidden, loop_guard: loopGuard },
    reports: reports.rows.map(reportView),
    audit: actions.map(auditView),
  };
}

export async function listReports(svc: Services, query: { status?: ReportStatus; limit: number; offset: number }) {
  const { rows, total } = await svc.store.listReports(query);
  return { reports: rows.map(reportView), total };
}

export async function listAudit(svc: Services, limit: number) {
  return { audit: (await svc.store.listAudit({ limit })).map(auditView) };
}

/** Each kind of finding is read up to this many. */
const PER_KIND = 50;

/** What the monitors cannot tell the console from the store, said on its alerts page and in the API. */
export const NOT_GATHERED = [
  "Turns the turn timer has already skipped, and task leases the sweeper has already released: they are past, in each room's log (turn.skipped, task.released), not current.",
  "Messages the arbiter skipped (arbiter.failed): only in each room's log, which is not indexed by event type across rooms; a failing provider shows as an arbiter error.",
  "Owner alerts already sent (near the message cap or expiry, discrepancies, tasks awaiting review, blocked turns rooms): they go to the owners' alerts webhooks and are not kept.",
  "Webhooks of deleted or expired rooms: they went with their room.",
];

/**
 * The monitors' findings, newest first where they have a time: the loop guard's alerts (kept), and
 * what the store shows now: turns past their claim deadline or lease (the turn timer skips them
 * within a second), task leases that ran out (the sweeper releases them), rooms whose last arbiter
 * extraction failed, webhooks that are disabled or whose deliveries die.
 */
export async function gatherAlerts(svc: Services) {
  const now = isoNow(svc);
  const [loops, dueTurns, leases, arbiter, webhooks] = await Promise.all([
    svc.store.listAdminAlerts(PER_KIND),
    svc.store.dueTurns(now, PER_KIND),
    svc.store.expiredLeases(now, PER_KIND),
    svc.store.roomsWithExtractionError(PER_KIND),
    svc.store.troubledWebhooks(PER_KIND),
  ]);
  const alerts: AlertView[] = loops.map(loopAlertView);
  for (const { room, id } of dueTurns) {
    const turn = await svc.store.getTurn(room, id);
    if (!turn) continue;
    if (turn.status === "ready") {
      alerts.push({ kind: "stalled_turn", room, at: turn.claim_by, summary: `Turn ${id} of "${turn.agent_id}" was not claimed by ${turn.claim_by}.`, detail: { turn_id: id, agent_id: turn.agent_id } });
    } else if (turn.status === "claimed") {
      alerts.push({ kind: "expired_turn_lease", room, at: turn.lease_until, summary: `The lease of "${turn.agent_id}" on turn ${id} ran out at ${turn.lease_until} without a reply.`, detail: { turn_id: id, agent_id: turn.agent_id } });
    }
  }
  for (const { room, id } of leases) {
    const task = await svc.store.getTask(room, id);
    if (!task) continue;
    alerts.push({ kind: "expired_task_lease", room, at: task.lease_until, summary: `The lease of "${task.claimant ?? "?"}" on task ${id} ("${task.title.slice(0, 80)}") ran out at ${task.lease_until}.`, detail: { task_id: id, claimant: task.claimant } });
  }
  for (const r of arbiter) {
    alerts.push({ kind: "arbiter_error", room: r.uuid, at: r.lastActivityAt, summary: `The arbiter's last extraction failed: ${r.error}`, detail: {} });
  }
  for (const w of webhooks) {
    const host = new URL(w.url).host;
    alerts.push(
      w.disabledAt
        ? { kind: "webhook_disabled", room: w.room, at: w.disabledAt, summary: `A ${w.kind} webhook to ${host} is disabled: ${w.disabledReason ?? "its deliveries died"}`, detail: { webhook_id: w.id, host } }
        : { kind: "webhook_dead", room: w.room, at: null, summary: `A ${w.kind} webhook to ${host} has ${w.consecutiveDead} dead deliveries in a row.`, detail: { webhook_id: w.id, host, consecutive_dead: w.consecutiveDead } },
    );
  }
  alerts.sort((a, b) => (b.at ?? "").localeCompare(a.at ?? ""));
  return { alerts, not_gathered: NOT_GATHERED };
}

/** The console's front page: counts from the store and a few of the process's figures. */
export async function adminSummary(svc: Services) {
  const [summary, counts] = await Promise.all([svc.store.adminSummary(isoNow(svc)), svc.store.counts()]);
  const mem = process.memoryUsage();
  return {
    rooms: { total: summary.rooms, open: summary.open, closed: summary.closed, public: summary.public, hidden: summary.hidden, created_last_24h: summary.createdLastDay, active_last_hour: summary.activeLastHour },
    messages: summary.messages,
    events: counts.events,
    open_reports: summary.openReports,
    loop_guard_alerts_last_24h: summary.loopAlertsLastDay,
    live_listeners: svc.notifier.streamCount,
    process: { uptime_s: Math.round(process.uptime()), rss_bytes: mem.rss, heap_used_bytes: mem.heapUsed },
    backend: svc.store.dialect,
  };
}
