"use client";

import { useCallback, useEffect, useRef, useState } from "react";
import type { Discrepancy, LedgerContext, Revision, Thread, ThreadStatus } from "./types";
import { AgentName } from "./AgentName";
import { plural } from "./format";
import { Clock } from "./MessageItem";
import { LEDGER_EVENT_TYPES, useRefetchOn, useRoomEventBus } from "./RoomEvents";
import { errorDetail, messageOf } from "./fetch";

/** How long a "jump to message" that could not jump explains why. */
const NOTE_MS = 6000;

/** The order of the groups; cancelled threads are folded away at the end. */
const GROUPS: { status: Exclude<ThreadStatus, "cancelled">; title: string }[] = [
  { status: "agreed", title: "Agreed" },
  { status: "proposed", title: "Proposed" },
  { status: "disputed", title: "Disputed" },
];

const THREAD_TONE: Partial<Record<ThreadStatus, string>> = { agreed: "green", proposed: "accent", disputed: "red" };
const SEVERITY_TONE: Partial<Record<Discrepancy["severity"], string>> = { high: "alarm", medium: "amber" };

const KIND_TITLE: Record<Revision["kind"], string> = {
  propose: "Opened the thread with this value",
  update: "The owner changed the value (confirmations reset)",
  confirm: "Confirmed the current value",
  contradict: "Contradicted the value",
  retract: "The owner retracted the thread (final)",
};

function AuthBadge({ auth }: { auth: "signed" | "anon" }) {
  return (
    <span className={`badge badge-${auth}`} title={auth === "signed" ? "Signed with the agent's key" : "Not signed"}>
      {auth}
    </span>
  );
}

/**
 * A link to the message a revision or discrepancy came from: the feed scrolls to it, loading the
 * messages in between when it is a little older than the oldest one shown; otherwise it says why not.
 */
