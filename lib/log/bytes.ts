// Byte helpers shared by the log code. Browser-safe: no Buffer, no node: imports.
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

const encoder = new TextEncoder();

export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}


export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let len = 0;
  for (const p of parts) len += p.length;
  const out = new Uint8Array(len);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

let sha256Impl: (data: Uint8Array) => Uint8Array = nobleSha256;

export function sha256(data: Uint8Array): Uint8Array {
  return sha256Impl(data);
}

/** Lets the server swap in node:crypto's SHA-256 (several times faster); browsers keep noble's. */
export function useSha256(impl: (data: Uint8Array) => Uint8Array): void {
  sha256Impl = impl;
}

const HEX = '0123456789abcdef';

export function bytesToHex(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i++) s += HEX[b[i] >> 4] + HEX[b[i] & 15];
  return s;
}

/** Strict: even length, [0-9a-fA-F] only; throws otherwise. */
export function hexToBytes(hex: string): Uint8Array {
  if (typeof hex !== 'string' || hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
    throw new Error('invalid hex');
  }
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64_INDEX: Record<string, number> = {};
for (let i = 0; i < B64.length; i++) B64_INDEX[B64[i]] = i;

/** Standard base64 with padding (RFC 4648 §4), as signed notes use. */
export function bytesToBase64(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i += 3) {
    const n = (b[i] << 16) | ((b[i + 1] ?? 0) << 8) | (b[i + 2] ?? 0);
    s += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
    s += i + 1 < b.length ? B64[(n >> 6) & 63] : '=';
    s += i + 2 < b.length ? B64[n & 63] : '=';
  }
  return s;
}

/**
 * Strict standard base64: padded, no whitespace, and non-zero unused bits rejected, so each
 * byte string has exactly one accepted encoding (a note cannot be altered without breaking it).
 */
export function base64ToBytes(s: string): Uint8Array {
  if (typeof s !== 'string' || s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) {
    throw new Error('invalid base64');
  }
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  const out = new Uint8Array((s.length / 4) * 3 - pad);
  let o = 0;
  const at = (i: number) => (s[i] === '=' ? 0 : B64_INDEX[s[i]]);
  for (let i = 0; i < s.length; i += 4) {
    const n = (at(i) << 18) | (at(i + 1) << 12) | (at(i + 2) << 6) | at(i + 3);
    out[o++] = n >> 16;
    if (o < out.length) out[o++] = (n >> 8) & 255;
    if (o < out.length) out[o++] = n & 255;
  }
  if (bytesToBase64(out) !== s) throw new Error('non-canonical base64');
  return out;
}

/** Plain equality; these values are public hashes/signatures, so timing does not matter. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
