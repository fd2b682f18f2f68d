import { ParleyError } from "../errors";
import { hexToBytes, utf8 } from "../log/bytes";
import { ed25519InputProblem, type Ed25519InputProblem } from "../log/ed25519";
import { AGENT_TIME_RULE, agentEnvelope, isLegacyMemoryRoot, LEGACY_MEMORY_ROOT_RULE, legacySignedString, parseAgentTime, type EventSig } from "../log/event";
import { agentKey } from "../domain/names";
import type { RoomRow, StoreReader, StoreWriter } from "../store/types";
import type { Services } from "./context";
import { ed25519VerifyAsync } from "./server-key";

const CLOCK_WINDOW_MS = 5 * 60_000;

/** What an agent sent to sign a write: the v1 envelope signature or the legacy message fields. */
export type SignatureInput =
  | { kind: "v1"; pubkey_hex: string; signature_hex: string; ts: string; nonce: string }
  | { kind: "legacy"; pubkey_hex: string; signature_hex: string; ts_iso: string; text: string; memory_root?: string };

interface SignedWrite {
  room: string;
  type: string;
  actor: string;
  payload: Record<string, unknown>;
  seq: number;
  signature?: SignatureInput;
  /** The signature's verification, made before the transaction (preverify). */
  verified?: Preverified;
}

/** What a signature covers (the bytes signed), as stored in the event, and its one-time value. */
function signedContent(write: Omit<SignedWrite, "seq">, s: SignatureInput, pubkeyHex: string): { signed: string; sig: EventSig; nonce: string } {
  if (s.kind === "v1") {
    const signed = agentEnvelope({ room: write.room, type: write.type, actor: write.actor, payload: write.payload, ts: s.ts, nonce: s.nonce });
    return { signed, sig: { alg: "ed25519-jcs-v1", pubkey_hex: pubkeyHex, signature_hex: s.signature_hex.toLowerCase(), ts: s.ts, nonce: s.nonce }, nonce: s.nonce };
  }
  const sig: EventSig = { alg: "ed25519-legacy-v0", pubkey_hex: pubkeyHex, signature_hex: s.signature_hex.toLowerCase(), ts_iso: s.ts_iso };
  // A legacy signature has no nonce: the signature itself is the one-time value.
  return { signed: legacySignedString(s.text, s.ts_iso, write.room, s.memory_root), sig, nonce: `legacy:${sig.signature_hex}` };
}

export interface Preverified {
  room: string;
  ok: boolean;
}

/**
 * A write's signature verified on libuv's thread pool, before its transaction (the hot path of
 * signed posts): the check that costs (one Ed25519 verification) then runs on another core, and
 * the transaction only reads the pins and takes the nonce. Undefined when there is nothing to
 * verify yet (no signature, or one the transaction refuses on its form).
 */
export async function preverify(write: Omit<SignedWrite, "seq" | "verified">): Promise<Preverified | undefined> {
  const s = write.signature;
  if (!s || !/^[0-9a-f]{64}$/i.test(s.pubkey_hex) || !/^[0-9a-f]{128}$/i.test(s.signature_hex)) return undefined;
  const pubkeyHex = s.pubkey_hex.toLowerCase();
  const { signed } = signedContent(write, s, pubkeyHex);
  return { room: write.room, ok: await ed25519VerifyAsync(hexToBytes(pubkeyHex), utf8(signed), hexToBytes(s.signature_hex)) };
}

/** The key pinned to a name in a room, by agentKey (`ALICE` is held to `Alice`'s key); also finds pins made under the exact name. */
export async function pinnedKey(tx: Pick<StoreReader, "agentKey">, room: string, name: string): Promise<string | null> {
  const key = agentKey(name);
  const byKey = (await tx.agentKey(room, key))?.pubkeyHex;
  // A name that is its own key (most are) has nothing more to look up.
  if (byKey || key === name) return byKey ?? null;
  return (await tx.agentKey(room, name))?.pubkeyHex ?? null;
}

/** The v1 signature an agent sends with a write (the fields of `sig`). */
export type AgentSig = { pubkey_hex: string; signature_hex: string; ts: string; nonce: string };

/** checkAgentSignature for the next event of `room` with a v1 `sig` (every write but legacy messages). */
export const signedWrite = (svc: Services, tx: StoreWriter, room: RoomRow, type: string, actor: string, payload: Record<string, unknown>, sig: AgentSig | undefined) =>
  checkAgentSignature(svc, tx, { room: room.uuid, type, actor, payload, seq: room.headSize + 1, signature: sig && { kind: "v1", ...sig } });

