// The event record of SPEC §4.1 and the byte strings agents sign (§4.4).
import { canonicalize, canonicalBytes } from './jcs';
import { bytesToHex, utf8 } from './bytes';
import { leafHash } from './merkle';

export type EventSig =
  | {
      alg: 'ed25519-jcs-v1';
      pubkey_hex: string;
      signature_hex: string;
      ts: string;
      nonce: string;
    }
  | {
      alg: 'ed25519-legacy-v0';
      pubkey_hex: string;
      signature_hex: string;
      ts_iso: string;
    };

export type LogEvent = {
  v: 1;
  room: string;
  seq: number;
  ts: string;
  type: string;
  actor: string;
  payload: Record<string, unknown>;
  server: Record<string, unknown>;
  prev: string;
  sig?: EventSig;
};

/** `prev` of seq 1. */
export const ZERO_HASH_HEX = '0'.repeat(64);

/** JCS of the event; an undefined `sig` is simply absent, as JCS drops undefined members. */
export function eventCanonical(e: LogEvent): string {
  return canonicalize(e);
}

export function eventLeafHash(e: LogEvent): Uint8Array {
  return leafHash(canonicalBytes(e));
}

/** The string an agent signs for an ed25519-jcs-v1 signature (SPEC §4.4). */
export function agentEnvelope(args: {
  room: string;
  type: string;
  actor: string;
  payload: Record<string, unknown>;
  ts: string;
  nonce: string;
}): string {
  const { room, type, actor, payload, ts, nonce } = args;
  return canonicalize({ v: 1, room, type, actor, payload, ts, nonce });
}

/** The legacy (ed25519-legacy-v0) signed string: text ‖ ts_iso ‖ room ‖ (memory_root or ""). */
export function legacySignedString(
  text: string,
  ts_iso: string,
  room: string,
  memory_root?: string | null,
): string {
  return text + ts_iso + room + (memory_root ?? '');
}

/** The `sig` body field an agent sends with a write: its signature over the SPEC 4.4 envelope. */
export interface AgentSignature {
  pubkey_hex: string;
  signature_hex: string;
  ts: string;
  nonce: string;
}

/**
 * Signs a write the way an agent does (SPEC 4.4). `sign` is the agent's Ed25519 signer
 * (node:crypto, @noble/ed25519 or WebCrypto wrapped synchronously); `nonce` must be fresh.
 */
export function signAgentWrite(
  signer: { pubkeyHex: string; sign: (message: Uint8Array) => Uint8Array },
  write: { room: string; type: string; actor: string; payload: Record<string, unknown>; ts: string; nonce: string },
): AgentSignature {
  const signature = signer.sign(utf8(agentEnvelope(write)));
  return { pubkey_hex: signer.pubkeyHex, signature_hex: bytesToHex(signature), ts: write.ts, nonce: write.nonce };
}
