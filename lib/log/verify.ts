/**
 * The one verifier (SPEC 4.5), used by the server (/verify), the CLI (`parley verify`) and the
 * watcher's browser. Pure: the caller supplies the Ed25519 verify function (node:crypto, WebCrypto
 * or @noble/ed25519), which may be async.
 */
import { Replayer, type Projections } from "../domain/replay";
import { agentKey } from "../domain/names";
import { SERVICE_ACTORS } from "../domain/room";
import { eventProblem, isAgentWritten } from "../domain/catalogue";
import { turnRuleChecker } from "../domain/turns";
import { bytesEqual, bytesToBase64, bytesToHex, hexToBytes, utf8 } from "./bytes";
import { keyId, parseCheckpoint, type ParsedCheckpoint } from "./checkpoint";
import { ed25519InputProblem, isStrictEd25519Input } from "./ed25519";
import { canonicalEqual } from "./jcs";
import { agentEnvelope, eventLeafHash, legacySignedString, ZERO_HASH_HEX, type LogEvent } from "./event";
import { MerkleTree, verifyConsistency, EMPTY_ROOT } from "./merkle";
import type { Message } from "../domain/message";

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
/** Signature checks handed to the verify function together (see RoomVerifier.verifySig). */
const SIGNATURE_BATCH = 64;

/** What a bundle says about itself before its lists: the verifier needs it first. */
export type BundleHead = Pick<RoomBundle, "origin" | "room" | "server_key">;

/** The served projections without their messages, which may be fed one at a time (RoomVerifier.servedMessage). */
export type ServedProjections = Omit<Projections, "messages">;

type Check = (ok: boolean | Promise<boolean>, onFail: () => void) => void;
type CheckpointEntry = { cp: ParsedCheckpoint; signature: boolean | Promise<boolean> | null };

/**
 * The verifier of SPEC 4.5, fed a room's bundle piece by piece: events in order, then (in any
 * order) checkpoints, the served projections and their messages, then finish(). It keeps no event:
 * each is hashed into a 64-byte-per-leaf Merkle tree and replayed into the projections as it
 * arrives, each checkpoint's root is checked as soon as the tree reaches its size, and a served
 * message is held only until it is compared — so a caller that streams the bundle (the CLI from a
 * file, the server from its store) holds about what the replay builds, never the log. Ed25519
 * checks start as soon as a signature arrives; with an async verify function they run beside the
 * hashing. verifyBundle feeds it a parsed bundle.
 *
 * Each check and its failure texts are as they were when the checks ran one after another over a
 * whole bundle; failures are kept per check, in that order, up to MAX_FAILURES, then sorted by seq.
 */
export class RoomVerifier {
  private readonly key: ServerKeyRef;
  private readonly pubkey: Uint8Array | null = null;
  private readonly wantKeyId: Uint8Array | null = null;
  // Failures and inconclusive notes per check, in the order the checks are listed in SPEC 4.5.
  private readonly failed = { events: [] as Failure[], checkpoints: [] as Failure[], signatures: [] as Failure[], projections: [] as Failure[], extraMessages: [] as Failure[], caller: [] as Failure[] };
  private readonly notes = { key: [] as string[], checkpoints: [] as string[], signatures: [] as string[], projections: [] as string[], caller: [] as string[] };
  /** Asynchronous checks not yet settled, and what finish() waits on for them. */
  private inFlight = 0;
  private drained: (() => void) | null = null;

  // 1. events
  private readonly tree = new MerkleTree();
  private prev = ZERO_HASH_HEX;
  private prevLinks = 0;
  private eventsDone = false;

  // 2. checkpoints: parsed as they come, each compared with the tree once it has the checkpoint's size.
  private checkpointCount = 0;
  /** Checkpoints past the tree's size when they came, checked once every event is in. */
  private later: CheckpointEntry[] = [];
  /** The largest size of a checkpoint within the log (the head must be one). */
  private signedSize = -1;
  /** Each distinct note parsed and its signature checked once, however often it is listed (null: malformed). */
  private readonly knownNotes = new Map<string, CheckpointEntry | null>();

  // 3. agent signatures
  private readonly pinned = new Map<string, string>();
  private readonly nonces = new Set<string>();
  private readonly agentKeys = new Map<string, string>();
  private agentSignatures = 0;