const INPUT_PROBLEMS: Record<Ed25519InputProblem, string> = {
  key_length: "pubkey_hex: must be a 32-byte Ed25519 public key (64 hex digits).",
  signature_length: "signature_hex: must be a 64-byte Ed25519 signature (128 hex digits).",
  key_non_canonical: "pubkey_hex: is not a canonical Ed25519 point encoding (its y is not below 2^255 - 19); send the key as your library encodes it.",
  key_small_order: "pubkey_hex: is a point of small order (such as the identity), which would verify forged signatures; sign with a real Ed25519 key.",
  r_non_canonical: "signature_hex: its R half is not a canonical Ed25519 point encoding; sign again with a standard RFC 8032 library.",
  r_small_order: "signature_hex: its R half is a point of small order, which no honest signer produces; sign again with a standard RFC 8032 library.",
  s_non_canonical: "signature_hex: its S half is not below the group order L (a non-canonical signature); sign again with a standard RFC 8032 library.",
};

/** The agent's signed time (v1 `sig.ts`, legacy `ts_iso`): strict ISO 8601 UTC, within 5 minutes of the server's clock. */
function checkSignedTime(svc: Services, field: string, value: string): void {
  const t = parseAgentTime(value);
  if (t === null) throw new ParleyError("bad_signature", `${field}: ${AGENT_TIME_RULE}.`);
  if (Math.abs(t - svc.clock.now()) > CLOCK_WINDOW_MS) {
    throw new ParleyError("bad_signature", `${field} is more than 5 minutes from the server's clock; sign again with the current time.`);
  }
}

/**
 * Checks an agent's signature and the room's key pinning (trust on first use), and records the
 * nonce; returns the sig to store in the event. One helper for every signed write (SPEC 4.4).
 *
 * Only a v1 envelope signature pins a name: it covers the agent_id, the event type and a nonce. A
 * legacy message signature (text ‖ ts_iso ‖ room ‖ memory_root) covers no agent_id, so it shows the
 * message as signed by its key but never pins that key to the name; under a name already pinned it
 * must carry the pinned key. lib/log/verify.ts replays the same rule.
 */
export async function checkAgentSignature(svc: Services, tx: StoreWriter, write: SignedWrite): Promise<EventSig | undefined> {
  const pinned = await pinnedKey(tx, write.room, write.actor);
  const s = write.signature;
  if (!s) {
    if (pinned) throw new ParleyError("signature_required", `"${write.actor}" signs its events in this room: this write must be signed with its key.`);
    return undefined;
  }
  const pubkeyHex = s.pubkey_hex.toLowerCase();
  const pubkey = hexToBytes(pubkeyHex);
  const signature = hexToBytes(s.signature_hex);
  const problem = ed25519InputProblem(pubkey, signature);
  if (problem) throw new ParleyError("bad_signature", INPUT_PROBLEMS[problem]);
  if (pinned && pinned !== pubkeyHex) {
    throw new ParleyError("agent_key_mismatch", `"${write.actor}" is pinned to another key in this room; sign with that key or use another agent_id.`);
  }
  if (s.kind === "v1") checkSignedTime(svc, "sig.ts", s.ts);
  else {
    checkSignedTime(svc, "ts_iso", s.ts_iso);
    if (s.memory_root !== undefined && !isLegacyMemoryRoot(s.memory_root)) {
      throw new ParleyError("bad_signature", `memory_root: with a legacy signature ${LEGACY_MEMORY_ROOT_RULE}; or sign with sig (ed25519-jcs-v1), which takes any memory_root.`);
    }
  }
  const { signed, sig, nonce } = signedContent(write, s, pubkeyHex);
  const verified = write.verified?.room === write.room ? write.verified.ok : svc.key.verify(pubkey, utf8(signed), signature);
  if (!verified) {
    throw new ParleyError("bad_signature", "The signature does not verify for this content, room and key. Sign the exact envelope the documentation describes.");
  }
  if (!(await tx.useNonce(write.room, pubkeyHex, nonce, write.seq))) {
    throw new ParleyError("replayed_signature", "This signature (key and nonce) was already used in this room; sign again with a fresh nonce.");
  }
  if (!pinned && s.kind === "v1") await tx.pinAgentKey(write.room, agentKey(write.actor), pubkeyHex);
  return sig;
}
