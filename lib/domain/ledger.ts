/**
 * The negotiation ledger (SPEC 5): threads, revisions, discrepancies and handshakes as a pure
 * reducer over room events, plus the status rules. The services use `decideRevision` before they
 * append; the reducer turns the appended events into projections; the verifier replays the same
 * reducer over the log.
 */
import { canonicalize } from "../log/jcs";
import { bytesToHex, sha256, utf8 } from "../log/bytes";
import type { LogEvent } from "../log/event";
import { z } from "zod";
import { as, defineEvents, seqId, type Feature } from "./event-kind";
import { agentKey, sameAgent } from "./names";

export const AGREE_QUORUM_DEFAULT = 2;

/** The quorum a room was created with: recorded in its room.created event (older rooms: the default). */
export const quorumOf = (created: Pick<LogEvent, "server"> | undefined): number =>
  (created?.server as { agree_quorum?: number } | undefined)?.agree_quorum ?? AGREE_QUORUM_DEFAULT;

export type ThreadStatus = "proposed" | "agreed" | "disputed" | "cancelled";
export type RevisionKind = "propose" | "update" | "confirm" | "contradict" | "retract";
export type Auth = "signed" | "anon";

export interface Revision {
  id: number;
  thread_id: number;
  kind: RevisionKind;
  value: string;
  author_agent_id: string;
  auth: Auth;
  via: "api" | "arbiter";
  source_msg_id: number | null;
  quote: string | null;
  created_at: string;
  seq: number;
}

export interface Thread {
  id: number;
  subject: string;
  subject_key: string;
  current_value: string;
  status: ThreadStatus;
  opened_by: string;
  opened_by_auth: Auth;
  revisions_count: number;
  last_revision: Revision;
  confirmations: { agent_id: string; auth: Auth }[];
  created_at: string;
  updated_at: string;
}

export interface Discrepancy {
  id: number;
  thread_id: number | null;
  description: string;
  severity: "low" | "medium" | "high";
  source_msg_id: number | null;
  recorded_by: string;
  status: "open" | "resolved";
  resolved_by: string | null;
  created_at: string;
  resolved_at: string | null;
}

export interface Handshake {
  id: number;
  agent_id: string;
  context_hash: string;
  auth: Auth;
  pubkey_hex: string | null;
  signature_hex: string | null;
  ts: string | null;
  nonce: string | null;
  created_at: string;
}

export interface Ledger {
  threads: Thread[];
  revisions: Revision[];
  discrepancies: Discrepancy[];
  handshakes: Handshake[];
}

/** Who wrote a revision: the agent, how it authenticated, and the key it signed with (if any). */
export interface Author {
  agent_id: string;
  auth: Auth;
  pubkey_hex: string | null;
}

/** kebab-case of the given key or the subject, at most 60 characters. */
export function subjectKey(subject: string, key?: string | null): string {
  const k = (key?.trim() ? key : subject)
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 60)
    .replace(/-+$/, "");
  return k || "thread";
}

/** SPEC 5.2: SHA-256 of the JCS array of non-cancelled threads, ordered by (created_at, id). */
export function contextHash(threads: Thread[]): string {
  const live = threads
    .filter((t) => t.status !== "cancelled")
    .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id - b.id))
    .map((t) => ({ id: t.id, subject: t.subject, subject_key: t.subject_key, current_value: t.current_value, status: t.status }));
  return bytesToHex(sha256(utf8(canonicalize(live))));
}

/** `{context_hash, agents}` once ≥ 2 distinct agents (by agentKey: each as first written) handshook the current hash, else null. */
export function sealOf(threads: Thread[], handshakes: Handshake[], hash = contextHash(threads)): { context_hash: string; agents: string[] } | null {
  const byKey = new Map<string, string>();
  for (const h of handshakes) if (h.context_hash === hash && !byKey.has(agentKey(h.agent_id))) byKey.set(agentKey(h.agent_id), h.agent_id);
  const agents = [...byKey.values()].sort();
  return agents.length >= 2 ? { context_hash: hash, agents } : null;
}

