/**
 * What the arbiter may write, and how: the service side of SPEC 5.3. The LLM client and the
 * batching worker (lib/arbiter) call these; every rule of the ledger applies, on behalf of the
 * author of the message an item came from, and every item is keyed by that message so a repeated
 * or full rescan never duplicates anything.
 */
import { decideRevision, subjectKey, type Author } from "../domain/ledger";
import type { Message } from "../domain/message";
import type { ArbiterOutput } from "../schemas/arbiter";
import type { RoomRow } from "../store/types";
import type { Services } from "./context";
import { appendEvent, write } from "./events";
import { recordDiscrepancy } from "./ledger";
import { parseRoomId, requireRoom } from "./access";

export interface ExtractionBatch {
  /** The messages the model was asked about (the new ones, not the context before them). */
  messages: Message[];
  output: ArbiterOutput;
  calls: number;
  tokens: number;
}

export interface ExtractionResult {
  applied: number;
  skipped: { item: string; reason: string }[];
  watermark: number;
}

const authorOf = (m: Message): Author => ({ agent_id: m.agent_id, auth: m.auth, pubkey_hex: m.pubkey_hex });
const arbiterServerFacts = (m: Message) => ({ author_agent_id: m.agent_id, via: "arbiter", auth: m.auth });

/** Applies one batch's output and moves the watermark past its messages, in one transaction. */
export function applyExtraction(svc: Services, rawRoomId: string, batch: ExtractionBatch): Promise<ExtractionResult> {
  const id = parseRoomId(rawRoomId);
  return write(svc, [id], async (tx) => {
    let room = await requireRoom(svc, id, tx);
    const byId = new Map(batch.messages.map((m) => [m.id, m]));
    const skipped: ExtractionResult["skipped"] = [];
    let applied = 0;
    const skip = (item: string, reason: string) => skipped.push({ item, reason });
    const advance = (appended: { room: RoomRow }) => {
      room = appended.room;
      applied++;
    };

    for (const t of batch.output.threads) {
      const msg = byId.get(t.source_msg_id);
      if (!msg) { skip(`thread "${t.subject}"`, "names a message outside this batch"); continue; }
      const key = subjectKey(t.subject, t.subject_key);
      const existing = (await tx.listThreads(room.uuid)).find((x) => x.subject_key === key && x.status !== "cancelled");
      // Also what makes a rescan idempotent: the thread it would open already exists.
      if (existing) { skip(`thread "${t.subject}"`, `thread ${existing.id} already covers this subject`); continue; }
      const payload = { subject: t.subject, value: t.value, ...(t.subject_key ? { subject_key: t.subject_key } : {}), source_msg_id: msg.id, quote: t.quote };
      advance(await appendEvent(svc, tx, room, { type: "thread.opened", actor: "arbiter", payload, server: arbiterServerFacts(msg) }, { openerKey: msg.auth === "signed" ? msg.pubkey_hex : null }));
    }

    for (const r of batch.output.revisions) {
      const msg = byId.get(r.source_msg_id);
      if (!msg) { skip(`${r.kind} of thread ${r.thread_id}`, "names a message outside this batch"); continue; }
      const found = await tx.getThread(room.uuid, r.thread_id);
      if (!found) { skip(`${r.kind} of thread ${r.thread_id}`, "no such thread"); continue; }
      if ((await tx.listRevisions(room.uuid, r.thread_id)).some((x) => x.source_msg_id === msg.id && x.kind === r.kind && x.author_agent_id === msg.agent_id)) {
        skip(`${r.kind} of thread ${r.thread_id}`, "already extracted");
        continue;
      }
      if (r.kind === "update" && !r.value) { skip(`update of thread ${r.thread_id}`, "no value"); continue; }
      // The arbiter may do for an author only what the author may do by API.
      const decision = decideRevision(found.thread, found.openerKey, r.kind, authorOf(msg));
      if (!decision.ok) { skip(`${r.kind} of thread ${r.thread_id}`, decision.code); continue; }
      if (decision.effect === "none") { skip(`${r.kind} of thread ${r.thread_id}`, "changes nothing"); continue; }
      const payload = { thread_id: found.thread.id, kind: r.kind, ...(r.value ? { value: r.value } : {}), source_msg_id: msg.id, quote: r.quote };
      const appended = await appendEvent(svc, tx, room, { type: "thread.revised", actor: "arbiter", payload, server: arbiterServerFacts(msg) }, { ledger: { threads: [found.thread] }, openerKey: found.openerKey });
      advance(appended);
      if (found.thread.status === "agreed" && appended.projected.ledger!.threads[0]!.status === "disputed") {
        room = (await recordDiscrepancy(svc, tx, room, { description: `${msg.agent_id} contradicts the agreed "${found.thread.subject}" (${found.thread.current_value}).`, severity: "medium", thread_id: found.thread.id, source_msg_id: msg.id }, "arbiter")).room;
      }
    }

    for (const d of batch.output.discrepancies) {
      const msg = byId.get(d.source_msg_id);
      if (!msg) { skip("discrepancy", "names a message outside this batch"); continue; }
      if ((await tx.listDiscrepancies(room.uuid)).some((x) => x.source_msg_id === msg.id && x.thread_id === (d.thread_id ?? null))) { skip("discrepancy", "already extracted"); continue; }
      if (d.thread_id !== undefined && !await tx.getThread(room.uuid, d.thread_id)) { skip("discrepancy", "no such thread"); continue; }
      advance(await recordDiscrepancy(svc, tx, room, { description: d.description, severity: d.severity, thread_id: d.thread_id, source_msg_id: msg.id }, "arbiter"));
    }

    const watermark = Math.max(room.arbiterWatermark, ...batch.messages.map((m) => m.id));
    room = (await appendEvent(svc, tx, room, {
      type: "arbiter.extracted",
      actor: "arbiter",
      payload: { from_msg_id: batch.messages[0]?.id ?? watermark, to_msg_id: watermark, applied, skipped: skipped.length },
    })).room;
    // The watermark and the items applied are the projector's (from arbiter.extracted); the usage is not in the log.
    await tx.updateArbiterState(room.uuid, { arbiterCalls: room.arbiterCalls + batch.calls, arbiterTokens: room.arbiterTokens + batch.tokens, lastExtractionError: null });
    return { applied, skipped, watermark };
  });
}

/** A message that keeps failing is recorded (arbiter.failed) and skipped, so it never blocks the room. */
export async function skipPoisonMessage(svc: Services, rawRoomId: string, msgId: number, reason: string, usage: { calls: number; tokens: number }): Promise<void> {
  const id = parseRoomId(rawRoomId);
  await write(svc, [id], async (tx) => {
    const room = await requireRoom(svc, id, tx);
    await appendEvent(svc, tx, room, { type: "arbiter.failed", actor: "arbiter", payload: { msg_id: msgId, reason } });
    await tx.updateArbiterState(room.uuid, { arbiterCalls: room.arbiterCalls + usage.calls, arbiterTokens: room.arbiterTokens + usage.tokens, lastExtractionError: reason });
  });
}

/** A provider failure: the watermark stays, the room shows a sanitised sentence. */
export async function recordExtractionError(svc: Services, rawRoomId: string, sentence: string, usage: { calls: number; tokens: number }): Promise<void> {
  const id = parseRoomId(rawRoomId);
  await write(svc, [id], async (tx) => {
    const room = await requireRoom(svc, id, tx);
    await tx.updateArbiterState(room.uuid, { lastExtractionError: sentence, arbiterCalls: room.arbiterCalls + usage.calls, arbiterTokens: room.arbiterTokens + usage.tokens });
  });
}
