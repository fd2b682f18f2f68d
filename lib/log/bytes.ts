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
/** The two hex digits of each byte value. */
const BYTE_HEX: string[] = Array.from({ length: 256 }, (_, i) => HEX[i >> 4] + HEX[i & 15]);

export function bytesToHex(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i++) s += BYTE_HEX[b[i]];
  return s;
}

/** The value of a hex digit's char code, or -1. */
function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48; // 0-9
  const l = c | 0x20; // A-F and a-f alike
  return l >= 97 && l <= 102 ? l - 87 : -1;
}

/** Strict: even length, [0-9a-fA-F] only; throws otherwise. */
export function hexToBytes(hex: string): Uint8Array {
  if (typeof hex !== 'string' || hex.length % 2 !== 0) throw new Error('invalid hex');
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) {
    const hi = hexDigit(hex.charCodeAt(2 * i));
    const lo = hexDigit(hex.charCodeAt(2 * i + 1));
    if (hi < 0 || lo < 0) throw new Error('invalid hex');
    out[i] = (hi << 4) | lo;
  }
  return out;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** The value of each base64 character by char code (ASCII), -1 for any other. */
const B64_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < B64.length; i++) B64_VALUE[B64.charCodeAt(i)] = i;

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
  if (typeof s !== 'string' || s.length % 4 !== 0) throw new Error('invalid base64');
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  const digits = s.length - pad;
  const out = new Uint8Array((s.length / 4) * 3 - pad);
  let o = 0;
  let last = 0;
  for (let i = 0; i < s.length; i += 4) {
    let n = 0;
    for (let j = i; j < i + 4; j++) {
      let v = 0; // '=' padding counts as zero bits
      if (j < digits) {
        const c = s.charCodeAt(j);
        v = c < 128 ? B64_VALUE[c] : -1;
        if (v < 0) throw new Error('invalid base64'); // also an '=' before the end
        last = v;
      }
      n = (n << 6) | v;
    }
    out[o++] = n >> 16;
    if (o < out.length) out[o++] = (n >> 8) & 255;
    if (o < out.length) out[o++] = n & 255;
  }
  // The last digit's bits past the data must be zero: 2 of them with one '=', 4 with two.
  if ((pad === 1 && (last & 3) !== 0) || (pad === 2 && (last & 15) !== 0)) throw new Error('non-canonical base64');
  return out;
}

/** Plain equality; these values are public hashes/signatures, so timing does not matter. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