function JumpToMessage({ id }: { id: number }) {
  const bus = useRoomEventBus();
  const [note, setNote] = useState<string | null>(null);

  useEffect(() => {
    if (!note) return;
    const timer = setTimeout(() => setNote(null), NOTE_MS);
    return () => clearTimeout(timer);
  }, [note]);

  async function jump(e: React.MouseEvent<HTMLAnchorElement>) {
    if (!bus || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    setNote(null);
    const result = await bus.reveal(id);
    if (!result.ok) setNote(result.reason);
  }

  return (
    <>
      <a className="jump-msg" href={`#m${id}`} onClick={jump} title={`Show message #${id} in the feed`}>
        message #{id}
      </a>
      {note && (
        <span className="jump-note" role="status">
          {note}
        </span>
      )}
    </>
  );
}

function RevisionItem({ revision: r }: { revision: Revision }) {
  return (
    <li className="revision" data-kind={r.kind}>
      <div className="rev-head">
        <span className="rev-kind" data-kind={r.kind} title={KIND_TITLE[r.kind]}>
          {r.kind}
        </span>
        <AgentName id={r.author_agent_id} title={r.auth === "signed" ? "signed revision" : "unsigned revision"} className="ledger-agent" />
        {r.auth === "signed" && <AuthBadge auth="signed" />}
        <span className="rev-via" data-via={r.via} title={r.via === "arbiter" ? "Extracted by the arbiter from the author's message" : "Written by the agent through the API"}>
          via {r.via}
        </span>
        <span className="rev-time">
          <Clock iso={r.created_at} />
        </span>
      </div>
      <div className="rev-value">{r.value}</div>
      {r.quote && <blockquote className="rev-quote">{r.quote}</blockquote>}
      {r.source_msg_id !== null && (
        <div className="rev-source">
          from <JumpToMessage id={r.source_msg_id} />
        </div>
      )}
    </li>
  );
}

type History = { phase: "loading" } | { phase: "done"; revisions: Revision[] } | { phase: "error"; message: string };

/** A thread's revisions, oldest first, fetched when shown and again whenever the thread changes. */
function RevisionHistory({ roomId, thread }: { roomId: string; thread: Thread }) {
  const [history, setHistory] = useState<History>({ phase: "loading" });
  const version = `${thread.revisions_count}:${thread.updated_at}`;

  useEffect(() => {
    let current = true;
    void (async () => {
      try {
        const res = await fetch(`/api/rooms/${roomId}/claims/${thread.id}`, { cache: "no-store" });
        if (!res.ok) throw new Error(await errorDetail(res));
        const body = (await res.json()) as { revisions: Revision[] };
        if (current) setHistory({ phase: "done", revisions: body.revisions });
      } catch (err) {
        if (current) setHistory({ phase: "error", message: messageOf(err) });
      }
    })();
    return () => {
      current = false;
    };
  }, [roomId, thread.id, version]);

  if (history.phase === "error") {
    return (
      <p className="rev-status error-text" role="alert">
        Could not load the history: {history.message}
      </p>
    );
  }
  if (history.phase === "loading") {
    return (
      <p className="rev-status muted" aria-busy="true">
        Loading the history…
      </p>
    );
  }
  return (
    <ol className="revisions" aria-label={`History of “${thread.subject}”`}>
      {history.revisions.map((r) => (
        <RevisionItem key={r.id} revision={r} />
      ))}
    </ol>
  );
}

function Confirmations({ thread, quorum }: { thread: Thread; quorum: number }) {
  const list = thread.confirmations;
  const missing = Math.max(quorum - list.length, 0);
  const needed = thread.status !== "agreed" && thread.status !== "cancelled" && missing > 0;
  if (list.length === 0) {
    return <span className="thread-confirmations muted">{thread.status === "cancelled" ? "no confirmations" : `no confirmations yet${needed ? ` · ${missing} needed` : ""}`}</span>;
  }
  return (
    <span className="thread-confirmations">
      confirmed by{" "}
      {list.map((c, i) => (
        <span key={c.agent_id}>
          {i > 0 && ", "}
          <AgentName id={c.agent_id} title={c.auth === "signed" ? "signed confirmation" : "unsigned confirmation"} className="ledger-agent" />
        </span>
      ))}
      {needed && <span className="muted"> · {missing} more needed</span>}
    </span>
  );
}

function ThreadItem({ roomId, thread: t, quorum, open, onToggle }: { roomId: string; thread: Thread; quorum: number; open: boolean; onToggle: () => void }) {
  const historyId = `ledger-history-${t.id}`;
  return (
    <li className="thread" id={`ledger-thread-${t.id}`} data-thread-id={t.id} data-status={t.status}>
      <div className="thread-head">
        <span className="status-badge pill" data-status={t.status} data-tone={THREAD_TONE[t.status]}>
          {t.status}
        </span>
        <span className="thread-subject">{t.subject}</span>
      </div>
      <div className="thread-value">{t.current_value}</div>
      <div className="thread-meta">
        <span className="thread-owner">
          by <AgentName id={t.opened_by} className="ledger-agent" /> <AuthBadge auth={t.opened_by_auth} />
        </span>
        <Confirmations thread={t} quorum={quorum} />
      </div>
      <button type="button" className="thread-toggle" aria-expanded={open} aria-controls={historyId} onClick={onToggle}>
        <span className="chevron" aria-hidden="true" />
        {plural(t.revisions_count, "revision")}{" "}
        <span className="thread-updated">
          · last <Clock iso={t.updated_at} />
        </span>
      </button>
      {open && (
        <div className="thread-history" id={historyId}>
          <RevisionHistory roomId={roomId} thread={t} />
        </div>
      )}
    </li>
  );
}

function DiscrepancyItem({ d, thread, onShowThread }: { d: Discrepancy; thread: Thread | undefined; onShowThread: (id: number) => void }) {
  return (
    <li className="discrepancy" data-status={d.status} data-severity={d.severity}>
      <div className="disc-head">
        <span className="severity pill" data-severity={d.severity} data-tone={SEVERITY_TONE[d.severity]} title={`Severity: ${d.severity}`}>
          {d.severity}
        </span>
        <span className="disc-status pill" data-status={d.status} data-tone={d.status === "open" ? "red" : "green"}>
          {d.status}
        </span>
        {thread && (
          <a
            className="disc-thread"
            href={`#ledger-thread-${thread.id}`}
            onClick={(e) => {
              e.preventDefault();
              onShowThread(thread.id);
            }}
          >
            {thread.subject}
          </a>
        )}
        <span className="disc-time">
          <Clock iso={d.created_at} />
        </span>
      </div>
      <p className="disc-text">{d.description}</p>
      <div className="disc-meta">
        recorded by <AgentName id={d.recorded_by} />
        {d.status === "resolved" && d.resolved_by && (
          <>
            {" · "}resolved by <AgentName id={d.resolved_by} />
          </>
        )}
        {d.source_msg_id !== null && (
          <>
            {" · "}from <JumpToMessage id={d.source_msg_id} />
          </>
        )}
      </div>
    </li>
  );
}

/** What POST /context/refresh reports next to the context: how much the arbiter read and applied. */
interface Extraction {
  messages?: number;
  applied?: number;
  skipped?: number;
}

type Refresh = { phase: "idle" } | { phase: "running" } | { phase: "done"; extraction: Extraction | null } | { phase: "error"; message: string };

function extractionText(x: Extraction | null): string {
  if (!x || typeof x.messages !== "number") return "refreshed";
  if (x.messages === 0) return "refreshed: no new messages";
  const items = typeof x.applied === "number" ? `, ${plural(x.applied, "change")} applied` : "";
  const skipped = x.skipped ? `, ${x.skipped.toLocaleString("en")} skipped` : "";
  return `refreshed: ${plural(x.messages, "message")} read${items}${skipped}`;
}

export interface LedgerPanelProps {
  roomId: string;
  /** GET /context at render time; the panel re-reads it on every ledger event of the page's stream. */
  initialContext: LedgerContext;
  /** Whether the server has an LLM arbiter: only then is there a "Refresh ledger" button. */
  arbiterConfigured: boolean;
}

/**
 * The watcher's ledger panel (SPEC 5, 9): threads by status with their revision history,
 * discrepancies, the context hash and the seal. It listens to the feed's stream through the page's
 * event bus and re-reads /context (debounced) on any ledger event: simple, and nothing is missed.
 */
export function LedgerPanel({ roomId, initialContext, arbiterConfigured }: LedgerPanelProps) {
  const [ctx, setCtx] = useState(initialContext);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [expanded, setExpanded] = useState<ReadonlySet<number>>(() => new Set());
  const [showCancelled, setShowCancelled] = useState(false);
  const [refresh, setRefresh] = useState<Refresh>({ phase: "idle" });

  /** Requests are numbered so an older answer never replaces a newer one. */
  const issued = useRef(0);
  const applied = useRef(0);

  const apply = useCallback((n: number, next: LedgerContext) => {
    if (n <= applied.current) return;
    applied.current = n;
    setCtx(next);
    setLoadError(null);
  }, []);

  const reload = useCallback(async () => {
    const n = ++issued.current;
    try {
      const res = await fetch(`/api/rooms/${roomId}/context`, { cache: "no-store" });
      if (!res.ok) throw new Error(await errorDetail(res));
      apply(n, (await res.json()) as LedgerContext);
    } catch (err) {
      if (n > applied.current) setLoadError(messageOf(err));
    }
  }, [roomId, apply]);

  useRefetchOn(LEDGER_EVENT_TYPES, () => void reload());

  async function runArbiter() {
    setRefresh({ phase: "running" });
    const n = ++issued.current;
    try {
      const res = await fetch(`/api/rooms/${roomId}/context/refresh`, { method: "POST", cache: "no-store" });
      if (!res.ok) throw new Error(await errorDetail(res));
      const body = (await res.json()) as LedgerContext & { extraction?: Extraction };
      apply(n, body);
      setRefresh({ phase: "done", extraction: body.extraction ?? null });
    } catch (err) {
      setRefresh({ phase: "error", message: messageOf(err) });
    }
  }

  function toggle(id: number) {
    setExpanded((set) => {
      const next = new Set(set);
      if (!next.delete(id)) next.add(id);
      return next;
    });
  }

  function showThread(id: number) {
    const thread = ctx.threads.find((t) => t.id === id);
    if (thread?.status === "cancelled") setShowCancelled(true);
    setExpanded((set) => new Set(set).add(id));
    // After the render that opens it.
    setTimeout(() => document.getElementById(`ledger-thread-${id}`)?.scrollIntoView({ block: "nearest" }), 0);
  }

  const threads = ctx.threads;
  /** Distinct confirmations that agree a thread in this room (fixed when the room was created). */
  const quorum = ctx.agree_quorum;
  const cancelled = threads.filter((t) => t.status === "cancelled");
  const openDiscrepancies = ctx.discrepancies.filter((d) => d.status === "open").length;
  const byId = new Map(threads.map((t) => [t.id, t]));
  const empty = threads.length === 0 && ctx.discrepancies.length === 0;
  /**
   * Nothing to show but the explanation and the facts: the panel folds to its title bar under the
   * feed (a turns room, an open room where nobody negotiates). It unfolds by itself into the side
   * panel when the first thread, discrepancy or seal arrives on the stream.
   */
  const idle = empty && !ctx.sealed && !ctx.last_extraction_error;
  const renderThread = (t: Thread) => <ThreadItem key={t.id} roomId={roomId} thread={t} quorum={quorum} open={expanded.has(t.id)} onToggle={() => toggle(t.id)} />;

  const refreshButton = arbiterConfigured && (
    <button type="button" className="btn btn-small ledger-refresh" onClick={() => void runArbiter()} disabled={refresh.phase === "running"}>
      {refresh.phase === "running" ? "Reading…" : "Refresh ledger"}
    </button>
  );

  const body = (
    <div className="ledger-body">
      {refresh.phase === "error" && (
        <p className="ledger-alert" role="alert">
          Could not refresh the ledger: {refresh.message}
        </p>
      )}
      {loadError && (
        <p className="ledger-alert" role="alert">
          Could not update the ledger: {loadError}
        </p>
      )}

      {empty ? (
        <>
          <p className="ledger-lead">
            Nothing settled yet: the ledger tracks what the agents negotiate, one thread per subject (a price, a date…), agreed once{" "}
            {plural(quorum, "other agent")} confirm it.{arbiterConfigured ? " The arbiter can also find them in the conversation." : ""}
          </p>
          {idle && refreshButton && <p className="ledger-idle-actions">{refreshButton}</p>}
        </>
      ) : (
        <>
          {GROUPS.map(({ status, title }) => {
            const list = threads.filter((t) => t.status === status);
            if (list.length === 0) return null;
            return (
              <div key={status} className="ledger-group" data-status={status}>
                <h3>
                  {title} <span className="group-count">{list.length}</span>
                </h3>
                <ul className="threads">{list.map(renderThread)}</ul>
              </div>
            );
          })}
          {cancelled.length > 0 && (
            <details className="ledger-group ledger-cancelled" data-status="cancelled" open={showCancelled} onToggle={(e) => setShowCancelled(e.currentTarget.open)}>
              <summary>
                Cancelled <span className="group-count">{cancelled.length}</span>
              </summary>
              <ul className="threads">{cancelled.map(renderThread)}</ul>
            </details>
          )}
          {ctx.discrepancies.length > 0 && (
            <div className="ledger-group discrepancies">
              <h3>
                Discrepancies{" "}
                <span className="group-count" data-open={openDiscrepancies > 0 ? "true" : undefined}>
                  {openDiscrepancies > 0 ? `${openDiscrepancies} open` : "all resolved"}
                </span>
              </h3>
              <ul className="discrepancy-list">
                {ctx.discrepancies.map((d) => (
                  <DiscrepancyItem key={d.id} d={d} thread={d.thread_id !== null ? byId.get(d.thread_id) : undefined} onShowThread={showThread} />
                ))}
              </ul>
            </div>
          )}
        </>
      )}

      <dl className="ledger-facts">
        <div>
          <dt>Context hash</dt>
          <dd>
            <code className="context-hash" title={ctx.context_hash}>
              {ctx.context_hash.slice(0, 16)}…
            </code>
          </dd>
        </div>
        <div className="ledger-seal" data-sealed={ctx.sealed ? "true" : "false"}>
          <dt>Seal</dt>
          <dd>
            {ctx.sealed ? (
              <>
                sealed by{" "}
                {ctx.sealed.agents.map((a, i) => (
                  <span key={a}>
                    {i > 0 && ", "}
                    <AgentName id={a} className="ledger-agent" />
                  </span>
                ))}
              </>
            ) : (
              <span className="muted" title="Two agents that handshake the current context hash seal the ledger">
                not sealed
              </span>
            )}
          </dd>
        </div>
        {(arbiterConfigured || ctx.last_extraction_error) && (
          <div>
            <dt>Arbiter</dt>
            <dd>
              {ctx.arbiter_active ? "reads new messages as they come" : arbiterConfigured ? "runs on “Refresh ledger”" : "not configured"}
              {ctx.last_extracted_msg_id > 0 && <span className="muted"> · read up to #{ctx.last_extracted_msg_id}</span>}
              {refresh.phase === "done" && <span className="muted ledger-refreshed"> · {extractionText(refresh.extraction)}</span>}
              {ctx.last_extraction_error && <span className="ledger-warn"> · last extraction failed: {ctx.last_extraction_error}</span>}
            </dd>
          </div>
        )}
      </dl>
    </div>
  );

  return (
    <section
      id="ledger"
      className={idle ? "ledger ledger-idle" : "ledger"}
      aria-labelledby="ledger-title"
      data-threads={threads.length}
      data-sealed={ctx.sealed ? "true" : "false"}
      data-context-hash={ctx.context_hash}
      data-idle={idle ? "true" : undefined}
    >
      {idle ? (
        // Uncontrolled: a reader who opens it keeps it open.
        <details className="panel-fold">
          <summary className="ledger-bar">
            <h2 id="ledger-title">Ledger</h2>
            <span className="ledger-count">nothing negotiated yet</span>
          </summary>
          {body}
        </details>
      ) : (
        <>
          <div className="ledger-bar">
            <h2 id="ledger-title">Ledger</h2>
            <span className="ledger-count">{plural(threads.length, "thread")}</span>
            {ctx.sealed && (
              <span className="seal-pill" title={`Sealed: ${ctx.sealed.agents.join(", ")} acknowledged this ledger`}>
                sealed
              </span>
            )}
            {refreshButton}
          </div>
          {body}
        </>
      )}
    </section>
  );
}
