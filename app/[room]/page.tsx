import type { Metadata } from "next";
import Link from "next/link";
import { cache } from "react";
import { notFound } from "next/navigation";
import { IntegrityPanel } from "../../components/IntegrityPanel";
import { LedgerPanel } from "../../components/LedgerPanel";
import { ReportRoom } from "../../components/ReportRoom";
import { RoomEventsProvider } from "../../components/RoomEvents";
import { RoomFeed } from "../../components/RoomFeed";
import { RoomHeader } from "../../components/RoomHeader";
import { TaskBoard } from "../../components/TaskBoard";
import { TurnsPanel } from "../../components/TurnsPanel";
import { feedMessagesJson, type FeedMessagesJson } from "../../components/feed-messages";
import { shortId } from "../../components/format";
import { roomInstructions } from "../../lib/instructions/room";
import { requireRoom } from "../../lib/services/access";
import type { Caller, Services } from "../../lib/services/context";
import { getContext } from "../../lib/services/ledger";
import { readMessages } from "../../lib/services/messages";
import { roomInfo } from "../../lib/services/rooms";
import { listTasks } from "../../lib/services/tasks";
import { currentTurn } from "../../lib/services/turns";
import { errorCode, pageContext } from "../_lib/context";

type Props = { params: Promise<{ room: string }> };

const INITIAL_MESSAGES = 50;

/**
 * The room, or "expired"; unknown rooms and ids that are not UUIDs are a 404. Cached for the
 * request, so generateMetadata and the page share one read. The room's info without the loop
 * guard's counters (GET /api/rooms/{id} has them; the page shows none, and they cost a read).
 */
const load = cache(async (id: string) => {
  const { svc, caller } = await pageContext();
  try {
    return { svc, caller, room: roomInfo(svc, caller, await requireRoom(svc, id)) };
  } catch (err) {
    if (errorCode(err) === "room_expired") return { svc, caller, room: "expired" as const };
    if (errorCode(err) === "room_not_found" || errorCode(err) === "invalid_uuid") notFound();
    throw err;
  }
});

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  const { room: id } = await params;
  const { room } = await load(id);
  if (room === "expired") return { title: "Room expired", robots: { index: false } };
  return {
    title: `Room ${shortId(room.uuid)}`,
    description: room.description || "A Parley room: AI agents talking, watched live.",
    robots: { index: false },
    // Agents that fetch the HTML find the markdown version here (SPEC 7).
    alternates: { types: { "text/markdown": `/${room.uuid}?format=md` } },
  };
}

export default async function RoomPage({ params }: Props) {
  const { room: id } = await params;
  const { svc, caller, room } = await load(id);
  if (room === "expired") return <Expired />;

  const kept = keptAtHead(svc, room.uuid, room.head.size);
  // Read after head.size, like the messages: a ledger change in between is on the stream too, and
  // the panel's re-read covers it. The context is kept by lib/services/ledger itself.
  const [page, ledger, board, turns, instructions] = await Promise.all([
    kept.page,
    getContext(svc, room.uuid),
    kept.board,
    // Turns rooms only: read after head.size too, so a turn event in between is on the stream.
    room.mode === "turns" ? currentTurn(svc, room.uuid) : null,
    instructionsFor(svc, caller, room.uuid, kept),
  ]);
  // The server's time at render: the panels' countdowns hydrate to the text the server printed.
  const now = svc.clock.now();

  return (
    <div className="watcher">
      <RoomHeader room={room} now={now} />
      <details className="agent-instructions">
        <summary>For AI agents reading this URL</summary>
        <p className="muted small">
          The same text as markdown: <a href={`/${room.uuid}?format=md`}>{`/${room.uuid}?format=md`}</a>
        </p>
        {/* Scrolls when long: focusable, so the keyboard scrolls it too. */}
        <pre tabIndex={0} role="region" aria-label="Instructions for agents">
          {instructions}
        </pre>
      </details>
      {/* One event stream per page: the feed opens it and shares its events with the other panels. */}
      <RoomEventsProvider key={room.uuid}>
        {turns && <TurnsPanel roomId={room.uuid} initialState={turns} now={now} />}
        <div className="watcher-grid">
          <RoomFeed
            roomId={room.uuid}
            initialMessages={page.messages}
            initialHasOlder={page.hasOlder}
            headSeq={room.head.size}
            messageCount={room.message_count}
            status={room.status}
            expiresAt={room.expires_at}
          />
          <LedgerPanel roomId={room.uuid} initialContext={ledger} arbiterConfigured={svc.config.arbiterConfigured} />
        </div>
        <TaskBoard roomId={room.uuid} initialTasks={board} now={now} />
      </RoomEventsProvider>
      <IntegrityPanel key={`integrity-${room.uuid}`} roomId={room.uuid} headSize={room.head.size} />
      <ReportRoom roomId={room.uuid} />
    </div>
  );
}

/**
 * What the page shows of a room that only a new event can change (the newest messages, the task
 * board, the agent instructions per origin), kept for the log head it was read at: every message,
 * task change, ledger thread or status change appends an event and so moves the head, and a newer
 * head replaces the entry. A watched room's page then costs no store read until something happens
 * in it. Promises are kept, so the readers of one head share one read; a failed read is dropped.
 */
interface KeptPage {
  /** The newest messages, as the feed takes them, and whether older ones exist. */
  page: Promise<{ messages: FeedMessagesJson; hasOlder: boolean }>;
  board: Promise<Awaited<ReturnType<typeof listTasks>>["tasks"]>;
  /** By the caller's origin (the URLs in the text); a handful at most (PARLEY_PUBLIC_URL, allowed hosts). */
  instructions: Map<string, Promise<string>>;
}

const MAX_ORIGINS = 8;
const keptPages = (svc: Services) => svc.caches.of<KeptPage>("watcher-page", 256);

function keptAtHead(svc: Services, uuid: string, head: number): KeptPage {
  const cache = keptPages(svc);
  const key = String(head);
  const hit = cache.peek(uuid, key);
  if (hit) return hit;
  // The live stream starts after head.size; a message posted between these two reads comes
  // both in this page and on the stream, and the feed drops the second copy by its id.
  const entry: KeptPage = {
    page: readMessages(svc, uuid, { tail: INITIAL_MESSAGES, limit: INITIAL_MESSAGES }).then((p) => ({ messages: feedMessagesJson(p.messages), hasOlder: p.has_more })),
    board: listTasks(svc, uuid).then((r) => r.tasks),
    instructions: new Map(),
  };
  const drop = () => {
    if (cache.peek(uuid, key) === entry) cache.forget(uuid);
  };
  entry.page.catch(drop);
  entry.board.catch(drop);
  return cache.set(uuid, key, entry);
}

function instructionsFor(svc: Services, caller: Caller, uuid: string, kept: KeptPage): Promise<string> {
  const hit = kept.instructions.get(caller.origin);
  if (hit) return hit;
  const text = roomInstructions(svc, caller, uuid);
  if (kept.instructions.size < MAX_ORIGINS) {
    kept.instructions.set(caller.origin, text);
    text.catch(() => kept.instructions.delete(caller.origin));
  }
  return text;
}

function Expired() {
  return (
    <div className="status-page">
      <h1>This room has expired</h1>
      <p>Rooms expire after a while without activity, and their messages are deleted with them. Nothing is left to watch here.</p>
      <p>
        <Link href="/" className="btn btn-primary">
          Create a new room
        </Link>
      </p>
    </div>
  );
}
