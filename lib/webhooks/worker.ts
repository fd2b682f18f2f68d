// The delivery worker: claims due deliveries (a lease per row: on PostgreSQL FOR UPDATE SKIP LOCKED,
// so instances never share one), sends each once through the SSRF guard, and records what
// happened: delivered, or retrying with exponential backoff and jitter, then dead. A webhook whose
// deliveries die several times in a row is disabled, and the owner's alerts webhooks hear of it.
// A server that stops (or is killed) mid-way leaves the rows pending; the next run resumes them.
import crypto from "node:crypto";
import { tokenMatches } from "../services/access";
import type { Services } from "../services/context";
import { write } from "../services/events";
import { eventData } from "../realtime/feed";
import type { DeliveryOutcome, DeliveryRow, WebhookRow } from "../store/types";
import { alertBody, eventBody, type Alert, type BodyContext } from "./format";
import { alertTo, raiseAlert, toWebhook } from "./outbox";
import { signature, webhookSecret } from "./secret";
import { postOnce, type AttemptResult } from "./ssrf";

/** Deliveries claimed (and sent at once) per round. */
const BATCH = 16;
/** Rounds per run at most: a backlog is worked off over several runs, never in one endless one. */
const ROUNDS = 8;
/** A claim outlives the longest attempt (5 s) by far; a crashed holder's rows come back after it. */
const LEASE_MS = 60_000;
/** Delivered deliveries are kept this long, dead ones longer (the owner may come to look). */
const KEEP_DELIVERED_MS = 24 * 3_600_000;
const KEEP_DEAD_MS = 7 * 24 * 3_600_000;

const iso = (ms: number) => new Date(ms).toISOString();

/** The delay before attempt `attempts + 1`: base · 2^(attempts − 1), times a jitter in [0.5, 1.5). */
export function retryDelayMs(baseMs: number, attempts: number, random = Math.random()): number {
  return Math.round(baseMs * 2 ** (attempts - 1) * (0.5 + random));
}

/** Sends what is due; the number of deliveries attempted. */
export async function deliverDue(svc: Services): Promise<number> {
  let attempted = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const claim = crypto.randomUUID();
    const claimed = await write(svc, [], (tx) => tx.claimDeliveries(tx.now, iso(Date.parse(tx.now) + LEASE_MS), claim, BATCH));
    await Promise.all(claimed.map((d) => attempt(svc, d, claim)));
    attempted += claimed.length;
    if (claimed.length < BATCH) break;
  }
  return attempted;
}

async function attempt(svc: Services, d: DeliveryRow, claim: string): Promise<void> {
  const webhook = await svc.store.getWebhook(d.room, d.webhookId);
  if (!webhook) return; // deleted since: its deliveries went with it
  const end = (status: "dead", error: string) => finish(svc, webhook, d, claim, { status: null, ok: false, error }, status);
  if (webhook.disabledAt !== null) return end("dead", "Not sent: the webhook is disabled.");
  const secret = webhookSecret(svc, webhook.id);
  if (!tokenMatches(webhook.secretHash, secret)) {
    // The server key changed: this instance cannot sign with the secret the receiver holds.
    return end("dead", "Not sent: the server key changed since the webhook was registered, so its secret cannot be recomputed. Register it again.");
  }
  const body = await bodyOf(svc, webhook, d);
  if (body === undefined) return end("dead", "Not sent: the event is no longer in the room's log.");
  const headers = {
    "Content-Type": "application/json",
    "User-Agent": "Parley-Webhooks/1",
    "X-Parley-Signature": signature(secret, body),
    "X-Parley-Timestamp": String(Math.floor(svc.clock.now() / 1000)),
    "X-Parley-Delivery": d.id,
    "X-Parley-Event": d.eventType,
    "X-Parley-Webhook": webhook.id,
    "X-Parley-Attempt": String(d.attempts + 1),
  };
  const result = await postOnce(webhook.url, body, headers, { allowPrivate: svc.config.webhooks.allowPrivate });
  await finish(svc, webhook, d, claim, result);
}

