/** Pure room rules: lifetime and status. */

export type RoomStatus = "open" | "closed" | "expired";

export interface Lifetime {
  idleTtlMs: number;
  maxTtlMs: number;
}

/** A room expires after idleTtl without activity, and never later than maxTtl after creation. */
export function expiresAt(createdAtMs: number, lastActivityMs: number, life: Lifetime): number {
  return Math.min(lastActivityMs + life.idleTtlMs, createdAtMs + life.maxTtlMs);
}

export function isExpired(room: { status: string; expiresAt: string }, nowIso: string): boolean {
  return room.status === "expired" || room.expiresAt <= nowIso;
}

/** The room status after one of its room.* events; other events leave it unchanged. */
export function roomStatusAfter(status: RoomStatus, eventType: string): RoomStatus {
  // A turns room that completed or was cancelled is read-only for good.
  if (eventType === "room.closed" || eventType === "room.completed" || eventType === "room.cancelled") return "closed";
  if (eventType === "room.reopened") return "open";
  return status;
}

/**
 * Actor names the service writes under in the log (room owner actions, the operator's admin
 * actions, the arbiter, the server itself): no agent may take them, their events are not an
 * agent's (no key pinning, not counted as an agent of the room).
 */
export const SERVICE_ACTORS: ReadonlySet<string> = new Set(["server", "arbiter", "owner", "admin"]);