  // 4. projections: the replay as events arrive; served messages compared as they arrive once it is done.
  private readonly replayer = new Replayer();
  private readonly turnCheck = turnRuleChecker();
  private turnCheckError: string | null = null;
  private rebuilt: Projections | null = null;
  /**
   * Rebuilt messages by id, and per id whether the (last) message served under it equals the
   * rebuilt one: 0 not served, 1 equal, 2 different. Ids are event seqs, so typed arrays indexed
   * by seq hold them (bytes per event, not a Map entry); an id outside 1..size (a tampered seq)
   * goes to the Maps.
   */
  private messageIndex = new Int32Array(0);
  private messageState = new Uint8Array(0);
  private readonly otherMessages = new Map<unknown, { index: number; state: number }>();
  private eventsReplayed = false;
  private waitingMessages: Message[] = [];
  private served: ServedProjections | null = null;
  private servedMessages = false;
  private turnViolations: { seq: number; detail: string }[] = [];
  private replayError: string | null = null;

  constructor(
    private readonly head: BundleHead,
    private readonly opts: VerifyOptions,
  ) {
    this.key = opts.trustedKey ?? head.server_key;
    if (opts.trustedKey && (opts.trustedKey.pubkey_hex !== head.server_key.pubkey_hex || opts.trustedKey.key_name !== head.server_key.key_name)) {
      this.fail("events", null, "server_key", "The bundle names a different server key than the one trusted.");
    }
    try {
      this.pubkey = hexToBytes(this.key.pubkey_hex);
      this.wantKeyId = keyId(this.key.key_name, this.pubkey);
    } catch {
      this.notes.key.push("The server key is not valid hex, so no checkpoint signature could be checked.");
    }
  }

  private fail(bucket: keyof RoomVerifier["failed"], seq: number | null, type: string, detail: string): void {
    const list = this.failed[bucket];
    if (list.length < MAX_FAILURES) list.push({ seq, type, detail });
  }

  private readonly check: Check = (ok, onFail) => {
    if (typeof ok === "boolean") {
      if (!ok) onFail();
      return;
    }
    this.inFlight++;
    ok.then((v) => (v ? undefined : onFail()), onFail).finally(() => {
      if (--this.inFlight === 0) this.drained?.();
    });
  };

  // Whatever verify function the caller supplies (node:crypto, WebCrypto, noble), the strict input
  // rules come first: no small-order or non-canonical key or R, no S >= L (lib/log/ed25519.ts).
  private readonly verifySig = (pub: Uint8Array, msg: Uint8Array, sig: Uint8Array): boolean | Promise<boolean> => {
    if (!isStrictEd25519Input(pub, sig)) return false;
    // Handed over SIGNATURE_BATCH at a time: an async verifier's thread pool then takes a run of
    // checks per wake-up instead of waking (and taking the core from the hashing) for each one.
    return new Promise<boolean>((resolve) => {
      this.batch.push(() => resolve(this.callVerify(pub, msg, sig)));
      if (this.batch.length >= SIGNATURE_BATCH) this.flushSignatures();
    });
  };

  private callVerify(pub: Uint8Array, msg: Uint8Array, sig: Uint8Array): boolean | Promise<boolean> {
    try {
      const ok = this.opts.verify(pub, msg, sig);
      // A rejected promise is a signature that did not verify, never an unhandled rejection.
      return typeof ok === "boolean" ? ok : Promise.resolve(ok).catch(() => false);
    } catch {
      return false;
    }
  }

  private batch: (() => void)[] = [];

  private flushSignatures(): void {
    const batch = this.batch;
    this.batch = [];
    for (const run of batch) run();
  }

  /** The next event of the log (seq order), with the leaf hash the server stores for it when verifying online. */
  event(event: LogEvent, storedLeafHash?: string): void {
    if (this.eventsDone) throw new Error("verify: an event after the end of the events");
    const seq = this.tree.size + 1;
    if (event.seq !== seq) this.fail("events", seq, "sequence", `Event at position ${seq} says seq ${event.seq}: an event is missing or out of order.`);
    if (event.room !== this.head.room || event.v !== 1) this.fail("events", seq, "event_format", "The event names another room or version.");
    const problem = eventProblem(event);
    if (problem) this.fail("events", seq, "event_format", `Event ${seq} does not fit the event catalogue: ${problem}`);
    let leaf: Uint8Array;
    try {
      leaf = eventLeafHash(event);
    } catch {
      this.fail("events", seq, "event_format", "The event cannot be canonicalised (RFC 8785).");
      leaf = new Uint8Array(32);
    }
    const hex = bytesToHex(leaf);
    if (event.prev === this.prev) this.prevLinks++;
    else this.fail("events", seq, "prev_link", `prev does not match the leaf hash of event ${seq - 1}.`);
    if (storedLeafHash !== undefined && storedLeafHash !== hex) this.fail("events", seq, "leaf_hash", "The stored leaf hash differs from the hash of the event's canonical bytes.");
    this.tree.append(leaf);
    this.prev = hex;
    this.agentSignature(event);
    // Events the catalogue refuses (already failures) may be more than a reducer can take: that is
    // reported with the projections, not thrown; after the first such error neither goes on.
    this.replayError ??= failureOf(() => this.replayer.add(event, hex));
    // Turns rooms: the server made every turn by the protocol's rules.
    this.turnCheckError ??= failureOf(() => this.turnCheck.add(event));
  }

