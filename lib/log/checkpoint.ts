// C2SP tlog-checkpoint in the C2SP signed-note format, Ed25519 signature type (0x01).
//   <origin>\n<size>\n<base64 root>\n\n— <key name> base64(key id ‖ signature)\n
import { bytesEqual, concatBytes, base64ToBytes, sha256, bytesToBase64, utf8 } from './bytes';
import { HASH_LEN } from './merkle';

const SIG_PREFIX = '\u2014 '; // EM DASH + space
const ED25519_TYPE = 0x01;
const MAX_SIGNATURES = 100; // signed-note: verifiers SHOULD cap, MUST accept at least 16
const MAX_NOTE_CHARS = 64 * 1024;

// signed-note: no ASCII control characters other than newline.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0009\u000B-\u001F]/;
const LONE_SURROGATE = /[\uD800-\uDFFF]/u; // a JS string with one is not valid UTF-8
// Key names: non-empty, no Unicode spaces, no '+'.
const KEY_NAME = /^[^\s+]+$/u;
const DECIMAL = /^(0|[1-9][0-9]*)$/;

export type Verify = (pub: Uint8Array, msg: Uint8Array, sig: Uint8Array) => boolean;

export interface NoteSignature {
  keyName: string;
  keyId: Uint8Array;
  signature: Uint8Array;
}

export interface ParsedCheckpoint {
  origin: string;
  size: number;
  root: Uint8Array;
  /** The signed note text, final newline included. */
  body: string;
  signatures: NoteSignature[];
}

export function isValidKeyName(name: string): boolean {
  return typeof name === 'string' && KEY_NAME.test(name) && !LONE_SURROGATE.test(name);
}

/** SHA-256(key name ‖ 0x0A ‖ 0x01 ‖ pubkey)[:4]. */
export function keyId(keyName: string, pubkey: Uint8Array): Uint8Array {
  // A server signs every checkpoint with one key: its id is hashed once, not once per checkpoint.
  const last = lastKeyId;
  if (last && last.keyName === keyName && bytesEqual(last.pubkey, pubkey)) return last.id.slice();
  const id = sha256(concatBytes(utf8(keyName), new Uint8Array([0x0a, ED25519_TYPE]), pubkey)).slice(0, 4);
  lastKeyId = { keyName, pubkey: pubkey.slice(), id };
  return id.slice();
}
let lastKeyId: { keyName: string; pubkey: Uint8Array; id: Uint8Array } | null = null;

export function checkpointBody(origin: string, size: number, root: Uint8Array): string {
  if (!origin || /[\s+]/u.test(origin) || CONTROL.test(origin) || LONE_SURROGATE.test(origin)) {
    throw new Error('checkpoint: origin must be non-empty, without spaces, "+" or controls');
  }
  if (!Number.isSafeInteger(size) || size < 0) throw new Error('checkpoint: bad size');
  if (root.length !== HASH_LEN) throw new Error('checkpoint: root must be 32 bytes');
  return `${origin}\n${size}\n${bytesToBase64(root)}\n`;
}

export function signCheckpoint(args: {
  origin: string;
  size: number;
  root: Uint8Array;
  keyName: string;
  pubkey: Uint8Array;
  sign: (msg: Uint8Array) => Uint8Array;
}): string {
  const body = checkpointBody(args.origin, args.size, args.root);
  return checkpointNote(body, args.keyName, args.pubkey, args.sign(utf8(body)));
}

/** The signed note of a checkpoint body (checkpointBody's) and its Ed25519 signature `sig`, made with the key `pubkey` named `keyName`. */
export function checkpointNote(body: string, keyName: string, pubkey: Uint8Array, sig: Uint8Array): string {
  if (!isValidKeyName(keyName)) throw new Error('checkpoint: invalid key name');
  if (pubkey.length !== 32) throw new Error('checkpoint: pubkey must be 32 bytes');
  if (sig.length !== 64) throw new Error('checkpoint: Ed25519 signature must be 64 bytes');
  const blob = bytesToBase64(concatBytes(keyId(keyName, pubkey), sig));
  return `${body}\n${SIG_PREFIX}${keyName} ${blob}\n`;
}

/** Strict parse of a checkpoint note. Returns null for anything malformed; never throws. */
export function parseCheckpoint(text: string): ParsedCheckpoint | null {
  try {
    if (typeof text !== 'string' || text.length > MAX_NOTE_CHARS) return null;
    if (CONTROL.test(text) || LONE_SURROGATE.test(text) || !text.endsWith('\n')) return null;
    // The text is separated from the signatures by the *last* blank line.
    const split = text.lastIndexOf('\n\n');
    if (split < 0) return null;
    const body = text.slice(0, split + 1);
    const sigLines = text.slice(split + 2, -1).split('\n');
    if (sigLines.length === 0 || sigLines.length > MAX_SIGNATURES) return null;

    // Exactly origin, size, root: Parley never emits extension lines, and accepting them would
    // mean accepting signed claims this parser does not surface.
    const lines = body.slice(0, -1).split('\n');
    if (lines.length !== 3) return null;
    const [origin, sizeStr, rootB64] = lines;
    if (!origin || /\s/u.test(origin)) return null;
    if (!DECIMAL.test(sizeStr)) return null;
    const size = Number(sizeStr);
    if (!Number.isSafeInteger(size)) return null;
    const root = base64ToBytes(rootB64);
    if (root.length !== HASH_LEN) return null;

    const signatures: NoteSignature[] = [];
    for (const line of sigLines) {
      if (!line.startsWith(SIG_PREFIX)) return null;
      const rest = line.slice(SIG_PREFIX.length);
      const sp = rest.indexOf(' ');
      if (sp < 0) return null;
      const keyName = rest.slice(0, sp);
      if (!isValidKeyName(keyName)) return null;
      const blob = base64ToBytes(rest.slice(sp + 1)); // throws on spaces/garbage -> null
      if (blob.length < 5) return null;
      signatures.push({ keyName, keyId: blob.slice(0, 4), signature: blob.slice(4) });
    }
    return { origin, size, root, body, signatures };
  } catch {
    return null;
  }
}

/**
 * signed-note rules: lines from other keys (other name or other id) are ignored; every line
 * from this key must verify; at least one must exist. Never throws.
 */
export function verifyCheckpoint(
  text: string,
  key: { keyName: string; pubkey: Uint8Array },
  verify: Verify,
): { ok: boolean; parsed: ParsedCheckpoint | null; reason?: string } {
  const parsed = parseCheckpoint(text);
  if (!parsed) return { ok: false, parsed: null, reason: 'malformed checkpoint' };
  try {
    const id = keyId(key.keyName, key.pubkey);
    const mine = parsed.signatures.filter(
      (s) => s.keyName === key.keyName && bytesEqual(s.keyId, id),
    );
    if (mine.length === 0) return { ok: false, parsed, reason: 'no signature from this key' };
    const msg = utf8(parsed.body);
    for (const s of mine) {
      if (s.signature.length !== 64 || !verify(key.pubkey, msg, s.signature)) {
        return { ok: false, parsed, reason: 'bad signature' };
      }
    }
    return { ok: true, parsed };
  } catch {
    return { ok: false, parsed, reason: 'bad signature' };
  }
}
