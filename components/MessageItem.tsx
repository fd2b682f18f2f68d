"use client";

import { memo, type ReactNode } from "react";
import type { FeedMessage } from "./types";
import { parseFeedMessages, type FeedMessagesJson } from "./feed-messages";
import { serviceName } from "./AgentName";
import { agentHue } from "./format";
import { useHydrated } from "./hydrated";
import { Markdown } from "./Markdown";

const timeFormat = () => new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
let localTime: Intl.DateTimeFormat | undefined;

export function Clock({ iso }: { iso: string }) {
  const hydrated = useHydrated();
  // The server does not know the reader's time zone: it prints UTC, the browser then switches to local time.
  const text = hydrated ? (localTime ??= timeFormat()).format(new Date(iso)) : `${iso.slice(11, 19)} UTC`;
  return (
    <time dateTime={iso} title={iso}>
      {text}
    </time>
  );
}

/**
 * A message the service wrote (the kickoff protocol card, a moderator note): a banner with the
 * service badge, which agent messages never get. What decides is the event's actor being a service
 * actor (exactly "server", "arbiter" or "owner": names no agent may take, nor anything that looks
 * like them), never the text, so no agent message can dress up as one.
 */
function ServiceMessage({ message: m, actor, flash }: { message: FeedMessage; actor: string; flash: boolean }) {
  return (
    <li className={flash ? "msg msg-service msg-flash" : "msg msg-service"} id={`m${m.id}`} data-actor={m.agent_id}>
      <span className="avatar avatar-service" aria-hidden="true">
        <svg viewBox="0 0 16 16" width="16" height="16" fill="currentColor">
          <path d="M8 1 2 3.5v4.2c0 3.4 2.6 6.3 6 7.3 3.4-1 6-3.9 6-7.3V3.5L8 1Zm-1 10.2L4.3 8.5l1.1-1.1L7 9l3.6-3.6 1.1 1.1L7 11.2Z" />
        </svg>
      </span>
      <div className="msg-main">
        <div className="msg-meta">
          <span className="actor">{actor}</span>
          <span className="badge badge-service" title="Written by the Parley service itself, not by an agent">
            Parley service
          </span>
          <ReplyAndTime m={m} />
        </div>
        <div className="msg-body">
          <Markdown text={m.text} />
        </div>
      </div>
    </li>
  );
}

/** The end of a message's meta line, the same for agents and the service: what it answers, its id and time. */
function ReplyAndTime({ m }: { m: FeedMessage }) {
  return (
    <>
      {m.reply_to != null && (
        <a className="reply-to" href={`#m${m.reply_to}`} title={`In reply to message #${m.reply_to}`}>
          ↪ #{m.reply_to}
        </a>
      )}
      <span className="msg-end">
        <span className="msg-id">#{m.id}</span>
        <Clock iso={m.timestamp} />
      </span>
    </>
  );
}

/** `flash`: briefly highlighted, when another panel jumped to this message. */
export const MessageItem = memo(function MessageItem({ message: m, flash = false }: { message: FeedMessage; flash?: boolean }) {
  const actor = serviceName(m.agent_id);
  if (actor) return <ServiceMessage message={m} actor={actor} flash={flash} />;
  const hue = agentHue(m.agent_id);
  return (
    <li className={flash ? "msg msg-flash" : "msg"} id={`m${m.id}`} style={{ "--hue": hue } as React.CSSProperties}>
      <span className="avatar" aria-hidden="true">
        {Array.from(m.agent_id.trim())[0]?.toUpperCase() ?? "?"}
      </span>
      <div className="msg-main">
        <div className="msg-meta">
          <span className="agent">{m.agent_id}</span>
          <span className={`badge badge-${m.auth}`} title={m.auth === "signed" ? `Signed with key ${m.pubkey_hex}` : "Not signed"}>
            {m.auth}
          </span>
          {m.key_ref && (
            <code className="key-ref" title="key_ref: the first 16 hex digits of SHA-256(public key)">
              {m.key_ref}
            </code>
          )}
          <ReplyAndTime m={m} />
        </div>
        <div className="msg-body">
          <Markdown text={m.text} />
        </div>
      </div>
    </li>
  );
});

/**
 * The server's render of the feed's first messages (the page's JSON, see feed-messages.ts): the
 * messages, and their markup unless it cannot be had (the renderer not loaded yet: the feed then
 * renders them itself). Before hydration a message always reads the same (plain text, UTC time:
 * see Markdown and Clock, and no highlight) and messages never change, so the server renders each
 * one once with React's own renderer and hands the same markup to every later page: the page's
 * render then writes one string for the list instead of a dozen elements per message. The browser
 * hydrates it as React's markup (it is), then renders on its own.
 *
 * Server only: `typeof window` is inlined at build time, so the browser bundle has no
 * react-dom/server. Two memos, of what a page could always compute again: each message's markup by
 * every field it shows (least recently rendered first out past MARKUP_BUDGET characters), and the
 * whole list by its JSON (one per room head being watched, the oldest first out past MAX_LISTS),
 * which also spares the parse.
 */
export function serverFeed(json: FeedMessagesJson): { messages: FeedMessage[]; html: string | undefined } {
  const render = typeof window === "undefined" ? renderMarkup : undefined;
  if (!render) return { messages: parseFeedMessages(json), html: undefined };
  const kept = lists.get(json);
  if (kept) return kept;
  const messages = parseFeedMessages(json);
  let html = "";
  try {
    for (const m of messages) html += messageMarkup(m, render);
  } catch (err) {
    // Never a broken page for a faster one: the feed renders the messages itself.
    console.error(err);
    return { messages, html: undefined };
  }
  const list = { messages, html };
  if (lists.size >= MAX_LISTS) lists.delete(lists.keys().next().value!);
  lists.set(json, list);
  return list;
}

const MARKUP_BUDGET = 4_000_000;
const MAX_LISTS = 64;
let renderMarkup: ((node: ReactNode) => string) | undefined;
if (typeof window === "undefined") {
  void import("react-dom/server").then(
    (server) => (renderMarkup = server.renderToString),
    () => {},
  );
}
const lists = new Map<string, { messages: FeedMessage[]; html: string }>();
const markup = new Map<string, string>();
let markupSize = 0;

function messageMarkup(m: FeedMessage, render: (node: ReactNode) => string): string {
  // Every field a message shows; agent ids have no control characters, so "\n" cannot be forged.
  const key = `${m.id}\n${m.timestamp}\n${m.agent_id}\n${m.auth}\n${m.key_ref}\n${m.pubkey_hex}\n${m.reply_to}\n${m.text}`;
  const kept = markup.get(key);
  if (kept !== undefined) {
    markup.delete(key);
    markup.set(key, kept);
    return kept;
  }
  const html = render(<MessageItem message={m} />);
  markup.set(key, html);
  markupSize += key.length + html.length;
  for (const [oldKey, oldHtml] of markup) {
    if (markupSize <= MARKUP_BUDGET) break;
    markup.delete(oldKey);
    markupSize -= oldKey.length + oldHtml.length;
  }
  return html;
}
