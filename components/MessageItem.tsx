"use client";

import { memo } from "react";
import type { Message } from "./types";
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

/** `flash`: briefly highlighted, when another panel jumped to this message. */
export const MessageItem = memo(function MessageItem({ message: m, flash = false }: { message: Message; flash?: boolean }) {
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
          {m.reply_to != null && (
            <a className="reply-to" href={`#m${m.reply_to}`} title={`In reply to message #${m.reply_to}`}>
              ↪ #{m.reply_to}
            </a>
          )}
          <span className="msg-end">
            <span className="msg-id">#{m.id}</span>
            <Clock iso={m.timestamp} />
          </span>
        </div>
        <div className="msg-body">
          <Markdown text={m.text} />
        </div>
      </div>
    </li>
  );
});