export type Decision = { ok: true; effect: "apply" | "none" } | { ok: false; code: "not_owner" | "owner_cannot_confirm" | "thread_cancelled"; detail: string };

/**
 * The owner of a thread is its opener; when the opener signed, the opener's key. The arbiter acts
 * for a message's author and gets exactly that author's rights.
 */
export function isOwner(thread: Thread, openerKey: string | null, author: Author): boolean {
  return openerKey ? author.pubkey_hex === openerKey : sameAgent(author.agent_id, thread.opened_by);
}

/** The status table of SPEC 5.1, before anything is written. */
export function decideRevision(thread: Thread, openerKey: string | null, kind: Exclude<RevisionKind, "propose">, author: Author): Decision {
  if (thread.status === "cancelled") {
    return { ok: false, code: "thread_cancelled", detail: `Thread ${thread.id} was retracted; it takes no more revisions. Open a new thread instead.` };
  }
  const owner = isOwner(thread, openerKey, author);
  if ((kind === "update" || kind === "retract") && !owner) {
    return { ok: false, code: "not_owner", detail: `Only the thread's owner (${thread.opened_by}${openerKey ? ", with its key" : ""}) may ${kind} it; confirm or contradict instead.` };
  }
  if ((kind === "confirm" || kind === "contradict") && owner) {
    return { ok: false, code: "owner_cannot_confirm", detail: `The owner cannot ${kind} their own thread; others confirm or contradict it.` };
  }
  if (kind === "confirm" && thread.confirmations.some((c) => sameAgent(c.agent_id, author.agent_id))) {
    return { ok: true, effect: "none" }; // a repeat by the same agent changes nothing
  }
  return { ok: true, effect: "apply" };
}

const source = { source_msg_id: seqId.optional(), quote: z.string().optional() };
/** Facts the service adds to ledger events, which the reducer needs: whom the arbiter acted for. */
const authorFacts = z.looseObject({ author_agent_id: z.string().optional(), via: z.enum(["api", "arbiter"]).optional(), auth: z.enum(["signed", "anon"]).optional() });

export const LEDGER_EVENTS = defineEvents("ledger", {
  "thread.opened": {
    payload: z.looseObject({ subject: z.string(), value: z.string(), subject_key: z.string().optional(), ...source }),
    server: authorFacts,
    agentWritten: true,
  },
  "thread.revised": {
    payload: z.looseObject({ thread_id: seqId, kind: z.enum(["update", "confirm", "contradict", "retract"]), value: z.string().optional(), ...source }),
    server: authorFacts,
    agentWritten: true,
  },
  "discrepancy.recorded": {
    payload: z.looseObject({ description: z.string(), severity: z.enum(["low", "medium", "high"]), thread_id: seqId.optional(), source_msg_id: seqId.optional() }),
  },
  "discrepancy.resolved": { payload: z.looseObject({ discrepancy_id: seqId }), agentWritten: true },
  "handshake.signed": { payload: z.looseObject({ context_hash: z.string() }), agentWritten: true },
});
const E = LEDGER_EVENTS;

type RevisedPayload = z.infer<(typeof E)["thread.revised"]["payload"]>;

function authorOf(event: LogEvent): { agent_id: string; auth: Auth; via: "api" | "arbiter" } {
  const s = as(E["thread.opened"], event).server;
  return { agent_id: s.author_agent_id ?? event.actor, auth: s.auth ?? (event.sig ? "signed" : "anon"), via: s.via ?? "api" };
}

