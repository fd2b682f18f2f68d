// The webhook use cases: register, read, list, delete. Registrations are rows of their own, never
// log events: a webhook's URL and secret are not in the room's log, exports or public views.
import crypto from "node:crypto";
import { sameAgent } from "../domain/names";
import { ParleyError } from "../errors";
import { hashToken, parseRoomId, requireOwner, requireRoom, tokenMatches } from "../services/access";
import type { Caller, Services } from "../services/context";
import { write } from "../services/events";
import { roomUrl } from "../services/rooms";
import type { DeliveryRow, RoomRow, StoreReader, WebhookRow } from "../store/types";
import { toWebhook } from "./outbox";
import type { RegisterWebhookInput } from "./schemas";
import { webhookSecret } from "./secret";
import { parseWebhookUrl, resolveTarget, WebhookTargetError } from "./ssrf";

export const MAX_WEBHOOKS_PER_ROOM = 10;
/** Deliveries a webhook's GET shows, newest first. */
export const RECENT_DELIVERIES = 20;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const webhookNotFound = () =>
  new ParleyError("webhook_not_found", "This room has no webhook with this id. List the room's webhooks with the owner token (GET /api/rooms/{id}/webhooks).");

/** The address check of registration (and of every attempt, in the worker): 400 webhook_url_forbidden. */
export async function checkWebhookUrl(svc: Services, raw: string): Promise<string> {
  try {
    const url = parseWebhookUrl(raw);
    await resolveTarget(url, { allowPrivate: svc.config.webhooks.allowPrivate });
    return url.href;
  } catch (err) {
    if (err instanceof WebhookTargetError) throw new ParleyError("webhook_url_forbidden", err.message);
    throw err;
  }
}

/** Both unset, or the same agent by its key. */
const sameMentioning = (a: string | null, b: string | null) => a === b || sameAgent(a, b);

const sameList = (a: readonly string[] | null, b: readonly string[] | null) =>
  a === b || (a !== null && b !== null && a.length === b.length && [...a].sort().join("\n") === [...b].sort().join("\n"));

/**
 * Anyone who can read a room may register an events webhook; an alerts webhook takes the owner
 * token. The secret is in this answer only (lib/webhooks/secret.ts: derived, never stored).
 */
export async function registerWebhook(svc: Services, caller: Caller, rawRoomId: string, input: RegisterWebhookInput, bearer: string | undefined) {
  const id = parseRoomId(rawRoomId);
  await svc.limiter.take(`webhooks:${caller.ip}`, svc.config.rate.webhooksPerHour, 3_600_000, "webhook registrations from your address");
  const before = await requireRoom(svc, id);
  if (input.kind === "alerts") requireOwner(svc, before, bearer);
  // The lookup happens outside the transaction: no network wait while the room is locked.
  const url = await checkWebhookUrl(svc, input.url);
  const webhookId = crypto.randomUUID();
  const secret = webhookSecret(svc, webhookId);
  const events = input.events ?? null;
  const mentioning = input.mentioning ?? null;
  const row = await write(svc, [id], async (tx) => {
    const room = await requireRoom(svc, id, tx);
    if (input.kind === "alerts") requireOwner(svc, room, bearer);
    const existing = (await tx.listWebhooks(room.uuid)).map(toWebhook);
    if (existing.length >= MAX_WEBHOOKS_PER_ROOM) {
      throw new ParleyError("too_many_webhooks", `This room already has ${MAX_WEBHOOKS_PER_ROOM} webhooks, the most it may have. Delete one (DELETE /api/rooms/${room.uuid}/webhooks/{wid} with its secret or the owner token) first.`);
    }
    const twin = existing.find((w) => w.url === url && w.kind === input.kind && w.format === input.format && sameMentioning(w.mentioning, mentioning) && sameList(w.events, events));
    if (twin) {
      throw new ParleyError("webhook_exists", "This room already has a webhook with this URL and these settings; it receives the same deliveries. Keep the secret you got for it, or delete it and register again.");
    }
    const webhook: WebhookRow = {
      id: webhookId, room: room.uuid, kind: input.kind, url, events: events && JSON.stringify(events), format: input.format, mentioning,
      roomUrl: roomUrl(caller, room.uuid), secretHash: hashToken(secret), createdAt: tx.now, consecutiveDead: 0, disabledAt: null,
      disabledReason: null, expiryAlertedFor: null,
    };
    await tx.insertWebhook(webhook);
    return webhook;
  });
  return { ...fields(row), secret };
}

