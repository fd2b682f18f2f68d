import type { RoomRow, StoreReader } from "../store/types";

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

/**
 * The room rows the read paths need on every request (every GET names a room), kept in memory and
 * kept true by the notifier: a commit that moves a room's head (this instance's, or another's
 * through LISTEN) drops its row, and so does a deletion. What changes a row without moving its
 * head (the arbiter's usage counters, premium rooms only) is dropped by the write that did it on
 * this instance, and reaches the others within `ttlMs`; any other row is read again after
 * `steadyTtlMs` at the latest, and every row when the notifier may have missed commits (the
 * LISTEN connection dropped or came back). Concurrent misses for one room share one read, and the
 * misses of one event-loop turn one statement (a burst of misses, such as the first polls over
 * many rooms, is a few statements on PostgreSQL rather than a round trip each). A row is trusted
 * for a random time between half its TTL and all of it: rows read together would otherwise all be
 * read again together, every steadyTtlMs, in one burst (10,000 idle-polled rooms: the polls of
 * those seconds at four fifths of their rate on SQLite).
 */
export class RoomRows {
  private readonly rows = new Map<string, { row: RoomRow; until: number }>();
  private readonly loading = new Map<string, Promise<RoomRow | undefined>>();
  /** Rooms that moved while their row was being read: that read is not kept. */
  private readonly moved = new Set<string>();
  /** The misses of this event-loop turn, read together at its end. */
  private batch?: Map<string, { resolve(row: RoomRow | undefined): void; reject(err: unknown): void }>;

  constructor(
    private readonly store: Pick<StoreReader, "getRooms">,
    private readonly maxRooms = 20_000,
    private readonly ttlMs = 1_000,
    private readonly steadyTtlMs = 30_000,
    private readonly random: () => number = Math.random,
  ) {}

  async get(uuid: string): Promise<RoomRow | undefined> {
    const hit = this.rows.get(uuid);
    if (hit && performance.now() < hit.until) return hit.row;
    let pending = this.loading.get(uuid);
    if (!pending) {
      this.moved.delete(uuid);
      pending = this.read(uuid).finally(() => this.loading.delete(uuid));
      this.loading.set(uuid, pending);
      const row = await pending;
      if (row && !this.moved.has(uuid)) this.keep(uuid, row);
      return row;
    }
    return pending;
  }

  /** A miss, read with the other misses of this event-loop turn. */
  private read(uuid: string): Promise<RoomRow | undefined> {
    if (!this.batch) {
      const batch = (this.batch = new Map());
      setImmediate(() => {
        this.batch = undefined;
        this.store.getRooms([...batch.keys()]).then(
          (rows) => {
            const byUuid = new Map(rows.map((row) => [row.uuid, row]));
            for (const [uuid, waiter] of batch) waiter.resolve(byUuid.get(uuid));
          },
          (err: unknown) => {
            for (const waiter of batch.values()) waiter.reject(err);
          },
        );
      });
    }
    const batch = this.batch;
    return new Promise((resolve, reject) => batch.set(uuid, { resolve, reject }));
  }

  /** A room's head reached `seq` (or the room is gone): a row older than that is dropped. */
  headMoved(uuid: string, seq: number): void {
    const hit = this.rows.get(uuid);
    if (hit && hit.row.headSize < seq) this.rows.delete(uuid);
    if (this.loading.has(uuid)) this.moved.add(uuid);
  }

  forget(uuid: string): void {
    this.rows.delete(uuid);
    if (this.loading.has(uuid)) this.moved.add(uuid);
  }

  /** Commits may have gone unheard: no kept row (nor a read under way) is trusted. */
  forgetAll(): void {
    this.rows.clear();
    for (const uuid of this.loading.keys()) this.moved.add(uuid);
  }

  private keep(uuid: string, row: RoomRow): void {
    this.rows.delete(uuid);
    if (this.rows.size >= this.maxRooms) this.rows.delete(this.rows.keys().next().value!);
    const ttl = row.protocolMode === "premium" ? this.ttlMs : this.steadyTtlMs;
    this.rows.set(uuid, { row, until: performance.now() + ttl * (1 - this.random() / 2) });
  }
}