  /** No more events: the replay is done (so served messages can be compared as they come), and the checkpoints held back are checked. */
  endEvents(): void {
    if (this.eventsDone) return;
    this.eventsDone = true;
    if (this.replayError === null) this.rebuilt = this.replayer.result();
    const size = this.tree.size;
    this.messageIndex = new Int32Array(size + 1);
    this.messageState = new Uint8Array(size + 1);
    (this.rebuilt?.messages ?? []).forEach((m, i) => {
      if (Number.isInteger(m.id) && m.id >= 1 && m.id <= size) this.messageIndex[m.id] = i + 1;
      else this.otherMessages.set(m.id, { index: i + 1, state: 0 });
    });
    this.eventsReplayed = true;
    this.turnViolations = this.turnCheckError === null ? this.turnCheck.violations : [{ seq: 0, detail: `Turns protocol: the events cannot be checked (${this.turnCheckError}).` }];
    const later = this.later;
    this.later = [];
    for (const entry of later) this.checkCheckpoint(entry);
    const waiting = this.waitingMessages;
    this.waitingMessages = [];
    for (const m of waiting) this.compareMessage(m);
  }

  /** One of the bundle's signed checkpoints (a C2SP signed note). */
  checkpoint(note: string): void {
    this.checkpointCount++;
    let entry = this.knownNotes.get(note);
    if (entry === undefined) {
      const cp = parseCheckpoint(note);
      // The signature is checked now, beside the hashing; its outcome counts only for a checkpoint
      // within the log (one past its end is reported as missing events instead).
      entry = cp ? { cp, signature: this.pubkey && this.wantKeyId ? this.noteSignature(cp) : null } : null;
      this.knownNotes.set(note, entry);
    }
    if (!entry) return this.fail("checkpoints", null, "checkpoint_format", "A stored checkpoint is not a well-formed signed note.");
    const { cp } = entry;
    if (cp.origin !== this.head.origin) this.fail("checkpoints", cp.size, "checkpoint_origin", `Checkpoint origin "${cp.origin}" is not this room's.`);
    if (this.eventsDone || cp.size <= this.tree.size) this.checkCheckpoint(entry);
    else this.later.push(entry);
  }

  /** Step 2 for one checkpoint, once the tree has its size or every event is in: root and server signature. */
  private checkCheckpoint({ cp, signature }: CheckpointEntry): void {
    if (cp.size > this.tree.size) {
      return this.fail("checkpoints", cp.size, "missing_events", `A checkpoint covers ${cp.size} events but the log has ${this.tree.size}: events were removed.`);
    }
    if (!bytesEqual(cp.root, this.tree.root(cp.size))) this.fail("checkpoints", cp.size, "checkpoint_root", `The signed root for size ${cp.size} differs from the root of the events.`);
    this.signedSize = Math.max(this.signedSize, cp.size);
    if (signature !== null) this.check(signature, () => this.fail("checkpoints", cp.size, "checkpoint_signature", `The checkpoint for size ${cp.size} is not signed by the server key.`));
  }

  /** All the signatures of `cp` by the trusted key hold (false when it has none). */
  private noteSignature(cp: ParsedCheckpoint): boolean | Promise<boolean> {
    const mine = cp.signatures.filter((s) => s.keyName === this.key.key_name && bytesEqual(s.keyId, this.wantKeyId!));
    if (mine.length === 0) return false;
    const body = utf8(cp.body);
    const results = mine.map((s) => this.verifySig(this.pubkey!, body, s.signature));
    if (results.every((r) => typeof r === "boolean")) return results.every((r) => r);
    return Promise.all(results.map((r) => Promise.resolve(r))).then((all) => all.every((r) => r));
  }