function fields(r: WebhookRow) {
  const w = toWebhook(r);
  return { id: w.id, room: w.room, kind: w.kind, url: w.url, events: w.events, format: w.format, mentioning: w.mentioning, created_at: r.createdAt };
}

function deliveryView(d: DeliveryRow) {
  const open = d.status === "pending" || d.status === "retrying";
  return {
    id: d.id, event: d.eventType, seq: d.seq, status: d.status, attempts: d.attempts, last_status: d.lastStatus, last_error: d.lastError,
    next_attempt_at: open ? d.nextAttemptAt : null, created_at: d.createdAt, delivered_at: d.deliveredAt,
  };
}

async function summary(reader: StoreReader, r: WebhookRow) {
  return {
    ...fields(r),
    status: r.disabledAt === null ? ("active" as const) : ("disabled" as const),
    disabled_at: r.disabledAt,
    disabled_reason: r.disabledReason,
    consecutive_dead: r.consecutiveDead,
    counts: await reader.deliveryCounts(r.id),
  };
}

/** The webhook's secret, or the room's owner (or admin) token; 403 forbidden otherwise. */
function requireWebhookAccess(svc: Services, room: RoomRow, webhook: WebhookRow, bearer: string | undefined): void {
  if (!bearer) throw new ParleyError("forbidden", "Reading or deleting a webhook needs its secret or the room's owner token: send Authorization: Bearer <secret>.");
  if (tokenMatches(webhook.secretHash, bearer)) return;
  try {
    requireOwner(svc, room, bearer);
  } catch {
    throw new ParleyError("forbidden", "The token is neither this webhook's secret nor the room's owner token.");
  }
}

async function requireWebhook(svc: Services, reader: StoreReader, rawRoomId: string, rawWebhookId: string) {
  const room = await requireRoom(svc, rawRoomId, reader);
  const webhook = UUID.test(rawWebhookId) ? await reader.getWebhook(room.uuid, rawWebhookId.toLowerCase()) : undefined;
  if (!webhook) throw webhookNotFound();
  return { room, webhook };
}

export async function getWebhook(svc: Services, rawRoomId: string, rawWebhookId: string, bearer: string | undefined) {
  const { room, webhook } = await requireWebhook(svc, svc.store, rawRoomId, rawWebhookId);
  requireWebhookAccess(svc, room, webhook, bearer);
  const deliveries = await svc.store.listDeliveries(webhook.id, RECENT_DELIVERIES);
  return { ...(await summary(svc.store, webhook)), deliveries: deliveries.map(deliveryView) };
}

/** The room's webhooks, for its owner (their deliveries: GET each one). */
export async function listWebhooks(svc: Services, rawRoomId: string, bearer: string | undefined) {
  const room = await requireRoom(svc, rawRoomId);
  requireOwner(svc, room, bearer);
  const rows = await svc.store.listWebhooks(room.uuid);
  return { webhooks: await Promise.all(rows.map((r) => summary(svc.store, r))) };
}

/** Under the room's lock, so no append is writing a delivery for it at the same moment. */
export async function deleteWebhook(svc: Services, rawRoomId: string, rawWebhookId: string, bearer: string | undefined) {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    const { room, webhook } = await requireWebhook(svc, tx, id, rawWebhookId);
    requireWebhookAccess(svc, room, webhook, bearer);
    await tx.deleteWebhook(room.uuid, webhook.id);
    return { deleted: webhook.id };
  });
}
