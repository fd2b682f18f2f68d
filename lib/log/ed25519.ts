// Ed25519 via @noble/ed25519, synchronous, usable in the browser and the offline verifier.
// (The server may sign with node:crypto instead; both produce identical RFC 8032 signatures.)
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';

// noble v3 ships without a sync SHA-512; the sync API needs one.
ed.hashes.sha512 = sha512;

/**
 * Never throws. Uses noble's strict RFC 8032 mode (zip215: false) rather than its ZIP-215
 * default, so that this verifier rejects non-canonical encodings the way node:crypto/OpenSSL do
 * and the browser, the CLI and the server do not disagree about an edge-case signature.
 */
export function nobleVerify(pub: Uint8Array, msg: Uint8Array, sig: Uint8Array): boolean {
  try {
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
