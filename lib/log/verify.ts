/**
 * The one verifier (SPEC 4.5), used by the server (/verify), the CLI (`parley verify`) and the
 * watcher's browser. Pure: the caller supplies the Ed25519 verify function (node:crypto, WebCrypto
 * or @noble/ed25519), which may be async.
 */
import { replay, type Projections } from "../domain/replay";
import { agentKey } from "../domain/names";
import { SERVICE_ACTORS } from "../domain/room";
import { eventProblem, isAgentWritten } from "../domain/catalogue";
import { turnRuleViolations } from "../domain/turns";
import { bytesEqual, bytesToBase64, bytesToHex, hexToBytes, utf8 } from "./bytes";
import { keyId, parseCheckpoint, type ParsedCheckpoint } from "./checkpoint";
import { ed25519InputProblem, isStrictEd25519Input } from "./ed25519";
import { canonicalize } from "./jcs";
import { agentEnvelope, eventLeafHash, legacySignedString, ZERO_HASH_HEX, type LogEvent } from "./event";
import { consistencyProof, frontierAppend, frontierRoot, verifyConsistency, EMPTY_ROOT, type Frontier } from "./merkle";

export const BUNDLE_FORMAT = "parley-room-bundle/1";

export interface ServerKeyRef {
  key_name: string;
  pubkey_hex: string;
}

/** The export of a room (SPEC 4.6): the log, its signed checkpoints and what the server serves. */
export interface RoomBundle {
  format: typeof BUNDLE_FORMAT;
  origin: string;
  room: string;
  server_key: ServerKeyRef;
  events: LogEvent[];
  /** Signed notes, one per tree size. */
  checkpoints: string[];
  /** The server's projections, compared with a replay of the events. */
  projections?: Projections;
}

export type Verdict = "CLEAN" | "REFUTED" | "INCONCLUSIVE";

export interface Failure {
  seq: number | null;
  type: string;
  detail: string;
}

export interface VerifyReport {
  verdict: Verdict;
  explanation: string;
  details: {
    events: number;
    leaf_hashes: number;
    prev_links: number;
    checkpoints: number;
    agent_signatures: number;
    projections: { messages: number; room: boolean; threads: number; tasks: number; turns: number } | null;
    caller_checkpoint: { size: number; consistent: boolean } | null;
    head: { size: number; root: string };
    server_key: ServerKeyRef;
    inconclusive: string[];
  };
  failures: Failure[];
}

export type Ed25519Verify = (pubkey: Uint8Array, message: Uint8Array, signature: Uint8Array) => boolean | Promise<boolean>;

export interface VerifyOptions {
  verify: Ed25519Verify;
  /** A checkpoint the caller kept: the current log must be consistent with it. */
  checkpoint?: string;
  /** The key to trust; defaults to the bundle's own (say so when reporting offline results). */
  trustedKey?: ServerKeyRef;
  /** Leaf hashes as the server stores them, compared with the recomputed ones. */
  storedLeafHashes?: string[];
}

const MAX_FAILURES = 1000;

