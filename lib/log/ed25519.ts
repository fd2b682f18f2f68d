// Ed25519 via @noble/ed25519, synchronous, usable in the browser and the offline verifier.
// (The server may sign with node:crypto instead; both produce identical RFC 8032 signatures.)
// Also the one strict input check every verifier runs first (server, CLI, browser): no node: imports.
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';

// noble v3 ships without a sync SHA-512; the sync API needs one.
ed.hashes.sha512 = sha512;

/** The field prime p = 2^255 - 19. */
const P = 2n ** 255n - 19n;
/** The order L of the prime subgroup; a canonical S is below it. */
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

/**
 * The y-coordinates of the eight points of small order (the 8-torsion subgroup): the identity
 * (0, 1); (0, -1) of order 2; (±√-1, 0) of order 4; and the four points of order 8, which share
 * y = ±Y8. Negating x keeps the order, so a point has small order exactly when its y is one of
 * these; the sign bit of the encoding does not matter. (Y8 is the y of [L]·Q for a point Q with a
 * torsion part; tests/unit/ed25519-strict.test.ts derives the whole set again with noble.)
 */
const Y8 = 0x05fc536d880238b13933c6d305acdfd5f098eff289f4c345b027b2c28f95e826n;
const SMALL_ORDER_Y = new Set([0n, 1n, P - 1n, Y8, P - Y8]);

/** Little-endian integer of `b[from..to)`, with bit 255 (the x sign bit of a point) cleared when asked. */
function littleEndian(b: Uint8Array, from: number, to: number, clearTopBit: boolean): bigint {
  // Four 64-bit words instead of 32 bytes: the verifier runs this three times per signature.
  const view = new DataView(b.buffer, b.byteOffset + from, to - from);
  let n = 0n;
  for (let w = (to - from) / 8 - 1; w >= 0; w--) n = (n << 64n) | view.getBigUint64(w * 8, true);
  return clearTopBit ? n & ~(1n << 255n) : n;
}

/** What is wrong with a 32-byte point encoding: y not reduced (y >= p), or a point of small order. */
function pointProblem(b: Uint8Array, from: number): 'non_canonical' | 'small_order' | null {
  const y = littleEndian(b, from, from + 32, true);
  // y >= p covers the non-canonical encodings of torsion points too (p ≡ 0, p + 1 ≡ 1, …);
  // x = 0 with the sign bit set happens only for y = ±1, which are small order.
  if (y >= P) return 'non_canonical';
  if (SMALL_ORDER_Y.has(y)) return 'small_order';
  return null;
}

/** Why a (public key, signature) pair is refused before any verification, or null if it may be verified. */
export type Ed25519InputProblem =
  | 'key_length'
  | 'signature_length'
  | 'key_non_canonical'
  | 'key_small_order'
  | 'r_non_canonical'
  | 'r_small_order'
  | 's_non_canonical';

/**
 * The strict rules every Parley verifier applies in front of Ed25519 verification, whatever the
 * library behind it (node:crypto/OpenSSL and WebCrypto accept some of these; noble others):
 * a 32-byte key and a 64-byte signature; S < L; A and R encoded canonically (y < p); A and R not of
 * small order. A small-order key verifies forged signatures (A = identity, R = identity, S = 0
 * verifies every message), and a small-order R lets signatures that prove nothing look valid.
 * Pure and cheap: byte arithmetic only, no point decompression.
 */
export function ed25519InputProblem(pub: Uint8Array, sig: Uint8Array): Ed25519InputProblem | null {
  if (!(pub instanceof Uint8Array) || pub.length !== 32) return 'key_length';
  if (!(sig instanceof Uint8Array) || sig.length !== 64) return 'signature_length';
  if (littleEndian(sig, 32, 64, false) >= L) return 's_non_canonical';
  const a = pointProblem(pub, 0);
  if (a) return a === 'small_order' ? 'key_small_order' : 'key_non_canonical';
  const r = pointProblem(sig, 0);
  if (r) return r === 'small_order' ? 'r_small_order' : 'r_non_canonical';
  return null;
}

/** True when the key and signature pass the strict rules (ed25519InputProblem is null). Never throws. */
export function isStrictEd25519Input(pub: Uint8Array, sig: Uint8Array): boolean {
  try {
    return ed25519InputProblem(pub, sig) === null;
  } catch {
    return false;
  }
}

/**
 * Never throws. The strict input check first, then noble's strict RFC 8032 mode (zip215: false)
 * rather than its ZIP-215 default, so that this verifier and node:crypto/OpenSSL and WebCrypto
 * (each behind the same check) do not disagree about an edge-case signature.
 */
export function nobleVerify(pub: Uint8Array, msg: Uint8Array, sig: Uint8Array): boolean {
  try {
    if (!isStrictEd25519Input(pub, sig)) return false;
    return ed.verify(sig, msg, pub, { zip215: false });
  } catch {
    return false;
  }
}

/** `seed` is the 32-byte RFC 8032 private key. */
export function nobleSign(seed: Uint8Array, msg: Uint8Array): Uint8Array {
  return ed.sign(msg, seed);
}

export function noblePublicKey(seed: Uint8Array): Uint8Array {
  return ed.getPublicKey(seed);
}
