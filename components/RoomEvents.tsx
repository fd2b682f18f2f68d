"use client";

import { createContext, useContext, useEffect, useRef, useState, type ReactNode } from "react";
// The event catalogue (pure, browser-safe), so a new event type reaches its panel too.
import { typesOf } from "../lib/domain/catalogue";

/**
 * The watcher's in-page event bus. The feed owns the page's one EventSource and publishes every
 * event it receives here; other panels (the ledger) subscribe instead of opening a second stream.
 * Panels can also ask the feed to bring a message into view (`reveal`).
 */

/** The part of an SSE frame's data every subscriber can rely on: the log event. */
export interface RoomEvent {
  seq: number;
  ts: string;
  type: string;
  actor?: string;
  payload?: Record<string, unknown>;
}

/** Ledger event types (SPEC 5), plus the arbiter's bookkeeping events that change `/context`. */
export const LEDGER_EVENT_TYPES = typesOf("ledger", "arbiter");

/** Task board events (issue 7), with the board's agents: the board panel re-reads GET /tasks when one arrives. */
export const TASK_EVENT_TYPES = typesOf("board");

/** Turns-mode events (issue 6): the turns panel re-reads GET /turns/current when one arrives. */
export const TURN_EVENT_TYPES = typesOf("turns");

export type RevealResult = { ok: true } | { ok: false; reason: string };
type Revealer = (messageId: number) => Promise<RevealResult>;
type Listener = (event: RoomEvent) => void;

class RoomEventBus {
  private readonly listeners = new Set<Listener>();
  private revealer: Revealer | null = null;

  /** Event types the stream owner must listen for on behalf of subscribers (EventSource has no wildcard). */
  readonly extraTypes: readonly string[] = [...LEDGER_EVENT_TYPES, ...TASK_EVENT_TYPES, ...TURN_EVENT_TYPES];

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  publish(event: RoomEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        console.error(err);
      }
    }
  }

  /** The feed registers how it brings a message into view; null when it unmounts. */
  setRevealer(revealer: Revealer | null): void {
    this.revealer = revealer;
  }

  reveal(messageId: number): Promise<RevealResult> {
    return this.revealer ? this.revealer(messageId) : Promise.resolve({ ok: false, reason: "The feed is not on this page." });
  }
}

const BusContext = createContext<RoomEventBus | null>(null);

/** One bus per watcher page, shared by the feed (publisher) and the panels (subscribers). */
export function RoomEventsProvider({ children }: { children: ReactNode }) {
  const [bus] = useState(() => new RoomEventBus());
  return <BusContext value={bus}>{children}</BusContext>;
}

/** The page's bus, or null outside a RoomEventsProvider (the feed then just does not publish). */
export const useRoomEventBus = () => useContext(BusContext);

/** Calls `onEvent` for every event of the given types the page's stream delivers. */
export function useRoomEvents(types: readonly string[], onEvent: (event: RoomEvent) => void): void {
  const bus = useRoomEventBus();
  const handler = useRef(onEvent);
  useEffect(() => {
    handler.current = onEvent;
  });
  const key = types.join(" ");
  useEffect(() => {
    if (!bus) return;
    const wanted = new Set(key.split(" "));
    return bus.subscribe((event) => {
      if (wanted.has(event.type)) handler.current(event);
    });
  }, [bus, key]);
}

/** Events arriving within this window (a reply brings three or four) are covered by one re-read. */
const REFETCH_DEBOUNCE_MS = 150;

/** Calls `reload` once after a burst of events of these types: how the panels follow the stream. */
export function useRefetchOn(types: readonly string[], reload: () => void): void {
  const pending = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useRoomEvents(types, () => {
    if (pending.current !== undefined) return;
    pending.current = setTimeout(() => {
      pending.current = undefined;
      reload();
    }, REFETCH_DEBOUNCE_MS);
  });
  useEffect(() => () => clearTimeout(pending.current), []);
}
