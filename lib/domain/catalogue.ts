/**
 * The event catalogue: every room event type, declared once by the feature that owns it, and the
 * reducers that turn a log into projections. The projector (lib/services/projector.ts) runs these
 * reducers at append, the verifier's replay (lib/domain/replay.ts) runs them over a whole log, and
 * the watcher asks it which types belong to which panel.
 */
import { ARBITER_EVENTS, arbiterFeature } from "./arbiter";
import type { EventKind, Feature, FeatureName } from "./event-kind";
import { LEDGER_EVENTS, ledgerFeature } from "./ledger";
import { MESSAGE_EVENTS, messagesFeature } from "./message";
import { ROOM_EVENTS, roomFeature } from "./room-events";
import { BOARD_EVENTS, boardFeature } from "./tasks";
import { TURN_EVENTS, turnsFeature } from "./turns";

const KINDS = { ...ROOM_EVENTS, ...MESSAGE_EVENTS, ...LEDGER_EVENTS, ...BOARD_EVENTS, ...TURN_EVENTS, ...ARBITER_EVENTS };
export type EventType = keyof typeof KINDS;

/** The features in the order their reducers run for one event. */
export const FEATURES = [roomFeature, messagesFeature, ledgerFeature, boardFeature, turnsFeature, arbiterFeature] as const;

const BY_TYPE: ReadonlyMap<string, EventKind> = new Map(Object.values(KINDS).map((k: EventKind) => [k.type, k]));

export const eventKind = (type: string): EventKind | undefined => BY_TYPE.get(type);

/** Types an agent writes (and may sign): key pinning applies to them. */
export const isAgentWritten = (type: string): boolean => BY_TYPE.get(type)?.agentWritten ?? false;

/** The event types a feature owns. */
export const typesOf = (...features: FeatureName[]): string[] =>
  [...BY_TYPE.values()].filter((k) => features.includes(k.feature)).map((k) => k.type);

const reducers = new Map<string, Feature<unknown>[]>();
/** The features whose reducers apply an event of this type, in FEATURES order. */
export function reducersFor(type: string): readonly Feature<unknown>[] {
  let list = reducers.get(type);
  if (!list) {
    const owner = BY_TYPE.get(type)?.feature;
    list = (FEATURES as readonly Feature<unknown>[]).filter((f) => f.name === owner || f.reads?.includes(type) || f.reads?.includes("*"));
    reducers.set(type, list);
  }
  return list;
}

/**
 * Why an event does not fit the catalogue (an unknown type, or a payload or server part its
 * schemas refuse), or null when it fits.
 */
export function eventProblem(event: { type: string; payload: unknown; server: unknown }): string | null {
  const kind = BY_TYPE.get(event.type);
  if (!kind) return `"${event.type}" is not an event type of this service.`;
  const payload = kind.payload.safeParse(event.payload);
  if (!payload.success) return `its payload does not fit ${event.type}: ${payload.error.issues[0]?.path.join(".") || "payload"} ${payload.error.issues[0]?.message ?? ""}`.trim();
  const server = kind.server.safeParse(event.server);
  if (!server.success) return `its server facts do not fit ${event.type}: ${server.error.issues[0]?.path.join(".") || "server"} ${server.error.issues[0]?.message ?? ""}`.trim();
  return null;
}
