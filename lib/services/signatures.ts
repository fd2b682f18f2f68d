import { ParleyError } from "../errors";
import { hexToBytes, utf8 } from "../log/bytes";
import { agentEnvelope, legacySignedString, type EventSig } from "../log/event";
import type { RoomRow, StoreWriter } from "../store/types";
import type { Services } from "./context";

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
}

/** The v1 signature an agent sends with a write (the fields of `sig`). */
export type AgentSig = { pubkey_hex: string; signature_hex: string; ts: string; nonce: string };

/** checkAgentSignature for the next event of `room` with a v1 `sig` (every write but legacy messages). */
export const signedWrite = (svc: Services, tx: StoreWriter, room: RoomRow, type: string, actor: string, payload: Record<string, unknown>, sig: AgentSig | undefined) =>
  checkAgentSignature(svc, tx, { room: room.uuid, type, actor, payload, seq: room.headSize + 1, signature: sig && { kind: "v1", ...sig } });

/**
 * Checks an agent's signature and the room's key pinning (trust on first use), and records the
 * nonce; returns the sig to store in the event. One helper for every signed write (SPEC 4.4).
 */
export function checkAgentSignature(svc: Services, tx: StoreWriter, write: SignedWrite): EventSig | undefined {
  const pinned = tx.agentKey(write.room, write.actor)?.pubkeyHex ?? null;
  const s = write.signature;
  if (!s) {
    if (pinned) throw new ParleyError("signature_required", `"${write.actor}" signs its events in this room: this write must be signed with its key.`);
    return undefined;
  }
  const pubkeyHex = s.pubkey_hex.toLowerCase();
  if (pinned && pinned !== pubkeyHex) {
    throw new ParleyError("agent_key_mismatch", `"${write.actor}" is pinned to another key in this room; sign with that key or use another agent_id.`);
  }
  let sig: EventSig;
  let signed: string;
  let nonce: string;
  if (s.kind === "v1") {
    const ts = Date.parse(s.ts);
    if (!Number.isFinite(ts)) throw new ParleyError("bad_signature", "sig.ts: must be an ISO 8601 time.");
    if (Math.abs(ts - svc.clock.now()) > CLOCK_WINDOW_MS) {
      throw new ParleyError("bad_signature", "sig.ts is more than 5 minutes from the server's clock; sign again with the current time.");
    }
    signed = agentEnvelope({ room: write.room, type: write.type, actor: write.actor, payload: write.payload, ts: s.ts, nonce: s.nonce });
    sig = { alg: "ed25519-jcs-v1", pubkey_hex: pubkeyHex, signature_hex: s.signature_hex.toLowerCase(), ts: s.ts, nonce: s.nonce };
    nonce = s.nonce;
  } else {
    signed = legacySignedString(s.text, s.ts_iso, write.room, s.memory_root);
    sig = { alg: "ed25519-legacy-v0", pubkey_hex: pubkeyHex, signature_hex: s.signature_hex.toLowerCase(), ts_iso: s.ts_iso };
    // A legacy signature has no nonce: the signature itself is the one-time value.
    nonce = `legacy:${sig.signature_hex}`;
  }
  if (!svc.key.verify(hexToBytes(pubkeyHex), utf8(signed), hexToBytes(s.signature_hex))) {
    throw new ParleyError("bad_signature", "The signature does not verify for this content, room and key. Sign the exact envelope the documentation describes.");
  }
  if (!tx.useNonce(write.room, pubkeyHex, nonce, write.seq)) {
    throw new ParleyError("replayed_signature", "This signature (key and nonce) was already used in this room; sign again with a fresh nonce.");
  }
  if (!pinned) tx.pinAgentKey(write.room, write.actor, pubkeyHex);
  return sig;
}
