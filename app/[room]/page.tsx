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
import { shortId } from "../../components/format";
import { roomInstructions } from "../../lib/instructions/room";
import { getContext } from "../../lib/services/ledger";
import { readMessages } from "../../lib/services/messages";
import { getRoom } from "../../lib/services/rooms";
import { listTasks } from "../../lib/services/tasks";
import { currentTurn } from "../../lib/services/turns";
import { errorCode, pageContext } from "../_lib/context";

type Props = { params: Promise<{ room: string }> };

const INITIAL_MESSAGES = 50;

/**
 * The room, or "expired"; unknown rooms and ids that are not UUIDs are a 404. Cached for the
 * request, so generateMetadata and the page share one read.
 */
const load = cache(async (id: string) => {
  const { svc, caller } = await pageContext();
  try {
    return { svc, caller, room: await getRoom(svc, caller, id) };
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

  // The live stream starts after head.size; a message posted between these two reads comes
  // both in this page and on the stream, and the feed drops the second copy by its id.
  const page = await readMessages(svc, room.uuid, { tail: INITIAL_MESSAGES, limit: INITIAL_MESSAGES });
  // Read after head.size, like the messages: a ledger change in between is on the stream too, and
  // the panel's re-read covers it.
  const [ledger, { tasks: board }, turns, instructions] = await Promise.all([
    getContext(svc, room.uuid),
    listTasks(svc, room.uuid),
    // Turns rooms only: read after head.size too, so a turn event in between is on the stream.
    room.mode === "turns" ? currentTurn(svc, room.uuid) : null,
    roomInstructions(svc, caller, room.uuid),
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
            initialHasOlder={page.has_more}
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