export async function verifyBundle(bundle: RoomBundle, opts: VerifyOptions): Promise<VerifyReport> {
  const failures: Failure[] = [];
  const inconclusive: string[] = [];
  const fail = (seq: number | null, type: string, detail: string) => {
    if (failures.length < MAX_FAILURES) failures.push({ seq, type, detail });
  };
  const key = opts.trustedKey ?? bundle.server_key;
  const pending: Promise<void>[] = [];
  const check = (ok: boolean | Promise<boolean>, onFail: () => void) => {
    if (typeof ok === "boolean") {
      if (!ok) onFail();
    } else pending.push(ok.then((v) => (v ? undefined : onFail()), onFail));
  };
  // Whatever verify function the caller supplies (node:crypto, WebCrypto, noble), the strict input
  // rules come first: no small-order or non-canonical key or R, no S >= L (lib/log/ed25519.ts).
  const verifySig = (pub: Uint8Array, msg: Uint8Array, sig: Uint8Array): boolean | Promise<boolean> => {
    if (!isStrictEd25519Input(pub, sig)) return false;
    try {
      return opts.verify(pub, msg, sig);
    } catch {
      return false;
    }
  };

  if (opts.trustedKey && (opts.trustedKey.pubkey_hex !== bundle.server_key.pubkey_hex || opts.trustedKey.key_name !== bundle.server_key.key_name)) {
    fail(null, "server_key", "The bundle names a different server key than the one trusted.");
  }

  // 1. Canonical bytes, leaf hashes and prev links; roots at every size along the way.
  const leaves: Uint8Array[] = [];
  const leafHex: string[] = [];
  const roots: Uint8Array[] = [EMPTY_ROOT];
  let frontier: Frontier = [];
  let prev = ZERO_HASH_HEX;
  let prevLinks = 0;
  bundle.events.forEach((event, i) => {
    const seq = i + 1;
    if (event.seq !== seq) fail(seq, "sequence", `Event at position ${seq} says seq ${event.seq}: an event is missing or out of order.`);
    if (event.room !== bundle.room || event.v !== 1) fail(seq, "event_format", "The event names another room or version.");
    const problem = eventProblem(event);
    if (problem) fail(seq, "event_format", `Event ${seq} does not fit the event catalogue: ${problem}`);
    let leaf: Uint8Array;
    try {
      leaf = eventLeafHash(event);
    } catch {
      fail(seq, "event_format", "The event cannot be canonicalised (RFC 8785).");
      leaf = new Uint8Array(32);
    }
    const hex = bytesToHex(leaf);
    if (event.prev === prev) prevLinks++;
    else fail(seq, "prev_link", `prev does not match the leaf hash of event ${seq - 1}.`);
    const stored = opts.storedLeafHashes?.[i];
    if (stored !== undefined && stored !== hex) fail(seq, "leaf_hash", "The stored leaf hash differs from the hash of the event's canonical bytes.");
    frontier = frontierAppend(frontier, i, leaf);
    roots.push(frontierRoot(frontier));
    leaves.push(leaf);
    leafHex.push(hex);
    prev = hex;
  });
  const size = bundle.events.length;

  // 2. Every stored checkpoint: origin, root at its size, server signature; the head must be signed.
  let pubkey: Uint8Array | null = null;
  try {
    pubkey = hexToBytes(key.pubkey_hex);
  } catch {
    inconclusive.push("The server key is not valid hex, so no checkpoint signature could be checked.");
  }
  const wantKeyId = pubkey ? keyId(key.key_name, pubkey) : null;
  let headSigned = false;
  bundle.checkpoints.forEach((note) => {
    const cp = parseCheckpoint(note);
    if (!cp) return fail(null, "checkpoint_format", "A stored checkpoint is not a well-formed signed note.");
    if (cp.origin !== bundle.origin) fail(cp.size, "checkpoint_origin", `Checkpoint origin "${cp.origin}" is not this room's.`);
    if (cp.size > size) return fail(cp.size, "missing_events", `A checkpoint covers ${cp.size} events but the log has ${size}: events were removed.`);
    if (!bytesEqual(cp.root, roots[cp.size]!)) fail(cp.size, "checkpoint_root", `The signed root for size ${cp.size} differs from the root of the events.`);
    if (cp.size === size) headSigned = true;
    if (pubkey && wantKeyId) checkNoteSignature(cp, key.key_name, pubkey, wantKeyId, verifySig, check, () => fail(cp.size, "checkpoint_signature", `The checkpoint for size ${cp.size} is not signed by the server key.`));
  });
  if (bundle.checkpoints.length === 0) inconclusive.push("The log carries no checkpoints, so its history was never signed.");
  else if (!headSigned && size > 0) fail(size, "head", "No signed checkpoint covers the latest event.");

  // 3. Agent signatures, replays and key pinning (trust on first use). As at intake
  // (lib/services/signatures.ts): only a v1 envelope signature pins a name; a legacy signature
  // covers no agent_id, so it never pins, and under a pinned name it must carry the pinned key.
  // Pinned per agentKey: names that differ only in case or width are one agent (lib/domain/names.ts).
  const pinned = new Map<string, string>();
  const nonces = new Set<string>();
  let agentSignatures = 0;
  bundle.events.forEach((event) => {
    const seq = event.seq;
    const sig = event.sig as (LogEvent["sig"] & { alg: string }) | undefined;
    const isAgentEvent = isAgentWritten(event.type) && !SERVICE_ACTORS.has(event.actor);
    if (!sig) {
      if (isAgentEvent && pinned.has(agentKey(event.actor))) fail(seq, "key_pinning", `"${event.actor}" signed before; an unsigned event under that name is not theirs.`);
      return;
    }
    let signed: string;
    let nonce: string;
    let pins: boolean;
    if (sig.alg === "ed25519-jcs-v1") {
      signed = agentEnvelope({ room: event.room, type: event.type, actor: event.actor, payload: event.payload, ts: sig.ts, nonce: sig.nonce });
      nonce = sig.nonce;
      pins = true;
    } else if (sig.alg === "ed25519-legacy-v0" && event.type === "message.posted") {
      const p = event.payload as { text: string; memory_root?: string };
      signed = legacySignedString(p.text, sig.ts_iso, event.room, p.memory_root);
      nonce = `legacy:${sig.signature_hex.toLowerCase()}`;
      pins = false;
    } else {
      inconclusive.push(`Event ${seq} is signed with "${String(sig.alg)}", an algorithm this verifier does not know.`);
      return;
    }
    agentSignatures++;
    const pub = sig.pubkey_hex.toLowerCase();
    const first = pinned.get(agentKey(event.actor));
    if (first === undefined) {
      if (pins) pinned.set(agentKey(event.actor), pub);
    } else if (first !== pub) fail(seq, "key_pinning", `"${event.actor}" is pinned to another key.`);
    if (nonces.has(`${pub}:${nonce}`)) fail(seq, "replayed_signature", "This signature's key and nonce were used before in the room.");
    nonces.add(`${pub}:${nonce}`);
    let pubBytes: Uint8Array, sigBytes: Uint8Array;
    try {
      pubBytes = hexToBytes(pub);
      sigBytes = hexToBytes(sig.signature_hex);
    } catch {
      return fail(seq, "agent_signature", "The signature or key is not valid hex.");
    }
    const problem = ed25519InputProblem(pubBytes, sigBytes);
    if (problem) return fail(seq, "agent_signature", `The agent signature of event ${seq} is refused before verification (${problem}): a small-order or non-canonical key or signature proves nothing.`);
    check(verifySig(pubBytes, utf8(signed), sigBytes), () => fail(seq, "agent_signature", `The agent signature of event ${seq} does not verify: the signed content was changed.`));
  });

  // 4. Projections: a replay of the events must reproduce what the server stores and serves.
  let projections: VerifyReport["details"]["projections"] = null;
  if (bundle.projections) {
    const rebuilt = replay(bundle.events, leafHex);
    projections = { messages: rebuilt.messages.length, room: true, threads: rebuilt.ledger.threads.length, tasks: rebuilt.board?.tasks.length ?? 0, turns: rebuilt.turns?.turns.length ?? 0 };
    compareProjections(rebuilt, bundle.projections, fail);
  } else inconclusive.push("The bundle carries no projections, so what the server serves was not compared with the log.");
  // Turns rooms: the server made every turn by the protocol's rules.
  for (const v of turnRuleViolations(bundle.events)) fail(v.seq, "turns_protocol", v.detail);

  // 5. A checkpoint the caller kept: signed by the key, and the current log consistent with it.
  let callerCheckpoint: VerifyReport["details"]["caller_checkpoint"] = null;
  if (opts.checkpoint !== undefined) {
    const cp = parseCheckpoint(opts.checkpoint.endsWith("\n") ? opts.checkpoint : `${opts.checkpoint}\n`);
    if (!cp) inconclusive.push("The checkpoint you supplied is not a well-formed signed note.");
    else if (cp.origin !== bundle.origin) inconclusive.push(`The checkpoint you supplied is for "${cp.origin}", not this room.`);
    else if (!pubkey || !wantKeyId || !cp.signatures.some((s) => s.keyName === key.key_name && bytesEqual(s.keyId, wantKeyId))) {
      inconclusive.push("The checkpoint you supplied is not signed by this server's key.");
    } else {
      const supplied = cp;
      let signatureOk = true;
      checkNoteSignature(supplied, key.key_name, pubkey, wantKeyId, verifySig, check, () => {
        signatureOk = false;
      });
      await Promise.all(pending.splice(0));
      if (!signatureOk) inconclusive.push("The signature on the checkpoint you supplied does not verify.");
      else {
        const consistent = supplied.size <= size && isConsistent(leaves, supplied, roots[size]!);
        callerCheckpoint = { size: supplied.size, consistent };
        if (supplied.size > size) fail(supplied.size, "truncated", `Your checkpoint covers ${supplied.size} events; the log now has ${size}: its tail was cut.`);
        else if (!consistent) fail(supplied.size, "consistency", `The log is not consistent with your checkpoint of size ${supplied.size}: history was rewritten.`);
      }
    }
  }

  await Promise.all(pending);
  failures.sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
  const verdict: Verdict = failures.length > 0 ? "REFUTED" : inconclusive.length > 0 ? "INCONCLUSIVE" : "CLEAN";
  return {
    verdict,
    explanation: explain(verdict, failures, inconclusive, size),
    details: {
      events: size,
      leaf_hashes: leaves.length,
      prev_links: prevLinks,
      checkpoints: bundle.checkpoints.length,
      agent_signatures: agentSignatures,
      projections,
      caller_checkpoint: callerCheckpoint,
      head: { size, root: bytesToBase64(roots[size]!) },
      server_key: key,
      inconclusive,
    },
    failures,
  };
}

