// Wake-ups across instances: every commit that appended events sends one NOTIFY with the rooms and
// their new heads (lib/store/pg.ts); each instance LISTENs on a connection of its own and wakes
// its local readers. The hint only wakes: readers re-read from their cursor in the database, so a
// lost notification costs latency, never an event. After the connection drops, it reconnects with
// backoff and wakes every waiting reader to re-read, which covers what it missed meanwhile. An
// instance skips its own announcements: its store wakes its readers at commit (onCommit), with the
// commit's frames already cached, and the NOTIFY can arrive before the COMMIT's reply does.
// During a rolling deploy, instances of the release before the origin was added announce a bare
// array of heads; those are heard too (never their own: they carry no origin).
import type pg from "pg";
import { NOTIFY_CHANNEL, ownAnnouncements, type Announcement } from "../store/pg";
import type { Notifier } from "./notifier";

export interface CommitListener {
  /** Whether the LISTEN connection is up. */
  readonly connected: boolean;
  close(): Promise<void>;
}

/**
 * A NOTIFY payload as an announcement: `{from, heads}`, or the bare `[[room, seq]…]` of an older
 * release (no origin); undefined for anything else on the channel (nothing is published from it).
 */
export function parseAnnouncement(payload: string): { from?: string; heads: Announcement["heads"] } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    return undefined;
  }
  const isHeads = (v: unknown): v is Announcement["heads"] =>
    Array.isArray(v) && v.every((h) => Array.isArray(h) && h.length === 2 && typeof h[0] === "string" && Number.isSafeInteger(h[1]) && h[1] >= 0);
  if (isHeads(parsed)) return { heads: parsed };
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const { from, heads } = parsed as Partial<Announcement>;
  return typeof from === "string" && isHeads(heads) ? { from, heads } : undefined;
}

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5_000;

export async function listenForCommits(
  url: string,
  /** The origin of this instance's store (its announcements are skipped). */
  self: string,
  notifier: Notifier,
  /** The head of a room now (for readers to re-read after a reconnect). */
  headOf: (room: string) => Promise<number | undefined>,
  log: (line: string) => void = (line) => console.error(line),
): Promise<CommitListener> {
  let client: pg.Client | undefined;
  let closed = false;
  let connected = false;
  let retryMs = RETRY_MIN_MS;
  let timer: ReturnType<typeof setTimeout> | undefined;

  // This instance's own announcements are skipped unparsed (and, should one not match, by `from`).
  const own = ownAnnouncements(self);
  const onNotification = (msg: pg.Notification) => {
    if (msg.channel !== NOTIFY_CHANNEL || !msg.payload || msg.payload.startsWith(own)) return;
    const announced = parseAnnouncement(msg.payload);
    if (announced && announced.from !== self) for (const [room, seq] of announced.heads) notifier.publish(room, seq);
  };

  const rereadAll = async () => {
    for (const room of notifier.rooms()) {
      const head = await headOf(room).catch(() => undefined);
      if (head !== undefined) notifier.publish(room, head);
    }
  };

  async function connect(first: boolean): Promise<void> {
    const { default: driver } = await import("pg");
    const c = new driver.Client({ connectionString: url, connectionTimeoutMillis: 5_000, keepAlive: true });
    c.on("notification", onNotification);
    c.on("error", () => {}); // reported through "end"
    c.on("end", () => {
      if (client !== c) return;
      client = undefined;
      connected = false;
      notifier.missed();
      if (!closed) {
        log(`parley: the LISTEN connection to PostgreSQL dropped; reconnecting`);
        schedule();
      }
    });
    await c.connect();
    await c.query(`LISTEN ${NOTIFY_CHANNEL}`);
    if (closed) return void (await c.end());
    client = c;
    connected = true;
    retryMs = RETRY_MIN_MS;
    if (!first) {
      log(`parley: the LISTEN connection to PostgreSQL is back`);
      notifier.missed();
      await rereadAll();
    }
  }

  function schedule(): void {
    clearTimeout(timer);
    timer = setTimeout(() => {
      connect(false).catch(() => {
        retryMs = Math.min(RETRY_MAX_MS, retryMs * 2);
        if (!closed) schedule();
      });
    }, retryMs);
    timer.unref?.();
  }

  await connect(true);
  return {
    get connected() {
      return connected;
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}
