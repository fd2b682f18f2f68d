// The event record of SPEC §4.1 and the byte strings agents sign (§4.4).
import { canonicalize, isPlainObject } from './jcs';
import { bytesToHex, utf8 } from './bytes';
import { leafHashOfCanonical, leafHashOfKnownObject } from './merkle';

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

/** An event's keys in JCS order (UTF-16 code units), with and without `sig`. */
const EVENT_KEYS = ['actor', 'payload', 'prev', 'room', 'seq', 'server', 'sig', 'ts', 'type', 'v'] as const;
const UNSIGNED_EVENT_KEYS = EVENT_KEYS.filter((k) => k !== 'sig');

/**
 * The keys to write for `e` when it is a plain object whose own enumerable keys are exactly the
 * nine event keys, with or without `sig` (the JCS order is then known, no sort), else null:
 * anything else goes the general way, so a member that is extra, missing, inherited or not
 * enumerable is hashed, left out or refused exactly as canonicalize would.
 */
function eventKeys(e: unknown): readonly string[] | null {
  if (typeof e !== 'object' || e === null || Array.isArray(e) || !isPlainObject(e)) return null;
  let signed = false;
  let required = 0;
  // for-in yields enumerable keys only; hasOwn keeps them to Object.keys's.
  for (const k in e) {
    if (!Object.hasOwn(e, k)) return null;
    switch (k) {
      case 'sig':
        signed = true;
        break;
      case 'actor': case 'payload': case 'prev': case 'room': case 'seq': case 'server': case 'ts': case 'type': case 'v':
        required++;
        break;
      default:
        return null;
    }
  }
  if (required !== UNSIGNED_EVENT_KEYS.length) return null;
  return signed ? EVENT_KEYS : UNSIGNED_EVENT_KEYS;
}

/** SHA-256(0x00 ‖ the JCS bytes of the event), written straight into the hash input. */
export function eventLeafHash(e: LogEvent): Uint8Array {
  const keys = eventKeys(e);
  return keys ? leafHashOfKnownObject(e as unknown as Record<string, unknown>, keys) : leafHashOfCanonical(e);
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

/**
 * The time an agent signs (v1 `sig.ts`, legacy `ts_iso`): ISO 8601 in UTC, nothing else —
 * `YYYY-MM-DDTHH:MM:SS`, an optional fraction of 1 to 9 digits, then `Z` or `+00:00`
 * (2026-12-01T10:00:00Z, 2026-12-01T10:00:00.123Z, 2026-12-01T10:00:00.123456+00:00). Other offsets,
 * lower-case `t`/`z`, a missing zone and every other form Date.parse accepts (RFC 2822 …) are refused.
 */
const AGENT_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:Z|\+00:00)$/;

export const AGENT_TIME_RULE = "must be an ISO 8601 UTC time such as 2026-12-01T10:00:00Z or 2026-12-01T10:00:00.123Z";

/** Milliseconds since the epoch of an agent time in the one accepted form (AGENT_TIME), else null. */
export function parseAgentTime(s: string): number | null {
  const m = typeof s === 'string' ? AGENT_TIME.exec(s) : null;
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (year < 1970 || hour > 23 || minute > 59 || second > 59) return null;
  const t = Date.UTC(year, month - 1, day, hour, minute, second);
  const back = new Date(t);
  // Date.UTC rolls 2026-02-30 over to March: a date that does not round-trip does not exist.
  if (back.getUTCFullYear() !== year || back.getUTCMonth() !== month - 1 || back.getUTCDate() !== day) return null;
  return t + Number((m[7] ?? '').padEnd(3, '0').slice(0, 3));
}

export const isAgentTime = (s: string): boolean => parseAgentTime(s) !== null;

/**
 * memory_root beside a legacy signature: empty or 1..256 of A-Z a-z 0-9 + / = _ . : (a hex or
 * base64 hash, a tag) — no "-". The legacy signed string has no separators; with no hyphen after
 * it, the room id (8-4-4-4-12) is the last hyphenated run of the string, and with the strict
 * agent time before it the split text ‖ ts_iso ‖ room ‖ memory_root is unique: one legacy
 * signature cannot be re-read as another room's message with shifted fields.
 */
const LEGACY_MEMORY_ROOT = /^[A-Za-z0-9+/=_.:]{0,256}$/;
export const LEGACY_MEMORY_ROOT_RULE = 'must be empty or up to 256 characters from A-Z a-z 0-9 + / = _ . : (no "-")';
export const isLegacyMemoryRoot = (s: string): boolean => LEGACY_MEMORY_ROOT.test(s);

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
