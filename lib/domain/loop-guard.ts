/**
 * The loop guard of open rooms (SPEC 12), as pure rules over a room's newest messages: no state of
 * its own, so what `GET /api/rooms/{id}` shows is exactly what the next post is judged by.
 *
 * - Streak: an agent that has posted `streak` messages in a row, with nobody else speaking in
 *   between and no pause of `pauseMs` or more between them, is refused the next one until someone
 *   else speaks or the pause has passed (its Retry-After).
 * - Pair: two agents alone in the room's newest messages, more than `pair` of them within `windowMs`,
 *   look like two bots answering each other for ever: the owner and the operator hear of it; nobody
 *   is refused.
 *
 * Turns rooms order their speakers themselves and have no loop guard; the service's own messages
 * (server, owner, admin) are not anybody's turn to speak and are skipped.
 */
import { agentKey } from "./names";
import { SERVICE_ACTORS } from "./room";

/** The guard's settings (PARLEY_LOOP_GUARD_*); 0 turns a rule off. */
export interface LoopGuardLimits {
  /** Messages in a row one agent may post with nobody else speaking. */
  streak: number;
  /** A pause this long ends a streak (the refused agent's Retry-After counts down to it). */
  pauseMs: number;
  /** Messages two agents alone may exchange within `windowMs` before the owner and the operator hear of it. */
  pair: number;
  windowMs: number;
}

/** A message as the guard reads it: who wrote it, and when. */
export interface Spoken {
  /** The message's id (its event's seq); absent for the one being posted. */
  seq?: number;
  agentId: string;
  ts: string;
}

export interface StreakState {
  /** The latest speaker, as it wrote its name the last time. */
  agent_id: string;
  /** Its messages in a row that count now (0 once it paused long enough). */
  count: number;
  limit: number;
}

export interface PairState {
  /** The two agents, the latest speaker first. */
  agents: [string, string];
  /** Their messages in a row within the window, with nobody else speaking. */
  count: number;
  limit: number;
  window_s: number;
}

/** What `GET /api/rooms/{id}` shows: null parts have nothing to count (or their rule is off). */
export interface LoopGuardState {
  streak: StreakState | null;
  pair: PairState | null;
}

/** How many of the newest messages the rules need to read to decide (0: both rules are off). */
export const messagesToRead = (limits: LoopGuardLimits): number =>
  limits.streak === 0 && limits.pair === 0 ? 0 : Math.max(limits.streak, limits.pair) + 1;

/**
 * A message as the rules read it, worked out once when it enters a room's window (the service
 * keeps the window from post to post, lib/services/loop-guard.ts): its author's key, null for the
 * service's own messages (which the rules skip), and its time in ms. Every post reads the whole
 * window (pair + 1 messages, 61 by default): parsing its times and keying its names on each read
 * was about a tenth of the main thread's work a post.
 */
export interface Heard {
  seq?: number;
  agentId: string;
  key: string | null;
  ms: number;
}

const hear = (m: Spoken): Heard => ({ seq: m.seq, agentId: m.agentId, key: SERVICE_ACTORS.has(m.agentId) ? null : agentKey(m.agentId), ms: Date.parse(m.ts) });

/** `recent` (oldest first, as the store returns them) as the rules read them. */
export const heard = (recent: readonly Spoken[]): Heard[] => recent.map(hear);

/** `recent` and then `m`. */
export const heardAfter = (recent: readonly Heard[], m: Spoken): Heard[] => [...recent, hear(m)];

/** The index of the newest agent's message at or before `i` in `recent`, or -1. */
function agentAt(recent: readonly Heard[], i: number): number {
  while (i >= 0 && recent[i]!.key === null) i--;
  return i;
}

/** The latest speaker's run: its messages back to someone else's or to a pause of `pauseMs`; `oldest` is the run's first. */
function run(recent: readonly Heard[], pauseMs: number, nowMs: number): { agent: Heard; count: number; oldest: Heard } | null {
  const i = agentAt(recent, recent.length - 1);
  if (i < 0) return null;
  const first = recent[i]!;
  if (nowMs - first.ms >= pauseMs) return { agent: first, count: 0, oldest: first }; // it has rested
  let count = 1;
  let oldest = first;
  for (let j = agentAt(recent, i - 1); j >= 0; j = agentAt(recent, j - 1)) {
    const m = recent[j]!;
    if (m.key !== first.key || oldest.ms - m.ms >= pauseMs) break;
    oldest = m;
    count++;
  }
  return { agent: first, count, oldest };
}

/** The two latest speakers' run within the window: messages back to a third agent's or the window's start. */
function pairRun(recent: readonly Heard[], windowMs: number, nowMs: number): { agents: [string, string]; count: number } | null {
  const since = nowMs - windowMs;
  const i = agentAt(recent, recent.length - 1);
  const a = recent[i];
  if (!a || a.ms <= since) return null;
  let b: Heard | undefined;
  let count = 0;
  for (let j = i; j >= 0; j = agentAt(recent, j - 1)) {
    const m = recent[j]!;
    if (m.ms <= since) break;
    if (m.key !== a.key) {
      if (!b) b = m;
      else if (m.key !== b.key) break;
    }
    count++;
  }
  return b ? { agents: [a.agentId, b.agentId], count } : null;
}

/** The counters over `recent` (oldest first) at `nowMs`. */
export function loopGuardState(recent: readonly Heard[], nowMs: number, limits: LoopGuardLimits): LoopGuardState {
  const streak = limits.streak > 0 ? run(recent, limits.pauseMs, nowMs) : null;
  const pair = limits.pair > 0 ? pairRun(recent, limits.windowMs, nowMs) : null;
  return {
    streak: streak && { agent_id: streak.agent.agentId, count: streak.count, limit: limits.streak },
    pair: pair && { agents: pair.agents, count: pair.count, limit: limits.pair, window_s: Math.round(limits.windowMs / 1000) },
  };
}

export interface StreakRefusal {
  /** The streak the refused post would have extended. */
  count: number;
  /** Seconds until the pause that ends the streak is over. */
  retryAfterS: number;
  /** The streak's first message: one alert per streak. */
  firstSeq: number;
}

/** Whether `agentId` may post now after `recent` (oldest first); the refusal when it may not. */
export function streakRefusal(recent: readonly Heard[], agentId: string, nowMs: number, limits: LoopGuardLimits): StreakRefusal | null {
  if (limits.streak === 0) return null;
  const current = run(recent, limits.pauseMs, nowMs);
  if (!current || current.count < limits.streak || current.agent.key !== agentKey(agentId)) return null;
  return {
    count: current.count,
    retryAfterS: Math.max(1, Math.ceil((current.agent.ms + limits.pauseMs - nowMs) / 1000)),
    firstSeq: current.oldest.seq ?? 0,
  };
}

/** Whether the pair's exchange is over its limit (after the message just posted). */
export const pairOverLimit = (state: LoopGuardState): state is LoopGuardState & { pair: PairState } =>
  state.pair !== null && state.pair.count > state.pair.limit;
