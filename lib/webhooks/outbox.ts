// The transactional outbox: every append writes its deliveries in its own transaction (an append
// hook), so an event that committed has its deliveries and one that rolled back has none; the
// worker (worker.ts) sends them later. Alerts for the owner go the same way (raiseAlert).
import crypto from "node:crypto";
import type { LogEvent } from "../log/event";
import type { AppendHook, Services } from "../services/context";
import type { RoomRow, StoreWriter, WebhookRow } from "../store/types";
import type { Alert } from "./format";
import { matchesEvents, mentions } from "./filter";

/** The writer of the transaction an append runs in (lib/services/events.ts Tx). */
export type WebhookTx = Pick<StoreWriter, "listWebhooks" | "insertDelivery"> & { readonly now: string };

export type AlertKind =
  | "turns_blocked"
  | "turns_completed"
  | "discrepancy_recorded"
  | "task_awaiting_review"
  | "near_message_cap"
  | "near_expiry"
  | "webhook_disabled"
  | "loop_guard"
  | "abuse_report";

/** A webhook as the outbox reads it. */
export interface Webhook {
  id: string;
  room: string;
  kind: "events" | "alerts";
  url: string;
  events: string[] | null;
  format: "json" | "slack";
  mentioning: string | null;
  roomUrl: string;
  disabled: boolean;
}

export function toWebhook(r: WebhookRow): Webhook {
  return {
    id: r.id, room: r.room, kind: r.kind as Webhook["kind"], url: r.url, events: r.events === null ? null : (JSON.parse(r.events) as string[]),
    format: r.format as Webhook["format"], mentioning: r.mentioning, roomUrl: r.roomUrl, disabled: r.disabledAt !== null,
  };
}

/** A room's webhooks, read once per transaction (group commit: many appends, one read per room). */
const READ = Symbol("webhooks of this transaction's rooms");
function roomWebhooks(tx: WebhookTx, room: string): Promise<Webhook[]> {
  const held = tx as WebhookTx & { [READ]?: Map<string, Promise<Webhook[]>> };
  const byRoom = (held[READ] ??= new Map());
  let hooks = byRoom.get(room);
  if (!hooks) byRoom.set(room, (hooks = tx.listWebhooks(room).then((rows) => rows.map(toWebhook))));
  return hooks;
}

export function wantsEvent(w: Webhook, event: Pick<LogEvent, "type" | "actor" | "payload">): boolean {
  return w.kind === "events" && !w.disabled && matchesEvents(w.events, event.type) && (w.mentioning === null || mentions(event, w.mentioning));
}

async function enqueue(tx: WebhookTx, w: Webhook, seq: number | null, eventType: string, payload: string | null): Promise<void> {
  await tx.insertDelivery({
    id: crypto.randomUUID(), webhookId: w.id, room: w.room, seq, eventType, payload, status: "pending", attempts: 0, nextAttemptAt: tx.now,
    leaseUntil: null, claim: null, lastStatus: null, lastError: null, createdAt: tx.now, updatedAt: tx.now, deliveredAt: null,
  });
}

/** The append hook: a delivery for each webhook that wants the event, and the owner's alerts it raises. */
export function webhookAppendHook(svc: Services): AppendHook {
  return async (tx, event, room) => {
    if (room.headSize === 0) return; // room.created: nobody could register for a room that did not exist
    const hooks = await roomWebhooks(tx, room.uuid);
    if (hooks.length === 0) return;
    for (const w of hooks) if (wantsEvent(w, event)) await enqueue(tx, w, event.seq, event.type, null);
    const alert = hooks.some((w) => w.kind === "alerts" && !w.disabled) ? alertOf(svc, event, room) : undefined;
    if (alert) await raiseAlert(svc, tx, room, alert.kind, { ...alert.detail, seq: event.seq });
  };
}

/** The share of the message cap at which the owner hears that the room is nearly full. */
export const NEAR_CAP = 0.9;

/** The alert an event raises for the owner, if any. `room` is the room before the event. */
function alertOf(svc: Services, event: LogEvent, room: RoomRow): { kind: AlertKind; detail: AlertDetail } | undefined {
  const p = event.payload as Record<string, unknown>;
  const text = (v: unknown, max = 300) => (typeof v === "string" ? v.slice(0, max) : "");
  switch (event.type) {
    case "room.blocked":
      return { kind: "turns_blocked", detail: { summary: `The turns room is blocked${p.reason ? `: ${text(p.reason).replace(/[\s.!?]+$/, "")}` : ""}. Resume it (POST …/turns/resume) or cancel it.`, reason: text(p.reason) } };
    case "room.completed":
      return { kind: "turns_completed", detail: { summary: "The turns room is complete.", by: text(p.by, 100) } };
    case "discrepancy.recorded":
      return { kind: "discrepancy_recorded", detail: { summary: `A discrepancy was recorded: ${text(p.description)}`, severity: text(p.severity, 20) } };
    case "task.submitted":
      return { kind: "task_awaiting_review", detail: { summary: `Task ${String(p.task_id)} was submitted by ${event.actor.slice(0, 100)} and awaits review.`, task_id: p.task_id } };
    case "message.posted": {
      const cap = svc.config.roomMessageCap;
      const count = room.messageCount + 1; // this message's place
      if (count !== Math.ceil(cap * NEAR_CAP)) return undefined; // once, when the room reaches it
      return { kind: "near_message_cap", detail: { summary: `The room holds ${count} of its ${cap} messages; it refuses posts past the cap.`, messages: count, cap } };
    }
    default:
      return undefined;
  }
}

/** What an alert says: a sentence for a person, and any facts a program may use. */
export type AlertDetail = { summary: string; seq?: number } & Record<string, unknown>;

/**
 * Raises an alert for the room's owner: a delivery to each of the room's enabled alerts webhooks,
 * written in `tx` (it is sent once that commits; nothing if it rolls back). For other features'
 * alerts too (the loop guard, abuse reports). Alerts are not log events.
 */
export async function raiseAlert(_svc: Services, tx: WebhookTx, room: Pick<RoomRow, "uuid">, kind: AlertKind, detail: AlertDetail): Promise<number> {
  const hooks = (await roomWebhooks(tx, room.uuid)).filter((w) => w.kind === "alerts" && !w.disabled);
  return alertTo(tx, hooks, kind, detail);
}

/** The alert's deliveries to `hooks` (raiseAlert, and the near-expiry sweep for the webhooks not yet told). */
export async function alertTo(tx: WebhookTx, hooks: readonly Webhook[], kind: AlertKind, detail: AlertDetail): Promise<number> {
  const { summary, seq, ...facts } = detail;
  const alert: Alert = { kind, summary, ts: tx.now, seq: seq ?? null, detail: facts };
  const payload = JSON.stringify(alert);
  for (const w of hooks) await enqueue(tx, w, seq ?? null, `alert.${kind}`, payload);
  return hooks.length;
}
