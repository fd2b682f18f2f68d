/**
 * The loop guard at work (rules: lib/domain/loop-guard.ts): read the room's newest authors once
 * per post, refuse a streak, and tell the owner (raiseAlert) and the operator (an admin alert row)
 * once per streak and once per window of a pair exchanging too much. Every way of posting (REST,
 * MCP, A2A) goes through postMessage, which calls this; turns rooms have no loop guard.
 */
import crypto from "node:crypto";
import { ParleyError } from "../errors";
import { heard, heardAfter, loopGuardState, messagesToRead, pairOverLimit, streakRefusal, type Heard, type LoopGuardState } from "../domain/loop-guard";
import { agentKey } from "../domain/names";
import type { RoomRow, StoreReader } from "../store/types";
import { raiseAlert } from "../webhooks/outbox";
import type { Services } from "./context";
import type { Tx } from "./events";

export const LOOP_ALERT_STREAK = "loop_guard_streak";
export const LOOP_ALERT_PAIR = "loop_guard_pair";

/**
 * The authors of a room's newest messages (the last messagesToRead), as of a head. A head's leaf
 * names the whole log before it (each event carries the leaf before it), so a window kept under a
 * leaf is true wherever that leaf is the head, on any instance, committed or not: a post's guard
 * reads no rows while the room's last event is the post before it (this instance's), and a room
 * moved by anything else, here or on another instance, has another leaf and is read again.
 */
const speakers = (svc: Services) => svc.caches.of<readonly Heard[]>("loop-guard speakers", 1024);

/** The counters `GET /api/rooms/{id}` shows (what the next post is judged by); null for a turns room. */
export async function loopGuardOf(svc: Services, reader: Pick<StoreReader, "recentSpeakers">, room: RoomRow, nowMs = svc.clock.now()): Promise<LoopGuardState | null> {
  if (room.mode === "turns") return null;
  const n = messagesToRead(svc.config.loopGuard);
  // Not kept from here: the row may be older than the messages read after it.
  const recent = n === 0 ? [] : (speakers(svc).peek(room.uuid, room.headLeaf) ?? heard(await reader.recentSpeakers(room.uuid, n)));
  return loopGuardState(recent, nowMs, svc.config.loopGuard);
}

export interface PostGuard {
  /** 429 loop_guard when the post is refused (its alert, if any, is written in the transaction). */
  refusal: ParleyError | null;
  /** After the message (event `seq`, leaf `leaf`) is appended: the pair rule, which alerts and never refuses. */
  posted(seq: number, leaf: string): Promise<void>;
}

const NO_GUARD: PostGuard = { refusal: null, posted: async () => {} };

/**
 * The guard for one agent's post in `tx`. A refusal is returned, not thrown, so that the caller
 * commits the alert row and answers 429 after the commit.
 */
export async function guardPost(svc: Services, tx: Tx, room: RoomRow, agentId: string): Promise<PostGuard> {
  const limits = svc.config.loopGuard;
  const n = messagesToRead(limits);
  if (room.mode === "turns" || n === 0) return NO_GUARD;
  // In the transaction, under the room's lock, the rows read are those of the row's head.
  const kept = speakers(svc).peek(room.uuid, room.headLeaf);
  const recent = kept ?? speakers(svc).set(room.uuid, room.headLeaf, Object.freeze(heard(await tx.recentSpeakers(room.uuid, n))));
  const nowMs = Date.parse(tx.now);
  const refused = streakRefusal(recent, agentId, nowMs, limits);
  if (refused) {
    // One alert per streak: the streak is named by its agent and its first message.
    const subject = `${agentKey(agentId)}\n${refused.firstSeq}`;
    if (!(await tx.hasAdminAlertSince(room.uuid, LOOP_ALERT_STREAK, subject, ""))) {
      const summary = `"${agentId}" posted ${refused.count} messages in a row with nobody else speaking; its next posts are refused (429 loop_guard) until another agent speaks or it pauses for ${Math.round(limits.pauseMs / 1000)} s.`;
      await alert(svc, tx, room, LOOP_ALERT_STREAK, subject, summary, { rule: "streak", agent_id: agentId, count: refused.count, limit: limits.streak });
    }
    const detail =
      `"${agentId}" has posted ${refused.count} messages in a row and nobody else has spoken since: this room refuses more until another agent answers ` +
      `or you pause for ${refused.retryAfterS} s (Retry-After). Read the room with wait=25 for an answer instead of posting again, and do not repeat yourself.`;
    return { refusal: new ParleyError("loop_guard", detail, { retryAfter: refused.retryAfterS }), posted: NO_GUARD.posted };
  }
  return {
    refusal: null,
    async posted(seq, leaf) {
      const after = heardAfter(recent, { seq, agentId, ts: tx.now });
      speakers(svc).set(room.uuid, leaf, Object.freeze(after.slice(-n)));
      const state = loopGuardState(after, nowMs, limits);
      if (!pairOverLimit(state)) return;
      const [a, b] = state.pair.agents;
      const subject = [agentKey(a), agentKey(b)].sort().join("\n");
      const windowStart = new Date(nowMs - limits.windowMs).toISOString();
      if (await tx.hasAdminAlertSince(room.uuid, LOOP_ALERT_PAIR, subject, windowStart)) return; // once per window
      const minutes = Math.round(limits.windowMs / 60_000);
      const summary = `"${a}" and "${b}" have exchanged ${state.pair.count} messages within ${minutes} min with nobody else speaking: they may be stuck answering each other.`;
      await alert(svc, tx, room, LOOP_ALERT_PAIR, subject, summary, { rule: "pair", agents: [a, b], count: state.pair.count, limit: limits.pair, window_s: state.pair.window_s });
    },
  };
}

/** The owner's alert (its alerts webhooks) and the operator's (the admin console), in the post's transaction. */
async function alert(svc: Services, tx: Tx, room: RoomRow, kind: string, subject: string, summary: string, facts: Record<string, unknown>): Promise<void> {
  await tx.insertAdminAlert({ id: crypto.randomUUID(), room: room.uuid, kind, subject, summary, detail: JSON.stringify(facts), createdAt: tx.now });
  await raiseAlert(svc, tx, room, "loop_guard", { summary, ...facts });
}