function checkNoteSignature(
  cp: ParsedCheckpoint,
  keyName: string,
  pubkey: Uint8Array,
  wantKeyId: Uint8Array,
  verifySig: (pub: Uint8Array, msg: Uint8Array, sig: Uint8Array) => boolean | Promise<boolean>,
  check: (ok: boolean | Promise<boolean>, onFail: () => void) => void,
  onFail: () => void,
): void {
  const mine = cp.signatures.filter((s) => s.keyName === keyName && bytesEqual(s.keyId, wantKeyId));
  if (mine.length === 0) return onFail();
  for (const s of mine) check(verifySig(pubkey, utf8(cp.body), s.signature), onFail);
}

/** RFC 9162 consistency from the caller's (size, root) to the current tree. */
function isConsistent(leaves: Uint8Array[], cp: ParsedCheckpoint, currentRoot: Uint8Array): boolean {
  const n = leaves.length;
  if (cp.size === 0) return bytesEqual(cp.root, EMPTY_ROOT);
  if (cp.size === n) return bytesEqual(cp.root, currentRoot);
  return verifyConsistency(cp.size, n, consistencyProof(leaves, cp.size, n), cp.root, currentRoot);
}

type Fail = (seq: number | null, type: string, detail: string) => void;

/** Compares what the log rebuilds with what is served, item by item (`seq` names an item's event when it has one). */
function compareById<T>(fail: Fail, noun: string, logged: T[], served: T[], id: (x: T) => string | number, seq: (x: T) => number | null) {
  const shown = new Map(served.map((x) => [id(x), canonicalize(x)]));
  for (const x of logged) {
    const text = shown.get(id(x));
    if (text === undefined) fail(seq(x), "projection", `The ${noun} ${id(x)} is in the log but not served.`);
    else if (text !== canonicalize(x)) fail(seq(x), "projection", `The ${noun} ${id(x)} as served differs from the log.`);
  }
  const inLog = new Set(logged.map(id));
  for (const x of served) if (!inLog.has(id(x))) fail(seq(x), "projection", `The ${noun} ${id(x)} is served but has no event in the log.`);
}

