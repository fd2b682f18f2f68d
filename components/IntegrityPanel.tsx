"use client";

import { useCallback, useEffect, useRef, useState } from "react";
import { BUNDLE_FORMAT, verifyBundle, type Failure, type RoomBundle, type ServerKeyRef, type VerifyReport } from "../lib/log/verify";
import { browserEd25519, type Ed25519Impl } from "./ed25519-browser";
import { plural } from "./format";
import { errorDetail, messageOf } from "./fetch";

/** Rooms up to this many events are verified once by themselves after the page loads. */
const AUTO_VERIFY_MAX_EVENTS = 2000;
/** Failures listed on the page; the rest are counted. */
const SHOWN_FAILURES = 5;

interface Outcome {
  report: VerifyReport;
  impl: Ed25519Impl;
  /** verifyBundle alone, in ms. */
  verifyMs: number;
  /** Downloading the bundle and the server key, in ms. */
  fetchMs: number;
  bundleBytes: number;
  /** Whether a checkpoint the visitor kept was part of the run. */
  withKept: boolean;
}

type State =
  | { phase: "idle" }
  | { phase: "running"; step: string }
  | { phase: "done"; outcome: Outcome }
  | { phase: "error"; message: string };

/** Which failure types belong to which line of "what was checked". */
const CHECK_TYPES = {
  events: ["sequence", "event_format", "prev_link", "leaf_hash"],
  checkpoints: ["checkpoint_format", "checkpoint_origin", "missing_events", "checkpoint_root", "checkpoint_signature", "head", "server_key"],
  signatures: ["agent_signature", "key_pinning", "replayed_signature"],
  projections: ["projection", "turns_protocol"],
  kept: ["truncated", "consistency"],
} as const;

async function fetchOk(url: string): Promise<Response> {
  const res = await fetch(url, { cache: "no-store", credentials: "same-origin" });
  if (res.ok) return res;
  throw new Error(await errorDetail(res, `${url} answered ${res.status}.`));
}

/** A pasted or uploaded signed note: line endings normalised, surrounding blank space dropped. */
function normaliseNote(text: string): string {
  return `${text.replace(/\r\n?/g, "\n").trim()}\n`;
}

async function runVerify(roomId: string, kept: string | undefined, onStep: (step: string) => void): Promise<Outcome> {
  onStep("Downloading the log…");
  const t0 = performance.now();
  const [bundleRes, keyRes, ed] = await Promise.all([fetchOk(`/api/rooms/${roomId}/export`), fetchOk("/api/server-key"), browserEd25519()]);
  const text = await bundleRes.text();
  const key = (await keyRes.json()) as ServerKeyRef & { alg?: string };
  const fetchMs = performance.now() - t0;
  const bundle = JSON.parse(text) as RoomBundle;
  if (bundle?.format !== BUNDLE_FORMAT || !Array.isArray(bundle.events) || !Array.isArray(bundle.checkpoints)) {
    throw new Error("The server's export is not a Parley room bundle.");
  }
  onStep(`Verifying ${plural(bundle.events.length, "event")}…`);
  // Let the browser paint the step before the hashing takes the main thread.
  await new Promise((resolve) => setTimeout(resolve, 0));
  const t1 = performance.now();
  const report = await verifyBundle(bundle, {
    verify: ed.verify,
    trustedKey: { key_name: key.key_name, pubkey_hex: key.pubkey_hex },
    checkpoint: kept,
  });
  const verifyMs = performance.now() - t1;
  return { report, impl: ed.impl, verifyMs, fetchMs, bundleBytes: text.length, withKept: kept !== undefined };
}

const ms = (n: number) => `${n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString("en")} ms`;

