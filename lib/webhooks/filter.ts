// Which events a webhook gets: its `events` list (exact types and family.* patterns; none: every
// event) and, with `mentioning`, only the messages that mention that agent.
import { FEATURES, typesOf } from "../domain/catalogue";
import { isAddressedTo, mentionsOf } from "../domain/message";
import type { LogEvent } from "../log/event";

/** The event types a webhook may ask for: every type of the event catalogue. */
export const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set(typesOf(...FEATURES.map((f) => f.name)));
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
 * Whether a message event is addressed to `agent`: the room's own rule (lib/domain/message.ts), the
 * one `mentioning=` follows on reads and streams: its @-mentions, by agentKey, its author excepted.
 */
export function mentions(event: Pick<LogEvent, "type" | "actor" | "payload">, agent: string): boolean {
  if (event.type !== "message.posted") return false;
  const text = (event.payload as { text?: unknown }).text;
  return typeof text === "string" && isAddressedTo({ agent_id: event.actor, mentions: mentionsOf(text) }, agent);
}