  /** agentKey (lib/domain/names.ts), once per distinct name: a room has few authors and many events. */
  private agentKeyOf(actor: string): string {
    let key = this.agentKeys.get(actor);
    if (key === undefined) {
      key = agentKey(actor);
      this.agentKeys.set(actor, key);
    }
    return key;
  }

  /** Step 3 for one event: agent signatures, replays and key pinning (trust on first use). */
  private agentSignature(event: LogEvent): void {
    // As at intake (lib/services/signatures.ts): only a v1 envelope signature pins a name; a legacy
    // signature covers no agent_id, so it never pins, and under a pinned name it must carry the
    // pinned key. Pinned per agentKey: names that differ only in case or width are one agent.
    const seq = event.seq;
    const sig = event.sig as (LogEvent["sig"] & { alg: string }) | undefined;
    if (!sig) {
      const isAgentEvent = isAgentWritten(event.type) && !SERVICE_ACTORS.has(event.actor);
      if (isAgentEvent && this.pinned.has(this.agentKeyOf(event.actor))) this.fail("signatures", seq, "key_pinning", `"${event.actor}" signed before; an unsigned event under that name is not theirs.`);
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
      this.notes.signatures.push(`Event ${seq} is signed with "${String(sig.alg)}", an algorithm this verifier does not know.`);
      return;
    }
    this.agentSignatures++;
    const pub = sig.pubkey_hex.toLowerCase();
    const actorKey = this.agentKeyOf(event.actor);
    const first = this.pinned.get(actorKey);
    if (first === undefined) {
      if (pins) this.pinned.set(actorKey, pub);
    } else if (first !== pub) this.fail("signatures", seq, "key_pinning", `"${event.actor}" is pinned to another key.`);
    if (this.nonces.has(`${pub}:${nonce}`)) this.fail("signatures", seq, "replayed_signature", "This signature's key and nonce were used before in the room.");
    this.nonces.add(`${pub}:${nonce}`);
    let pubBytes: Uint8Array, sigBytes: Uint8Array;
    try {
      pubBytes = hexToBytes(pub);
      sigBytes = hexToBytes(sig.signature_hex);
    } catch {
      return this.fail("signatures", seq, "agent_signature", "The signature or key is not valid hex.");
    }
    const problem = ed25519InputProblem(pubBytes, sigBytes);
    if (problem) return this.fail("signatures", seq, "agent_signature", `The agent signature of event ${seq} is refused before verification (${problem}): a small-order or non-canonical key or signature proves nothing.`);
    this.check(this.verifySig(pubBytes, utf8(signed), sigBytes), () => this.fail("signatures", seq, "agent_signature", `The agent signature of event ${seq} does not verify: the signed content was changed.`));
  }

  /** The served projections other than messages; call it for a bundle that has projections, even with no messages. */
  servedProjections(served: ServedProjections): void {
    this.served = served;
  }

  /** One served message (after servedProjections, or before: a bundle may list its fields in any order). */
  servedMessage(message: Message): void {
    this.servedMessages = true;
    if (this.eventsReplayed) this.compareMessage(message);
    else this.waitingMessages.push(message);
  }

  private compareMessage(m: Message): void {
    const id = m.id;
    const inRange = Number.isInteger(id) && id >= 1 && id < this.messageIndex.length;
    const other = inRange ? undefined : this.otherMessages.get(id);
    const index = inRange ? this.messageIndex[id]! : (other?.index ?? 0);
    if (index === 0) return this.fail("extraMessages", id, "projection", `The message ${id} is served but has no event in the log.`);
    const state = canonicalEqual(this.rebuilt!.messages[index - 1], m) ? 1 : 2;
    if (inRange) this.messageState[id] = state;
    else other!.state = state;
  }

