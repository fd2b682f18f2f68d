import type { EventRow } from "../store/types";
import type { Notifier } from "./notifier";

/** Rooms whose last commit is kept; past it the least recently committed room goes first. */
const MAX_ROOMS = 1024;

/**
 * The events of this instance's last commit to each room that a reader waited on when it
 * committed, kept as the commit made them (lib/services/events.ts hands them over after COMMIT,
 * before the readers wake): a long-poll woken by the commit answers from them, without reading the
 * page back from the store. A room's are kept while they are its newest events: a later head (another
 * instance's commit, the room deleted) drops them. A reader whose cursor is before the commit's
 * first event reads the store.
 */
export class LastCommits {
  private readonly rooms = new Map<string, readonly EventRow[]>();

  constructor(private readonly notifier: Notifier) {
    // A head past the kept commit (another instance's commit, a deleted room): it is not the newest.
    notifier.subscribeAll((room, seq) => {
      const rows = this.rooms.get(room);
      if (rows && seq > rows.at(-1)!.seq) this.rooms.delete(room);
    });
  }

  /** A committed write's events by room (never throws: the write has committed). */
  committed(heads: ReadonlyMap<string, { rows: readonly EventRow[] }>): void {
    for (const [room, { rows }] of heads) {
      if (rows.length === 0) continue;
      this.rooms.delete(room);
      if (!this.notifier.listening(room)) continue;
      this.rooms.set(room, rows);
      if (this.rooms.size > MAX_ROOMS) this.rooms.delete(this.rooms.keys().next().value!);
    }
  }

  /**
   * Every event of the room after `since` (up to its head), when its newest commit was made here and
   * began at or before `since + 1`; else undefined (read the store).
   */
  after(room: string, since: number): readonly EventRow[] | undefined {
    const rows = this.rooms.get(room);
    if (!rows || rows[0]!.seq > since + 1 || rows.at(-1)!.seq <= since) return undefined;
    return rows.filter((row) => row.seq > since);
  }
}
