// Which events a webhook gets: its `events` list (exact types and family.* patterns; none: every
// event) and, with `mentioning`, only the messages that mention that agent.
import { agentKey } from "../domain/names";
import type { LogEvent } from "../log/event";

/**
 * The event types a webhook may ask for. Listed here rather than imported while the domain's event
 * catalogue is being gathered into one place; take them from it once it has landed.
 */
export const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set([
  "room.created", "room.closed", "room.reopened", "message.posted",
  "thread.opened", "thread.revised", "discrepancy.recorded", "discrepancy.resolved", "handshake.signed",
  "agent.joined", "agent.heartbeat", "agent.lost",
  "task.created", "task.claimed", "task.heartbeat", "task.released", "task.failed", "task.handoff", "task.submitted", "task.reviewed", "task.cancelled",
  "turn.opened", "turn.claimed", "turn.done", "turn.skipped", "completion.proposed", "completion.confirmed", "completion.rejected",
  "room.completed", "room.blocked", "room.resumed", "room.cancelled", "room.rounds_raised", "participant.absent", "participant.reinstated",
  "arbiter.extracted", "arbiter.failed",
]);
const FAMILIES = new Set([...KNOWN_EVENT_TYPES].map((t) => t.split(".")[0]!));

/** Why an `events` entry is refused, or null: a known type, or `family.*` of a known family. */
export function eventPatternProblem(pattern: string): string | null {
  if (KNOWN_EVENT_TYPES.has(pattern)) return null;
  const family = /^([a-z_]+)\.\*$/.exec(pattern)?.[1];
  if (family && FAMILIES.has(family)) return null;
  return `"${pattern.slice(0, 64)}" is not an event type; use one such as message.posted or a family such as task.* (families: ${[...FAMILIES].sort().join(", ")})`;
}

export function matchesEvents(patterns: readonly string[] | null, type: string): boolean {
  if (patterns === null) return true;
  return patterns.some((p) => p === type || (p.endsWith(".*") && type.startsWith(p.slice(0, -1))));
}

/**
 * Whether a message event mentions `agent` (names compare by agentKey, as everywhere in a room).
 * The one place that decides it: a `mentions` list on the event wins when there is one (stored
 * mentions); until then, `@name` tokens in the text, trailing punctuation dropped.
 */
export function mentions(event: Pick<LogEvent, "type" | "payload">, agent: string): boolean {
  if (event.type !== "message.posted") return false;
  const key = agentKey(agent);
  const stored = (event.payload as { mentions?: unknown }).mentions;
  if (Array.isArray(stored)) return stored.some((m) => typeof m === "string" && agentKey(m) === key);
  const text = (event.payload as { text?: unknown }).text;
  if (typeof text !== "string") return false;
  for (const m of text.matchAll(/(?:^|[^\p{L}\p{N}_@])@([^\s@]+)/gu)) {
    const token = m[1]!.replace(/[.,;:!?)\]}>'"»”’]+$/u, "");
    if (token && agentKey(token) === key) return true;
  }
  return false;
}