  /** Runs what waits for the whole bundle (roots, projections, the caller's checkpoint) and every pending signature. */
  async finish(): Promise<VerifyReport> {
    this.endEvents();
    const size = this.tree.size;

    // 2. Every stored checkpoint was checked as it came (checkCheckpoint); the head must be signed.
    const headSigned = this.signedSize === size;
    if (this.checkpointCount === 0) this.notes.checkpoints.push("The log carries no checkpoints, so its history was never signed.");
    else if (!headSigned && size > 0) this.fail("checkpoints", size, "head", "No signed checkpoint covers the latest event.");

    // 4. Projections: a replay of the events must reproduce what the server stores and serves.
    let projections: VerifyReport["details"]["projections"] = null;
    const rebuilt = this.rebuilt;
    if (!this.served && !this.servedMessages) this.notes.projections.push("The bundle carries no projections, so what the server serves was not compared with the log.");
    else if (!rebuilt) this.fail("projections", null, "projection", `The events cannot be replayed into projections (${this.replayError}), so what is served cannot come from them.`);
    else {
      projections = { messages: rebuilt.messages.length, room: true, threads: rebuilt.ledger.threads.length, tasks: rebuilt.board?.tasks.length ?? 0, turns: rebuilt.turns?.turns.length ?? 0 };
      this.compareProjections(rebuilt, this.served ?? ({} as ServedProjections));
    }
    for (const v of this.turnViolations) this.fail("projections", v.seq, "turns_protocol", v.detail);

    // 5. A checkpoint the caller kept: signed by the key, and the current log consistent with it.
    // It is usually one the bundle lists, whose signature was checked with those.
    let callerCheckpoint: VerifyReport["details"]["caller_checkpoint"] = null;
    const kept = this.opts.checkpoint;
    if (kept !== undefined) {
      const text = kept.endsWith("\n") ? kept : `${kept}\n`;
      const cp = parseCheckpoint(text);
      const { pubkey, wantKeyId } = this;
      if (!cp) this.notes.caller.push("The checkpoint you supplied is not a well-formed signed note.");
      else if (cp.origin !== this.head.origin) this.notes.caller.push(`The checkpoint you supplied is for "${cp.origin}", not this room.`);
      else if (!pubkey || !wantKeyId || !cp.signatures.some((s) => s.keyName === this.key.key_name && bytesEqual(s.keyId, wantKeyId))) {
        this.notes.caller.push("The checkpoint you supplied is not signed by this server's key.");
      } else if (!(await this.flushed(this.knownNotes.get(text)?.signature ?? this.noteSignature(cp)))) {
        this.notes.caller.push("The signature on the checkpoint you supplied does not verify.");
      } else {
        const consistent = cp.size <= size && this.isConsistent(cp);
        callerCheckpoint = { size: cp.size, consistent };
        if (cp.size > size) this.fail("caller", cp.size, "truncated", `Your checkpoint covers ${cp.size} events; the log now has ${size}: its tail was cut.`);
        else if (!consistent) this.fail("caller", cp.size, "consistency", `The log is not consistent with your checkpoint of size ${cp.size}: history was rewritten.`);
      }
    }

    this.flushSignatures();
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    const f = this.failed;
    const failures = [...f.events, ...f.checkpoints, ...f.signatures, ...f.projections, ...f.caller].slice(0, MAX_FAILURES);
    failures.sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
    const n = this.notes;
    const inconclusive = [...n.key, ...n.checkpoints, ...n.signatures, ...n.projections, ...n.caller];
    const verdict: Verdict = failures.length > 0 ? "REFUTED" : inconclusive.length > 0 ? "INCONCLUSIVE" : "CLEAN";
    return {
      verdict,
      explanation: explain(verdict, failures, inconclusive, size),
      details: {
        events: size,
        leaf_hashes: size,
        prev_links: this.prevLinks,
        checkpoints: this.checkpointCount,
        agent_signatures: this.agentSignatures,
        projections,
        caller_checkpoint: callerCheckpoint,
        head: { size, root: bytesToBase64(this.tree.root(size)) },
        server_key: this.key,
        inconclusive,
      },
      failures,
    };
  }

  /** Waits for one check, handing over the batch it may be waiting in. */
  private flushed(result: boolean | Promise<boolean>): boolean | Promise<boolean> {
    this.flushSignatures();
    return result;
  }

  /** RFC 9162 consistency from the caller's (size, root) to the current tree. */
  private isConsistent(cp: ParsedCheckpoint): boolean {
    const n = this.tree.size;
    const currentRoot = this.tree.root(n);
    if (cp.size === 0) return bytesEqual(cp.root, EMPTY_ROOT);
    if (cp.size === n) return bytesEqual(cp.root, currentRoot);
    return verifyConsistency(cp.size, n, this.tree.consistencyProof(cp.size, n), cp.root, currentRoot);
  }

