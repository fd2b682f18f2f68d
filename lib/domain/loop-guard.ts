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
 * Agents' messages only, newest first. A loop, not `filter` and `reverse`: over the windows the
 * service keeps (frozen arrays, lib/services/loop-guard.ts) `filter` took about 3 µs where this
 * takes under 1, twice a post.
 */
function agentsOnly(recent: readonly Spoken[]): Spoken[] {
  const newestFirst: Spoken[] = [];
  for (let i = recent.length - 1; i >= 0; i--) {
    const m = recent[i]!;
    if (!SERVICE_ACTORS.has(m.agentId)) newestFirst.push(m);
  }
  return newestFirst;
}

/** The latest speaker's run: its messages back to someone else's or to a pause of `pauseMs`. */
function run(newestFirst: Spoken[], pauseMs: number, nowMs: number): { agent: Spoken; count: number } | null {
  const first = newestFirst[0];
  if (!first) return null;
  if (nowMs - Date.parse(first.ts) >= pauseMs) return { agent: first, count: 0 }; // it has rested
  const key = agentKey(first.agentId);
  let count = 1;
  for (let i = 1; i < newestFirst.length; i++) {
    const m = newestFirst[i]!;
    if (agentKey(m.agentId) !== key || Date.parse(newestFirst[i - 1]!.ts) - Date.parse(m.ts) >= pauseMs) break;
    count++;
  }
  return { agent: first, count };
}

/** The two latest speakers' run within the window: messages back to a third agent's or the window's start. */
function pairRun(newestFirst: Spoken[], windowMs: number, nowMs: number): { agents: [string, string]; count: number } | null {
  const since = nowMs - windowMs;
  const a = newestFirst[0];
  if (!a || Date.parse(a.ts) <= since) return null;
  const keyA = agentKey(a.agentId);
  let b: Spoken | undefined;
  let count = 0;
  for (const m of newestFirst) {
    if (Date.parse(m.ts) <= since) break;
    const key = agentKey(m.agentId);
    if (key !== keyA) {
      if (!b) b = m;
      else if (key !== agentKey(b.agentId)) break;
    }
    count++;
  }
  return b ? { agents: [a.agentId, b.agentId], count } : null;
}

/** The counters over `recent` (oldest first, as the store returns them) at `nowMs`. */
export function loopGuardState(recent: readonly Spoken[], nowMs: number, limits: LoopGuardLimits): LoopGuardState {
  const newest = agentsOnly(recent);
  const streak = limits.streak > 0 ? run(newest, limits.pauseMs, nowMs) : null;
  const pair = limits.pair > 0 ? pairRun(newest, limits.windowMs, nowMs) : null;
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
export function streakRefusal(recent: readonly Spoken[], agentId: string, nowMs: number, limits: LoopGuardLimits): StreakRefusal | null {
  if (limits.streak === 0) return null;
  const newest = agentsOnly(recent);
  const current = run(newest, limits.pauseMs, nowMs);
  if (!current || current.count < limits.streak || agentKey(current.agent.agentId) !== agentKey(agentId)) return null;
  const lastMs = Date.parse(current.agent.ts);
  return {
    count: current.count,
    retryAfterS: Math.max(1, Math.ceil((lastMs + limits.pauseMs - nowMs) / 1000)),
    firstSeq: newest[current.count - 1]!.seq ?? 0,
  };
}

/** Whether the pair's exchange is over its limit (after the message just posted). */
export const pairOverLimit = (state: LoopGuardState): state is LoopGuardState & { pair: PairState } =>
  state.pair !== null && state.pair.count > state.pair.limit;
