/**
 * Abuse reports (SPEC 12): anyone who can read a room may report it, or one of its messages, to the
 * operator. A report is a row of the operator's, not a log event (the reason is the reporter's,
 * not the room's); the room's owner hears of it through its alerts webhooks (raiseAlert), and
 * PARLEY_ADMIN_WEBHOOK_URL, when set, gets it too.
 */
import crypto from "node:crypto";
import { z } from "zod";
import { ParleyError } from "../errors";
import { str } from "../schemas/common";
import { parseRoomId, requireRoom } from "../services/access";
import type { Caller, Services } from "../services/context";
import { write } from "../services/events";
import { roomUrl } from "../services/rooms";
import type { ReportRow, RoomRow } from "../store/types";
import { raiseAlert } from "../webhooks/outbox";
import { signature, webhookSecret } from "../webhooks/secret";
import { postOnce } from "../webhooks/ssrf";
import { reportView } from "./views";

export const REASON_MAX = 500;

export const reportBody = z.object({
  reason: str()
    .trim()
    .min(1, "must say what is wrong (1 to 500 characters)")
    .max(REASON_MAX, `must be at most ${REASON_MAX} characters`),
  message_id: z.number({ error: "must be the id of a message of this room" }).int("must be a whole number").positive("must be a message id (1 or more)").optional(),
});
export type ReportInput = z.infer<typeof reportBody>;

export const reportAccepted = z.object({ id: z.string() });

/** A keyed hash of the reporter's address: one client filing many reports shows, the address does not. */
const reporterOf = (svc: Services, ip: string) => crypto.createHmac("sha256", svc.leaseSecret).update(`abuse reporter:${ip}`).digest("hex").slice(0, 16);

/** The admin webhook's secret (X-Parley-Signature), shown on the console's front page. */
export const adminWebhookSecret = (svc: Services) => webhookSecret(svc, "admin-reports");

/** POST /api/rooms/{id}/report: 202 {id}; within the reporter's budget (PARLEY_RATE_REPORTS_PER_HOUR). */
export async function reportRoom(svc: Services, caller: Caller, rawRoomId: string, input: ReportInput): Promise<{ id: string }> {
  const id = parseRoomId(rawRoomId);
  await svc.limiter.take(`reports:${caller.ip}`, svc.config.rate.reportsPerHour, 3_600_000, "abuse reports from your address");
  const { report, room } = await write(svc, [id], async (tx) => {
    const room = await requireRoom(svc, id, tx); // a closed room can be reported; an expired one is gone (410)
    if (input.message_id !== undefined && !(await tx.hasMessage(room.uuid, input.message_id))) {
      throw new ParleyError("validation_error", `message_id: no message with id ${input.message_id} in this room.`);
    }
    const report: ReportRow = {
      id: crypto.randomUUID(), room: room.uuid, messageId: input.message_id ?? null, reason: input.reason, reporter: reporterOf(svc, caller.ip),
      createdAt: tx.now, status: "open", resolvedAt: null, resolution: null,
    };
    await tx.insertReport(report);
    const what = report.messageId === null ? "this room" : `message ${report.messageId} of this room`;
    await raiseAlert(svc, tx, room, "abuse_report", {
      summary: `Someone reported ${what} to the operator of this server: ${report.reason.slice(0, 300)}`,
      report_id: report.id,
      message_id: report.messageId,
    });
    return { report, room };
  });
  if (svc.config.adminWebhookUrl) void tellAdminWebhook(svc, caller, svc.config.adminWebhookUrl, report, room);
  return { id: report.id };
}

/**
 * One attempt, after the report is committed, signed like a room's webhooks with the admin
 * webhook's secret. The operator's own URL: no address guard (it may well be on the private
 * network). Not an outbox delivery (those belong to a room's webhook); a failure is logged, and the
 * report waits in the console all the same.
 */
async function tellAdminWebhook(svc: Services, caller: Caller, url: string, report: ReportRow, room: RoomRow): Promise<void> {
  const body = JSON.stringify({ event: "report.created", report: reportView(report), room: { uuid: room.uuid, url: roomUrl(caller, room.uuid), description: room.description } });
  const result = await postOnce(url, body, {
    "Content-Type": "application/json",
    "User-Agent": "Parley-Webhooks/1",
    "X-Parley-Signature": signature(adminWebhookSecret(svc), body),
    "X-Parley-Timestamp": String(Math.floor(svc.clock.now() / 1000)),
    "X-Parley-Delivery": report.id,
    "X-Parley-Event": "report.created",
  }, { allowPrivate: true });
  if (!result.ok) console.warn(`PARLEY_ADMIN_WEBHOOK_URL: report ${report.id} was not delivered: ${result.error ?? "failed"}`);
}
