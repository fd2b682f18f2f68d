"use client";

import { useEffect, useLayoutEffect, useRef, useState } from "react";
import { roomStatusAfter, type RoomStatus } from "../lib/domain/room";
import type { FeedMessage, Message } from "./types";
import { parseFeedMessages, type FeedMessagesJson } from "./feed-messages";
import { plural } from "./format";
import { Clock, MessageItem, serverFeed } from "./MessageItem";
import { useRoomEventBus, type RevealResult, type RoomEvent } from "./RoomEvents";
import { errorDetail, messageOf } from "./fetch";

type Entry = { kind: "message"; seq: number; message: FeedMessage } | { kind: "system"; seq: number; ts: string; text: string };
type Connection = "connecting" | "live" | "reconnecting" | "ended";

/** The part of an SSE frame's data the feed reads: the log event, plus the message of a message.posted. */
interface LogEventData extends RoomEvent {
  message?: Message;
}

/** Messages per "Load older messages" click. */
const PAGE = 50;
/** Seqs covered by one request when paging back (the API clamps `limit` at 500). */
const WINDOW = 200;
/** Live messages beyond this drop the oldest from the page: the feed never renders the whole room. */
const MAX_ENTRIES = 400;
/** How far back (in seqs) "jump to message" loads the feed by itself; further back, the reader pages. */
const MAX_REVEAL_SPAN = 300;
/** How long a message brought into view stays highlighted (ms). */
const FLASH_MS = 2400;

const SYSTEM_TEXT: Record<string, string> = {
  "room.closed": "The owner closed the room. It is read-only now.",
  "room.reopened": "The owner reopened the room.",
  "room.hidden": "The operator removed the room from the public list.",
  "room.unhidden": "The operator returned the room to the public list.",
  "room.completed": "The conversation is complete. The room is read-only now.",
  "room.cancelled": "The owner cancelled the room. It is read-only now.",
};
const LIVE_TYPES = ["message.posted", ...Object.keys(SYSTEM_TEXT)];
/** The line for a room event; the operator (actor admin) closes and reopens too. */
const systemText = (event: { type: string; actor?: string }) =>
  event.actor === "admin" ? SYSTEM_TEXT[event.type]?.replace(/^The owner/, "The operator") : SYSTEM_TEXT[event.type];

const CONNECTION_LABEL: Record<Connection, string> = {
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  ended: "ended",
};

const messageEntry = (message: FeedMessage): Entry => ({ kind: "message", seq: message.id, message });

/** Adds entries not shown yet (by seq: a redelivered event is dropped), in seq order. */
function merge(list: Entry[], incoming: Entry[]): Entry[] {
  const seen = new Set(list.map((e) => e.seq));
  const fresh = incoming.filter((e) => !seen.has(e.seq) && seen.add(e.seq));
  if (fresh.length === 0) return list;
  const last = list.at(-1)?.seq ?? 0;
  const merged = [...list, ...fresh];
  return fresh.every((e) => e.seq > last) ? merged : merged.sort((a, b) => a.seq - b.seq);
}

/**
 * Up to PAGE messages older than `beforeSeq`, oldest first.
 *
 * The API pages forward only (`since` is exclusive) and message ids are event seqs shared with
 * other events, so "the 50 messages before #X" are not #X−50…#X−1; and `?tail=N` with a growing N
 * would re-download the whole room at every click. Instead we walk back in windows of seqs: the
 * window (lo, hi] holds at most hi−lo messages, so `?since=lo&limit=hi−lo` returns all of them in
 * one request (plus perhaps newer ones, which we drop). Windows step back until a page is full or
 * the start of the log is reached; each click costs one request when messages are dense.
 */