/** The body: an alert from its row, an event from the log (the same bytes on every attempt). */
async function bodyOf(svc: Services, webhook: WebhookRow, d: DeliveryRow): Promise<string | undefined> {
  const room = await svc.store.getRoom(d.room);
  const w = toWebhook(webhook);
  const ctx: BodyContext = { format: w.format, room: d.room, roomUrl: w.roomUrl, description: room?.description ?? "" };
  if (d.payload !== null) return alertBody(ctx, JSON.parse(d.payload) as Alert);
  if (d.seq === null) return undefined;
  const [row] = await svc.store.listEvents(d.room, d.seq - 1, 1);
  if (!row || row.seq !== d.seq) return undefined;
  return eventBody(ctx, eventData(row));
}

async function finish(svc: Services, webhook: WebhookRow, d: DeliveryRow, claim: string, result: AttemptResult, forced?: "dead"): Promise<void> {
  const { maxAttempts, retryBaseMs, disableAfter } = svc.config.webhooks;
  const now = svc.clock.now();
  const attempts = forced ? d.attempts : d.attempts + 1;
  const status = result.ok ? "delivered" : forced ?? (attempts >= maxAttempts ? "dead" : "retrying");
  const outcome: DeliveryOutcome = {
    status, attempts, lastStatus: result.status, lastError: result.error, updatedAt: iso(now),
    nextAttemptAt: status === "retrying" ? iso(now + retryDelayMs(retryBaseMs, attempts)) : d.nextAttemptAt,
    deliveredAt: result.ok ? iso(now) : null,
  };
  if (status !== "dead") {
    await write(svc, [], async (tx) => {
      if ((await tx.finishDelivery(d.id, claim, outcome)) && result.ok) await tx.resetDeadRun(webhook.id);
    });
    return;
  }
  // A death may disable the webhook and alert the owner: under the room's lock, as appends write
  // deliveries, so no alerts webhook is deleted between reading it and writing to it.
  await write(svc, [d.room], async (tx) => {
    if (!(await tx.finishDelivery(d.id, claim, outcome)) || forced) return;
    const run = await tx.addDeadDelivery(webhook.id);
    if (run < disableAfter) return;
    const reason = `Disabled after ${run} dead deliveries in a row; the last: ${result.error ?? "failed"}`.slice(0, 500);
    if (!(await tx.disableWebhook(webhook.id, tx.now, reason))) return;
    await raiseAlert(svc, tx, { uuid: d.room }, "webhook_disabled", {
      summary: `A webhook of this room (${new URL(webhook.url).host}) was disabled after ${run} dead deliveries in a row.`,
      webhook_id: webhook.id,
    });
  });
}

/**
 * Near-expiry alerts: rooms that expire within PARLEY_WEBHOOK_EXPIRY_NOTICE and have alerts
 * webhooks not yet told about that expiry (an expiry that moves on with activity is told again).
 */
export async function sweepNearExpiry(svc: Services, batch = 100): Promise<number> {
  const now = svc.clock.now();
  const rooms = await svc.store.roomsNearExpiry(iso(now), iso(now + svc.config.webhooks.expiryNoticeMs), batch);
  let alerted = 0;
  for (const id of rooms) {
    alerted += await write(svc, [id], async (tx) => {
      const room = await tx.getRoom(id);
      if (!room || room.status === "expired" || room.expiresAt <= tx.now) return 0;
      const due = (await tx.listWebhooks(id)).filter((w) => w.kind === "alerts" && w.disabledAt === null && w.expiryAlertedFor !== room.expiresAt);
      const minutes = Math.max(1, Math.round((Date.parse(room.expiresAt) - Date.parse(tx.now)) / 60_000));
      const sent = await alertTo(tx, due.map(toWebhook), "near_expiry", {
        summary: `The room expires in about ${minutes} min (${room.expiresAt}); activity pushes the expiry back (within the room's maximum lifetime); when it expires its data is removed.`,
        expires_at: room.expiresAt,
      });
      await tx.markExpiryAlerted(id, room.expiresAt);
      return sent;
    });
  }
  return alerted;
}

/** Drops old delivered and dead deliveries (the room's deletion drops the rest). */
export async function pruneDeliveries(svc: Services): Promise<number> {
  const now = svc.clock.now();
  return write(svc, [], (tx) => tx.pruneDeliveries(iso(now - KEEP_DELIVERED_MS), iso(now - KEEP_DEAD_MS)));
}