function compareProjections(rebuilt: Projections, served: Projections, fail: Fail): void {
  for (const field of Object.keys(rebuilt.room) as (keyof Projections["room"])[]) {
    if (served.room?.[field] !== rebuilt.room[field]) {
      fail(null, "projection", `Room ${field} is ${JSON.stringify(served.room?.[field])} but the log says ${JSON.stringify(rebuilt.room[field])}.`);
    }
  }
  const bySeq = <T extends { id: number }>(noun: string, logged: T[], shown: T[] | undefined) => compareById(fail, noun, logged, shown ?? [], (x) => x.id, (x) => x.id);
  bySeq("message", rebuilt.messages, served.messages);
  bySeq("thread", rebuilt.ledger.threads, served.ledger?.threads);
  bySeq("revision", rebuilt.ledger.revisions, served.ledger?.revisions);
  bySeq("discrepancy", rebuilt.ledger.discrepancies, served.ledger?.discrepancies);
  bySeq("handshake", rebuilt.ledger.handshakes, served.ledger?.handshakes);
  bySeq("task", rebuilt.board?.tasks ?? [], served.board?.tasks);
  compareById(fail, "board agent", rebuilt.board?.agents ?? [], served.board?.agents ?? [], (a) => `"${a.agent_id}"`, () => null);
  bySeq("turn", rebuilt.turns?.turns ?? [], served.turns?.turns);
  if (canonicalize(rebuilt.turns?.room ?? null) !== canonicalize(served.turns?.room ?? null)) {
    fail(null, "projection", "The turns state of the room (status, participants, rounds, proposal) as served differs from the log.");
  }
}

function explain(verdict: Verdict, failures: Failure[], inconclusive: string[], size: number): string {
  if (verdict === "CLEAN") return `All ${size} events, their hash chain, every signed checkpoint, every agent signature and the served projections check out.`;
  if (verdict === "INCONCLUSIVE") return `No check failed, but not every check could run: ${inconclusive.join(" ")}`;
  const kinds = [...new Set(failures.map((f) => f.type))].join(", ");
  const seqs = [...new Set(failures.filter((f) => f.seq !== null).map((f) => f.seq))].slice(0, 10).join(", ");
  return `The history does not check out (${kinds})${seqs ? ` at seq ${seqs}` : ""}. ${failures[0]!.detail}`;
}

