/**
 * How a feature declares its room events (the catalogue, lib/domain/catalogue.ts, gathers them):
 * the payload's schema, the schema of the facts the server adds, and whether agents write it (and
 * so may sign it, and key pinning applies). An event type is named once, here; a reducer reads a
 * payload through its kind, typed by the schema, instead of casting field by field.
 */
import { z } from "zod";
import type { LogEvent } from "../log/event";

export type FeatureName = "room" | "messages" | "ledger" | "board" | "turns" | "arbiter";

export interface EventKind<T extends string = string, P = Record<string, unknown>, S = Record<string, unknown>> {
  readonly type: T;
  readonly feature: FeatureName;
  readonly payload: z.ZodType<P>;
  readonly server: z.ZodType<S>;
  /** Agents write it and may sign it; key pinning applies to it. */
  readonly agentWritten: boolean;
}

interface KindSpec {
  payload: z.ZodType;
  server?: z.ZodType;
  agentWritten?: boolean;
}

type KindsOf<D extends Record<string, KindSpec>> = {
  readonly [T in keyof D & string]: EventKind<
    T,
    z.infer<D[T]["payload"]>,
    D[T]["server"] extends z.ZodType ? z.infer<D[T]["server"]> : Record<string, never>
  >;
};

/** No server facts. */
const NONE = z.object({});

/** A feature's event kinds, keyed by type. */
export function defineEvents<D extends Record<string, KindSpec>>(feature: FeatureName, defs: D): KindsOf<D> {
  return Object.fromEntries(
    Object.entries(defs).map(([type, spec]) => [type, { type, feature, payload: spec.payload, server: spec.server ?? NONE, agentWritten: spec.agentWritten ?? false }]),
  ) as KindsOf<D>;
}

/**
 * An event's payload and server facts as its kind types them. The schemas are checked when the
 * event is appended and again when the verifier replays it, so a reducer may rely on them.
 */
export function as<T extends string, P, S>(kind: EventKind<T, P, S>, event: Pick<LogEvent, "payload" | "server">): { payload: P; server: S } {
  return event as unknown as { payload: P; server: S };
}

/** Schemas of payload fields that several kinds share. */
export const seqId = z.number().int().positive();
export const isoTime = z.string();

/**
 * A feature's reducer over its projection `S`: applied to every event whose type it owns or reads,
 * in log order, by the verifier's replay (lib/domain/replay.ts) and by the projector at append
 * (lib/services/projector.ts), so what is stored and what the log says cannot drift apart.
 */
export interface Feature<S> {
  readonly name: FeatureName;
  readonly kinds: readonly EventKind[];
  /** Types of other features that this reducer also applies. */
  readonly reads?: readonly string[];
  empty(): S;
  apply(state: S, event: LogEvent, ctx: ReduceContext): void;
}

/** What a reducer may need beyond the event: its leaf hash and the room's settings from room.created. */
export interface ReduceContext {
  leafHash: string;
  quorum: number;
}
