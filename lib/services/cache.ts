/**
 * Per-room caches of derived state (the ledger context, proof trees), each entry keyed by the room
 * head it was built from: a room another instance has changed since has another head, so its stale
 * entry is never served. Bounded by the number of rooms (least recently used goes first).
 */
export class RoomCache<T> {
  private readonly entries = new Map<string, { key: string; value: T }>();

  constructor(private readonly maxRooms: number) {}

  /** The entry of `room` if it was built at `key`. */
  peek(room: string, key: string): T | undefined {
    const hit = this.entries.get(room);
    return hit?.key === key ? hit.value : undefined;
  }

  set(room: string, key: string, value: T): T {
    this.entries.delete(room);
    if (this.entries.size >= this.maxRooms) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(room, { key, value });
    return value;
  }

  forget(room: string): void {
    this.entries.delete(room);
  }
}

/** The caches of one Services (one app instance), by name; each module asks for its own. */
export class Caches {
  private readonly byName = new Map<string, RoomCache<unknown>>();

  of<T>(name: string, maxRooms: number): RoomCache<T> {
    let cache = this.byName.get(name);
    if (!cache) this.byName.set(name, (cache = new RoomCache<unknown>(maxRooms)));
    return cache as RoomCache<T>;
  }
}
