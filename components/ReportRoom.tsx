"use client";

import { useState, type FormEvent } from "react";
import { errorDetail, messageOf } from "./fetch";

const MAX_REASON = 500;

const FOLD = { margin: "20px 0 0", background: "var(--surface)", border: "1px solid var(--border)", borderRadius: "var(--radius)" } as const;
const SUMMARY = { padding: "11px 16px", cursor: "pointer", fontWeight: 600, fontSize: "0.9375rem", color: "var(--muted)" } as const;

type State = { kind: "idle" } | { kind: "sending" } | { kind: "sent" } | { kind: "error"; text: string };

/**
 * "Report this room": a small folded form that tells the operator of this server about a room (or
 * one of its messages) through POST /api/rooms/{id}/report. The owner's alerts webhooks hear of it
 * too; the room's log does not.
 */
export function ReportRoom({ roomId }: { roomId: string }) {
  const [reason, setReason] = useState("");
  const [messageId, setMessageId] = useState("");
  const [state, setState] = useState<State>({ kind: "idle" });

  async function submit(event: FormEvent) {
    event.preventDefault();
    setState({ kind: "sending" });
    const id = messageId.trim();
    try {
      const res = await fetch(`/api/rooms/${roomId}/report`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        // A message number that is not one is sent as typed: the server's answer names the problem.
        body: JSON.stringify({ reason, ...(id ? { message_id: /^\d+$/.test(id) ? Number(id) : id } : {}) }),
      });
      if (!res.ok) throw new Error(await errorDetail(res));
      setReason("");
      setMessageId("");
      setState({ kind: "sent" });
    } catch (err) {
      setState({ kind: "error", text: messageOf(err) });
    }
  }

  return (
    // Drawn like the agent instructions' fold, with its own hook (the stylesheet is not this component's).
    <details className="report-room" style={FOLD}>
      <summary style={SUMMARY}>Report this room</summary>
      <form onSubmit={submit} style={{ padding: "12px 16px 16px" }}>
        <div className="field">
          <div className="label-row">
            <label htmlFor="report-reason">What is wrong here?</label>
            <span className="counter" aria-hidden="true">
              {reason.length}/{MAX_REASON}
            </span>
          </div>
          <textarea
            id="report-reason"
            name="reason"
            required
            maxLength={MAX_REASON}
            value={reason}
            onChange={(e) => setReason(e.target.value)}
            aria-describedby="report-reason-hint"
          />
          <p className="hint" id="report-reason-hint">
            Read by the operator of this server; the room&apos;s owner is told too. Up to {MAX_REASON} characters.
          </p>
        </div>
        <div className="field">
          <label htmlFor="report-message">Message number (optional)</label>
          <input id="report-message" name="message_id" type="text" inputMode="numeric" autoComplete="off" value={messageId} onChange={(e) => setMessageId(e.target.value)} />
        </div>
        {state.kind === "error" && (
          <p className="error-text" role="alert">
            {state.text}
          </p>
        )}
        <p className="hint" role="status">
          {state.kind === "sent" ? "Thank you: the report was sent to the operator." : ""}
        </p>
        <button type="submit" className="btn btn-small" disabled={state.kind === "sending"}>
          {state.kind === "sending" ? "Sending…" : "Send report"}
        </button>
      </form>
    </details>
  );
}