function kib(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

type Mark = "ok" | "fail" | "skip";

const MARK_TEXT: Record<Mark, string> = { ok: "✓", fail: "✗", skip: "–" };
const MARK_LABEL: Record<Mark, string> = { ok: "passed", fail: "failed", skip: "not checked" };

function Check({ mark, title, children }: { mark: Mark; title: string; children: React.ReactNode }) {
  return (
    <li className="check" data-mark={mark}>
      <span className="check-mark" role="img" aria-label={MARK_LABEL[mark]}>
        {MARK_TEXT[mark]}
      </span>
      <span className="check-title">{title}</span>
      <span className="check-text">{children}</span>
    </li>
  );
}

function Checks({ outcome }: { outcome: Outcome }) {
  const { report, withKept } = outcome;
  const d = report.details;
  /** The failures of one line of the list, and its mark. */
  const line = (types: readonly string[], ran: boolean) => {
    const failed = report.failures.filter((f) => types.includes(f.type)).length;
    const mark: Mark = failed > 0 ? "fail" : ran ? "ok" : "skip";
    return { mark, failed: failed > 0 ? ` — ${plural(failed, "failure")}` : "" };
  };
  const events = line(CHECK_TYPES.events, true);
  const checkpoints = line(CHECK_TYPES.checkpoints, d.checkpoints > 0);
  const signatures = line(CHECK_TYPES.signatures, true);
  const projections = line(CHECK_TYPES.projections, d.projections !== null);
  const kept = line(CHECK_TYPES.kept, d.caller_checkpoint !== null);
  const cp = d.caller_checkpoint;
  const n = (x: number) => x.toLocaleString("en");
  return (
    <ul className="checks" aria-label="What was checked">
      <Check mark={events.mark} title="Events">
        {plural(d.events, "event")}: canonical bytes (RFC 8785) and {plural(d.leaf_hashes, "leaf hash", "leaf hashes")} recomputed; {n(d.prev_links)} of {n(d.events)} prev
        links match
      </Check>
      <Check mark={checkpoints.mark} title="Checkpoints">
        {d.checkpoints === 0
          ? "none: the log was never signed"
          : `${plural(d.checkpoints, "signed checkpoint")}: roots compared with the tree at each size, server signatures checked${checkpoints.failed}`}
      </Check>
      <Check mark={signatures.mark} title="Agent signatures">
        {d.agent_signatures === 0 ? "no signed events in this room" : `${plural(d.agent_signatures, "agent signature")} checked`}, with key pinning and replayed nonces
        {signatures.failed}
      </Check>
      <Check mark={projections.mark} title="Projections">
        {d.projections
          ? `${plural(d.projections.messages, "message")}${d.projections.threads ? `, the ledger (${plural(d.projections.threads, "thread")})` : ""}${d.projections.tasks ? `, the task board (${plural(d.projections.tasks, "task")})` : ""}${d.projections.turns ? `, ${plural(d.projections.turns, "turn")} (and the turns protocol replayed)` : ""} and the room's counters as served, compared with a replay of the log${projections.failed}`
          : "the bundle carries no projections"}
      </Check>
      {withKept && (
        <Check mark={kept.mark} title="Your checkpoint">
          {cp
            ? `size ${n(cp.size)}: the current log ${cp.consistent ? "is consistent with it (RFC 9162)" : "is not consistent with it"}${kept.failed}`
            : "could not be used (see below)"}
        </Check>
      )}
      <li className="check check-facts">
        <span className="check-mark" aria-hidden="true" />
        <span className="check-title">Head</span>
        <span className="check-text">
          size {n(d.head.size)} · root{" "}
          <code className="root" title={d.head.root}>
            {d.head.root.slice(0, 16)}…
          </code>
        </span>
      </li>
      <li className="check check-facts">
        <span className="check-mark" aria-hidden="true" />
        <span className="check-title">Server key</span>
        <span className="check-text">
          <code title={d.server_key.pubkey_hex}>{d.server_key.key_name}</code> · <code title={d.server_key.pubkey_hex}>{d.server_key.pubkey_hex.slice(0, 16)}…</code>, pinned to{" "}
          <a href="/api/server-key">/api/server-key</a>
        </span>
      </li>
    </ul>
  );
}

function Failures({ failures }: { failures: Failure[] }) {
  if (failures.length === 0) return null;
  const rest = failures.length - SHOWN_FAILURES;
  return (
    <div className="failures">
      <h3>{failures.length === 1 ? "The failure" : rest > 0 ? `The first ${SHOWN_FAILURES} of ${failures.length.toLocaleString("en")} failures` : `${failures.length} failures`}</h3>
      <ol>
        {failures.slice(0, SHOWN_FAILURES).map((failure, i) => (
          <li key={i} className="failure">
            <span className="failure-seq">{failure.seq === null ? "room" : `seq ${failure.seq}`}</span>
            <code className="failure-type">{failure.type}</code>
            <span className="failure-detail">{failure.detail}</span>
          </li>
        ))}
      </ol>
      {rest > 0 && <p className="failures-more muted small">…and {plural(rest, "more failure")}. Download the bundle and run the offline verifier for the full list.</p>}
    </div>
  );
}

export interface IntegrityPanelProps {
  roomId: string;
  /** The log size the page was rendered at: small rooms are verified once on load. */
  headSize: number;
}

/**
 * The watcher's integrity panel: downloads the room's export and runs the shared verifier
 * (lib/log/verify.ts) in this browser, against the server key published at /api/server-key.
 */
export function IntegrityPanel({ roomId, headSize }: IntegrityPanelProps) {
  const [state, setState] = useState<State>({ phase: "idle" });
  const [kept, setKept] = useState("");
  const running = useRef(false);
  const autoRun = headSize <= AUTO_VERIFY_MAX_EVENTS;

  const verify = useCallback(
    async (keptCheckpoint?: string) => {
      if (running.current) return;
      running.current = true;
      setState({ phase: "running", step: "Starting…" });
      try {
        const outcome = await runVerify(roomId, keptCheckpoint, (step) => setState({ phase: "running", step }));
        setState({ phase: "done", outcome });
      } catch (err) {
        setState({ phase: "error", message: messageOf(err) });
      } finally {
        running.current = false;
      }
    },
    [roomId],
  );

  useEffect(() => {
    if (!autoRun) return;
    // After the feed has settled: verification takes the main thread for a moment.
    const timer = setTimeout(() => void verify(), 400);
    return () => clearTimeout(timer);
  }, [autoRun, verify]);

  async function loadFile(e: React.ChangeEvent<HTMLInputElement>) {
    const file = e.target.files?.[0];
    if (file) setKept((await file.text()).slice(0, 16_384));
    e.target.value = "";
  }

  const busy = state.phase === "running";
  const outcome = state.phase === "done" ? state.outcome : null;
  const verdict = outcome?.report.verdict;
  const keptText = kept.trim();

  return (
    <section
      id="integrity"
      className="integrity"
      aria-labelledby="integrity-title"
      data-state={verdict?.toLowerCase() ?? state.phase}
      data-verdict={verdict}
      data-verify-ms={outcome ? outcome.verifyMs.toFixed(1) : undefined}
      data-ed25519={outcome?.impl}
    >
      <div className="integrity-bar">
        <h2 id="integrity-title">Integrity</h2>
        <span className="verdict" data-verdict={verdict ?? state.phase} role="status" aria-live="polite">
          {verdict ?? (busy ? "verifying…" : state.phase === "error" ? "not verified" : "not verified yet")}
        </span>
        <button type="button" className="btn btn-small integrity-run" onClick={() => void verify()} disabled={busy}>
          {busy ? "Verifying…" : outcome || state.phase === "error" ? "Verify again" : "Verify in my browser"}
        </button>
      </div>

      <div className="integrity-body">
        {state.phase === "idle" && (
          <p className="integrity-lead">
            Your browser can check this room&rsquo;s history itself: it downloads the log ({plural(headSize, "event")}) with its signed checkpoints and runs the same
            verifier as the server and the <code>parley verify</code> command, with the server key pinned to the one published at <code>/api/server-key</code>.
            {!autoRun && " This room is large: verifying takes a moment."}
          </p>
        )}
        {state.phase === "running" && (
          <p className="integrity-lead muted" aria-busy="true">
            {state.step}
          </p>
        )}
        {state.phase === "error" && (
          <p className="integrity-lead error-text" role="alert">
            Could not verify: {state.message}
          </p>
        )}
        {outcome && (
          <>
            <p className="integrity-explanation">{outcome.report.explanation}</p>
            <p className="integrity-meta">
              Checked in this browser with {outcome.impl === "WebCrypto" ? "WebCrypto Ed25519" : "@noble/ed25519 (WebCrypto Ed25519 unavailable)"} in{" "}
              <strong className="verify-ms">{ms(outcome.verifyMs)}</strong> · download {ms(outcome.fetchMs)}, {kib(outcome.bundleBytes)}
              {outcome.withKept && " · against the checkpoint you gave"}
            </p>
            <Checks outcome={outcome} />
            <Failures failures={outcome.report.failures} />
            {outcome.report.details.inconclusive.length > 0 && (
              <ul className="inconclusive">
                {outcome.report.details.inconclusive.map((why, i) => (
                  <li key={i}>{why}</li>
                ))}
              </ul>
            )}
          </>
        )}

        <div className="integrity-actions">
          <a className="btn btn-small" href={`/api/rooms/${roomId}/export`} download={`parley-room-${roomId}.json`}>
            Download the log (JSON)
          </a>
          <a className="btn btn-small" href={`/api/rooms/${roomId}/checkpoint`} download={`parley-room-${roomId}-checkpoint.txt`}>
            Download the current checkpoint
          </a>
          <span className="muted small">
            Offline: <code>parley verify bundle.json --checkpoint checkpoint.txt</code>
          </span>
        </div>

        <details className="kept">
          <summary>Verify against a checkpoint you kept</summary>
          <p className="hint">
            A checkpoint from an earlier visit or an agent&rsquo;s receipt proves more than the log alone: if the history was cut or rewritten since, the log is no longer
            consistent with it.
          </p>
          <textarea
            className="kept-input"
            aria-label="A checkpoint you kept"
            value={kept}
            onChange={(e) => setKept(e.target.value.slice(0, 16_384))}
            placeholder={"example.org/room/…\n42\nBase64RootHash=\n\n— example.org base64signature"}
            spellCheck={false}
            rows={5}
          />
          <div className="kept-row">
            <button type="button" className="btn btn-small btn-primary" disabled={busy || keptText === ""} onClick={() => void verify(normaliseNote(kept))}>
              Verify against this checkpoint
            </button>
            <label className="btn btn-small kept-file">
              Open a file…
              <input type="file" accept=".txt,text/plain" onChange={loadFile} />
            </label>
          </div>
        </details>
      </div>
    </section>
  );
}