  private compareProjections(rebuilt: Projections, served: ServedProjections): void {
    const fail: Fail = (seq, type, detail) => this.fail("projections", seq, type, detail);
    for (const field of Object.keys(rebuilt.room) as (keyof Projections["room"])[]) {
      if (served.room?.[field] !== rebuilt.room[field]) {
        fail(null, "projection", `Room ${field} is ${JSON.stringify(served.room?.[field])} but the log says ${JSON.stringify(rebuilt.room[field])}.`);
      }
    }
    // Messages were compared as they were served; what is left is the log's side, then the extras.
    for (const m of rebuilt.messages) {
      const inRange = Number.isInteger(m.id) && m.id >= 1 && m.id < this.messageState.length;
      const state = inRange ? this.messageState[m.id]! : (this.otherMessages.get(m.id)?.state ?? 0);
      if (state === 0) fail(m.id, "projection", `The message ${m.id} is in the log but not served.`);
      else if (state === 2) fail(m.id, "projection", `The message ${m.id} as served differs from the log.`);
    }
    for (const x of this.failed.extraMessages) fail(x.seq, x.type, x.detail);
    const bySeq = <T extends { id: number }>(noun: string, logged: T[], shown: T[] | undefined) => compareById(fail, noun, logged, shown ?? [], (x) => x.id, (x) => x.id);
    bySeq("thread", rebuilt.ledger.threads, served.ledger?.threads);
    bySeq("revision", rebuilt.ledger.revisions, served.ledger?.revisions);
    bySeq("discrepancy", rebuilt.ledger.discrepancies, served.ledger?.discrepancies);
    bySeq("handshake", rebuilt.ledger.handshakes, served.ledger?.handshakes);
    bySeq("task", rebuilt.board?.tasks ?? [], served.board?.tasks);
    compareById(fail, "board agent", rebuilt.board?.agents ?? [], served.board?.agents ?? [], (a) => `"${a.agent_id}"`, () => null);
    bySeq("turn", rebuilt.turns?.turns ?? [], served.turns?.turns);
    if (!canonicalEqual(rebuilt.turns?.room ?? null, served.turns?.room ?? null)) {
      fail(null, "projection", "The turns state of the room (status, participants, rounds, proposal) as served differs from the log.");
    }
  }
}

/** Verifies a whole parsed bundle (the browser's way; the CLI and the server stream theirs through RoomVerifier). */
export async function verifyBundle(bundle: RoomBundle, opts: VerifyOptions): Promise<VerifyReport> {
  const v = new RoomVerifier(bundle, opts);
  bundle.events.forEach((event, i) => v.event(event, opts.storedLeafHashes?.[i]));
  v.endEvents();
  for (const note of bundle.checkpoints) v.checkpoint(note);
  if (bundle.projections) {
    const { messages, ...rest } = bundle.projections;
    v.servedProjections(rest);
    for (const m of messages ?? []) v.servedMessage(m);
  }
  return v.finish();
}

type Fail = (seq: number | null, type: string, detail: string) => void;

/** What `run` threw, as text; null when it ran through. */
function failureOf(run: () => void): string | null {
  try {
    run();
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** Compares what the log rebuilds with what is served, item by item (`seq` names an item's event when it has one). */
function compareById<T>(fail: Fail, noun: string, logged: T[], served: T[], id: (x: T) => string | number, seq: (x: T) => number | null) {
  const shown = new Map(served.map((x) => [id(x), x]));
  for (const x of logged) {
    const item = shown.get(id(x));
    if (item === undefined) fail(seq(x), "projection", `The ${noun} ${id(x)} is in the log but not served.`);
    else if (!canonicalEqual(item, x)) fail(seq(x), "projection", `The ${noun} ${id(x)} as served differs from the log.`);
  }
  const inLog = new Set(logged.map(id));
  for (const x of served) if (!inLog.has(id(x))) fail(seq(x), "projection", `The ${noun} ${id(x)} is served but has no event in the log.`);
}

function explain(verdict: Verdict, failures: Failure[], inconclusive: string[], size: number): string {
  if (verdict === "CLEAN") return `All ${size} events, their hash chain, every signed checkpoint, every agent signature and the served projections check out.`;
  if (verdict === "INCONCLUSIVE") return `No check failed, but not every check could run: ${inconclusive.join(" ")}`;
  const kinds = [...new Set(failures.map((f) => f.type))].join(", ");
  const seqs = [...new Set(failures.filter((f) => f.seq !== null).map((f) => f.seq))].slice(0, 10).join(", ");
  return `The history does not check out (${kinds})${seqs ? ` at seq ${seqs}` : ""}. ${failures[0]!.detail}`;
}