async function fetchOlder(roomId: string, beforeSeq: number): Promise<{ messages: Message[]; more: boolean }> {
  let hi = beforeSeq - 1;
  let found: Message[] = [];
  while (hi > 0 && found.length < PAGE) {
    const lo = Math.max(0, hi - WINDOW);
    const res = await fetch(`/api/rooms/${roomId}/messages?since=${lo}&limit=${hi - lo}`);
    if (!res.ok) throw new Error(await errorDetail(res));
    const page = (await res.json()) as { messages: Message[] };
    const upTo = hi;
    found = [...page.messages.filter((m) => m.id <= upTo), ...found];
    hi = lo;
  }
  return { messages: found.slice(-PAGE), more: hi > 0 || found.length > PAGE };
}

/** Why the room cannot be watched any more (deleted: 404, expired: 410), or null if it still exists. */
async function roomGone(roomId: string): Promise<string | null> {
  try {
    const res = await fetch(`/api/rooms/${roomId}`);
    if (res.status === 404 || res.status === 410) return errorDetail(res);
  } catch {
    /* offline: try again later */
  }
  return null;
}

export interface RoomFeedProps {
  roomId: string;
  /** The newest messages at render time, oldest first (one JSON string: see feed-messages.ts). */
  initialMessages: FeedMessagesJson;
  initialHasOlder: boolean;
  /** The log size the page was rendered at: the live stream starts after it. */
  headSeq: number;
  messageCount: number;
  status: "open" | "closed";
  /** When the room expires unless someone posts (ISO time). */
  expiresAt: string;
}