/** Applies one event to the ledger (events of other kinds are ignored). Mutates and returns `ledger`. */
export function applyLedgerEvent(ledger: Ledger, event: LogEvent, quorum = AGREE_QUORUM_DEFAULT): Ledger {
  switch (event.type) {
    case "thread.opened": {
      const p = as(E["thread.opened"], event).payload;
      const a = authorOf(event);
      const revision: Revision = {
        id: event.seq, thread_id: event.seq, kind: "propose", value: p.value, author_agent_id: a.agent_id, auth: a.auth, via: a.via,
        source_msg_id: p.source_msg_id ?? null, quote: p.quote ?? null, created_at: event.ts, seq: event.seq,
      };
      ledger.revisions.push(revision);
      ledger.threads.push({
        id: event.seq, subject: p.subject, subject_key: subjectKey(p.subject, p.subject_key), current_value: p.value, status: "proposed",
        opened_by: a.agent_id, opened_by_auth: a.auth, revisions_count: 1, last_revision: revision, confirmations: [],
        created_at: event.ts, updated_at: event.ts,
      });
      return ledger;
    }
    case "thread.revised": {
      const p = as(E["thread.revised"], event).payload;
      const thread = ledger.threads.find((t) => t.id === p.thread_id);
      if (!thread) return ledger;
      const a = authorOf(event);
      const revision: Revision = {
        id: event.seq, thread_id: thread.id, kind: p.kind, value: p.value ?? thread.current_value, author_agent_id: a.agent_id, auth: a.auth,
        via: a.via, source_msg_id: p.source_msg_id ?? null, quote: p.quote ?? null, created_at: event.ts, seq: event.seq,
      };
      ledger.revisions.push(revision);
      thread.revisions_count++;
      thread.last_revision = revision;
      thread.updated_at = event.ts;
      reviseThread(thread, p, a, quorum);
      return ledger;
    }
    case "discrepancy.recorded": {
      const p = as(E["discrepancy.recorded"], event).payload;
      ledger.discrepancies.push({
        id: event.seq, thread_id: p.thread_id ?? null, description: p.description, severity: p.severity, source_msg_id: p.source_msg_id ?? null,
        recorded_by: authorOf(event).agent_id, status: "open", resolved_by: null, created_at: event.ts, resolved_at: null,
      });
      return ledger;
    }
    case "discrepancy.resolved": {
      const p = as(E["discrepancy.resolved"], event).payload;
      const d = ledger.discrepancies.find((x) => x.id === p.discrepancy_id);
      if (d) Object.assign(d, { status: "resolved", resolved_by: event.actor, resolved_at: event.ts });
      return ledger;
    }
    case "handshake.signed": {
      const p = as(E["handshake.signed"], event).payload;
      const sig = event.sig && "nonce" in event.sig ? event.sig : null;
      ledger.handshakes.push({
        id: event.seq, agent_id: event.actor, context_hash: p.context_hash, auth: sig ? "signed" : "anon", pubkey_hex: sig?.pubkey_hex ?? null,
        signature_hex: sig?.signature_hex ?? null, ts: sig?.ts ?? null, nonce: sig?.nonce ?? null, created_at: event.ts,
      });
      return ledger;
    }
    default:
      return ledger;
  }
}

function reviseThread(thread: Thread, p: RevisedPayload, a: { agent_id: string; auth: Auth }, quorum: number): void {
  switch (p.kind) {
    case "update":
      thread.current_value = p.value ?? thread.current_value;
      thread.confirmations = []; // only confirmations of the new value count
      thread.status = "proposed";
      return;
    case "confirm":
      // Distinct confirmers by agentKey: `Alice` and `ALICE` are one confirmation.
      if (!thread.confirmations.some((c) => sameAgent(c.agent_id, a.agent_id))) thread.confirmations.push({ agent_id: a.agent_id, auth: a.auth });
      if (thread.confirmations.length >= quorum) thread.status = "agreed";
      return;
    case "contradict":
      thread.confirmations = thread.confirmations.filter((c) => !sameAgent(c.agent_id, a.agent_id));
      if (thread.status === "agreed") {
        thread.status = "disputed";
        thread.confirmations = []; // a disputed thread needs a fresh quorum
      }
      return;
    case "retract":
      thread.status = "cancelled";
      return;
  }
}

export function emptyLedger(): Ledger {
  return { threads: [], revisions: [], discrepancies: [], handshakes: [] };
}

/** The ledger's reducer; the room's quorum comes from its room.created event. */
export const ledgerFeature: Feature<Ledger> = {
  name: "ledger",
  kinds: Object.values(LEDGER_EVENTS),
  empty: emptyLedger,
  apply: (ledger, event, ctx) => void applyLedgerEvent(ledger, event, ctx.quorum),
};
