// Wake-ups across instances: every commit that appended events sends one NOTIFY with the rooms and
// their new heads (lib/store/pg.ts); each instance LISTENs on a connection of its own and wakes
// its local readers. The hint only wakes: readers re-read from their cursor in the database, so a
// lost notification costs latency, never an event. After the connection drops, it reconnects with
// backoff and wakes every waiting reader to re-read, which covers what it missed meanwhile. An
// instance skips its own announcements: its store wakes its readers at commit (onCommit), with the
// commit's frames already cached, and the NOTIFY can arrive before the COMMIT's reply does.
import type pg from "pg";
import { NOTIFY_CHANNEL, type Announcement } from "../store/pg";
import type { Notifier } from "./notifier";

export interface CommitListener {
  /** Whether the LISTEN connection is up. */
  readonly connected: boolean;
  close(): Promise<void>;
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

  const onNotification = (msg: pg.Notification) => {
    if (msg.channel !== NOTIFY_CHANNEL || !msg.payload) return;
    try {
      const { from, heads } = JSON.parse(msg.payload) as Announcement;
      if (from !== self) for (const [room, seq] of heads) notifier.publish(room, seq);
    } catch {
      /* not ours */
    }
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