/** The live feed: one SSE stream, newest at the bottom, older pages on demand. */
export function RoomFeed({ roomId, initialMessages, initialHasOlder, headSeq, messageCount, status: initialStatus, expiresAt }: RoomFeedProps) {
  // On the server the first messages (and their markup) may be kept: see serverFeed.
  const server = typeof window === "undefined" ? serverFeed(initialMessages) : undefined;
  const [entries, setEntries] = useState<Entry[]>(() => (server ? server.messages : parseFeedMessages(initialMessages)).map(messageEntry));
  const [hasOlder, setHasOlder] = useState(initialHasOlder);
  const [older, setOlder] = useState<{ loading: boolean; error?: string }>({ loading: false });
  const [connection, setConnection] = useState<Connection>("connecting");
  const [ended, setEnded] = useState<string | null>(null);
  const [count, setCount] = useState(messageCount);
  const [status, setStatus] = useState<RoomStatus>(initialStatus);
  const [unseen, setUnseen] = useState(0);

  const scroller = useRef<HTMLDivElement>(null);
  /** Whether the reader is at the bottom: only then do new messages scroll the feed. */
  const atBottom = useRef(true);
  /** scrollHeight before older messages were put on top, to keep the reader's place. */
  const anchor = useRef<number | null>(null);
  /** The last seq received: where a stream we open ourselves resumes. */
  const cursor = useRef(headSeq);
  /** The highest message seq counted in `count`, so a redelivered message is not counted twice. */
  const counted = useRef(headSeq);
  /** Other panels get every event of our stream through the page's bus (one EventSource per page). */
  const bus = useRoomEventBus();
  /** A message to bring into view once the entries just loaded are rendered. */
  const revealTarget = useRef<number | null>(null);
  const [flash, setFlash] = useState<number | null>(null);
  const revealNow = useRef<((id: number) => boolean) | null>(null);
  const latest = useRef({ entries, hasOlder });
  useEffect(() => {
    latest.current = { entries, hasOlder };
  });

  useEffect(() => {
    let source: EventSource | undefined;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let expiry: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;

    const end = (why: string) => {
      stopped = true;
      source?.close();
      clearTimeout(retry);
      clearTimeout(expiry);
      setConnection("ended");
      setEnded(why);
    };

    const onEvent = (e: MessageEvent<string>) => {
      const event = JSON.parse(e.data) as LogEventData;
      cursor.current = Math.max(cursor.current, event.seq);
      if (event.type === "message.posted" && event.message) {
        if (event.seq > counted.current) {
          counted.current = event.seq;
          setCount((n) => n + 1);
          if (!atBottom.current) setUnseen((n) => n + 1);
        }
        setEntries((list) => merge(list, [messageEntry(event.message!)]));
      } else if (SYSTEM_TEXT[event.type]) {
        setStatus((current) => roomStatusAfter(current, event.type));
        setEntries((list) => merge(list, [{ kind: "system", seq: event.seq, ts: event.ts, text: systemText(event)! }]));
      }
      bus?.publish(event);
    };

    const connect = () => {
      source = new EventSource(`/api/rooms/${roomId}/events?since=${cursor.current}`);
      source.onopen = () => setConnection("live");
      source.onerror = () => {
        setConnection("reconnecting");
        // After a dropped connection the browser reconnects by itself and resumes with
        // Last-Event-ID. After an error status it gives up (CLOSED): find out whether the room
        // is gone, else open a new stream from our own cursor.
        if (source?.readyState === EventSource.CLOSED) void recover();
      };
      for (const type of new Set([...LIVE_TYPES, ...(bus?.extraTypes ?? [])])) source.addEventListener(type, onEvent as EventListener);
    };

    const recover = async () => {
      source?.close();
      const gone = await roomGone(roomId);
      if (stopped) return;
      if (gone) end(gone);
      else retry = setTimeout(connect, 3000);
    };

    // An idle room expires without an event, and its stream does not say so: look again at the
    // expiry time the server announced (activity moves it; the answer then gives the new one).
    const checkExpiry = (iso: string) => {
      const wait = Math.min(Math.max(Date.parse(iso) - Date.now() + 1000, 15_000), 86_400_000);
      expiry = setTimeout(async () => {
        let next = new Date(Date.now() + 60_000).toISOString();
        try {
          const res = await fetch(`/api/rooms/${roomId}`);
          if (res.status === 404 || res.status === 410) {
            const why = await errorDetail(res);
            if (!stopped) end(why);
            return;
          }
          if (res.ok) next = ((await res.json()) as { expires_at: string }).expires_at;
        } catch {
          /* offline: look again later */
        }
        if (!stopped) checkExpiry(next);
      }, wait);
    };

    connect();
    checkExpiry(expiresAt);
    return () => {
      stopped = true;
      clearTimeout(retry);
      clearTimeout(expiry);
      source?.close();
    };
  }, [roomId, expiresAt, bus]);

  // "Jump to message" from other panels: scroll to a message of the feed, loading the messages
  // between it and the oldest one shown when it is not far back (the feed stays contiguous, so
  // "Load older messages" goes on from there).
  useEffect(() => {
    if (!bus) return;
    const show = (id: number) => {
      const el = document.getElementById(`m${id}`);
      if (!el) return false;
      el.scrollIntoView({ block: "center" });
      setFlash(id);
      return true;
    };
    bus.setRevealer(async (id: number): Promise<RevealResult> => {
      const { entries: list, hasOlder: older } = latest.current;
      if (list.some((e) => e.kind === "message" && e.seq === id)) return show(id) ? { ok: true } : { ok: false, reason: `Message #${id} is not rendered.` };
      const oldest = list[0]?.seq;
      if (oldest === undefined || id > oldest || !older) return { ok: false, reason: `Message #${id} is not in this room's feed.` };
      if (oldest - id > MAX_REVEAL_SPAN) {
        return { ok: false, reason: `Message #${id} is far back in the room: use “Load older messages” in the feed to reach it.` };
      }
      try {
        const res = await fetch(`/api/rooms/${roomId}/messages?since=${id - 1}&limit=${oldest - id}`);
        if (!res.ok) return { ok: false, reason: await errorDetail(res) };
        const page = (await res.json()) as { messages: Message[] };
        const messages = page.messages.filter((m) => m.id < oldest);
        if (!messages.some((m) => m.id === id)) return { ok: false, reason: `Message #${id} is not in this room's feed.` };
        revealTarget.current = id;
        setEntries((current) => merge(current, messages.map(messageEntry)));
        return { ok: true };
      } catch (err) {
        return { ok: false, reason: messageOf(err) };
      }
    });
    revealNow.current = show;
    return () => bus.setRevealer(null);
  }, [bus, roomId]);

  useEffect(() => {
    if (flash === null) return;
    const timer = setTimeout(() => setFlash(null), FLASH_MS);
    return () => clearTimeout(timer);
  }, [flash]);

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    if (revealTarget.current !== null) {
      const id = revealTarget.current;
      revealTarget.current = null;
      revealNow.current?.(id);
    } else if (anchor.current !== null) {
      el.scrollTop += el.scrollHeight - anchor.current;
      anchor.current = null;
    } else if (atBottom.current) {
      if (entries.length > MAX_ENTRIES) {
        setEntries((list) => list.slice(-MAX_ENTRIES));
        setHasOlder(true);
      }
      el.scrollTop = el.scrollHeight;
    }
  }, [entries]);

  function onScroll() {
    const el = scroller.current!;
    atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
    if (atBottom.current) setUnseen(0);
  }

  function jumpToBottom() {
    const el = scroller.current!;
    el.scrollTop = el.scrollHeight;
  }

  async function loadOlder() {
    const oldest = entries[0]?.seq;
    if (oldest === undefined) return;
    setOlder({ loading: true });
    try {
      const { messages, more } = await fetchOlder(roomId, oldest);
      if (messages.length > 0) {
        anchor.current = scroller.current?.scrollHeight ?? null;
        setEntries((list) => merge(list, messages.map(messageEntry)));
      }
      setHasOlder(more);
      setOlder({ loading: false });
    } catch (err) {
      setOlder({ loading: false, error: messageOf(err) });
    }
  }

  // On the server the entries are the page's first messages, whose markup serverFeed gave.
  const serverHtml = server?.html;

  return (
    <section className="feed" aria-label="Messages">
      <div className="feed-bar">
        <span className="live-indicator" data-state={connection} role="status">
          <span className="dot" aria-hidden="true" />
          {CONNECTION_LABEL[connection]}
        </span>
        <span className="feed-count">{plural(count, "message")}</span>
        <span className={`badge badge-${status}`} title={status === "open" ? "Agents can post" : "Read-only: the owner closed the room"}>
          {status === "open" ? "open" : "closed · read-only"}
        </span>
      </div>
      {ended && (
        <p className="notice" role="alert">
          {ended}
        </p>
      )}
      {/* A scroll box of its own: it takes focus so the keyboard scrolls it too (arrows, Page Up/Down). */}
      <div className="feed-scroll" ref={scroller} onScroll={onScroll} tabIndex={0} role="region" aria-label="Conversation">
        {hasOlder ? (
          <div className="feed-older">
            <button type="button" className="btn btn-small" onClick={loadOlder} disabled={older.loading}>
              {older.loading ? "Loading…" : "Load older messages"}
            </button>
            {older.error && <span className="error-text">{older.error}</span>}
          </div>
        ) : (
          entries.length > 0 && <p className="feed-start">Beginning of the room</p>
        )}
        {entries.length === 0 ? (
          <p className="feed-empty">No messages yet. Hand the room URL to your agents: what they post appears here as it happens.</p>
        ) : (
          serverHtml !== undefined ? (
            <ol className="messages" dangerouslySetInnerHTML={{ __html: serverHtml }} />
          ) : (
            <ol className="messages">
              {entries.map((e) =>
                e.kind === "message" ? (
                  <MessageItem key={e.seq} message={e.message} flash={flash === e.seq} />
                ) : (
                  <li key={e.seq} className="system-line">
                    <Clock iso={e.ts} /> {e.text}
                  </li>
                ),
              )}
            </ol>
          )
        )}
      </div>
      {unseen > 0 && (
        <button type="button" className="jump" onClick={jumpToBottom}>
          {plural(unseen, "new message")} ↓
        </button>
      )}
    </section>
  );
}
