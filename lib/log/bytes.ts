// Byte helpers shared by the log code. Browser-safe: no Buffer, no node: imports.

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

// ---- SHA-256 (FIPS 180-4) ---------------------------------------------------------------------
// Written for what the log hashes: many small inputs (a 65-byte tree node, an event of a few
// hundred bytes). No allocation per call but the result: one schedule array, one state, one padding
// block, reused (JS is single-threaded and nothing here yields). In a browser it is several times
// faster than a general-purpose library's object per hash; in Node it beats a native call's
// overhead on a tree node, and node:crypto wins on longer inputs (the server installs it).

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
const W = new Int32Array(64);
const H = new Int32Array(8);
const PAD = new Uint8Array(128);

/** One 64-byte block of `b` at `off` into the state H. */
function compress(b: Uint8Array, off: number): void {
  for (let t = 0; t < 16; t++) {
    const i = off + 4 * t;
    W[t] = (b[i]! << 24) | (b[i + 1]! << 16) | (b[i + 2]! << 8) | b[i + 3]!;
  }
  for (let t = 16; t < 64; t++) {
    const w15 = W[t - 15]!;
    const w2 = W[t - 2]!;
    const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3);
    const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10);
    W[t] = (W[t - 16]! + s0 + W[t - 7]! + s1) | 0;
  }
  let a = H[0]!, b1 = H[1]!, c = H[2]!, d = H[3]!, e = H[4]!, f = H[5]!, g = H[6]!, h = H[7]!;
  for (let t = 0; t < 64; t++) {
    const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + s1 + ((e & f) ^ (~e & g)) + K[t]! + W[t]!) | 0;
    const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (s0 + ((a & b1) ^ (a & c) ^ (b1 & c))) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b1;
    b1 = a;
    a = (t1 + t2) | 0;
  }
  H[0] = (H[0]! + a) | 0;
  H[1] = (H[1]! + b1) | 0;
  H[2] = (H[2]! + c) | 0;
  H[3] = (H[3]! + d) | 0;
  H[4] = (H[4]! + e) | 0;
  H[5] = (H[5]! + f) | 0;
  H[6] = (H[6]! + g) | 0;
  H[7] = (H[7]! + h) | 0;
}

/** SHA-256 of `data`, written to `out` at `offset` (32 bytes). */
export function sha256Into(data: Uint8Array, out: Uint8Array, offset = 0): void {
  H.set(IV);
  const n = data.length;
  const whole = n - (n % 64);
  for (let off = 0; off < whole; off += 64) compress(data, off);
  // The rest, 0x80, zeros, and the length in bits as 64 bits big-endian: one block or two.
  const rest = n - whole;
  PAD.fill(0);
  PAD.set(data.subarray(whole), 0);
  PAD[rest] = 0x80;
  const last = rest < 56 ? 64 : 128;
  const hi = Math.floor(n / 0x20000000); // (n * 8) >> 32, exact for any array length
  const lo = (n * 8) >>> 0;
  PAD[last - 8] = hi >>> 24;
  PAD[last - 7] = hi >>> 16;
  PAD[last - 6] = hi >>> 8;
  PAD[last - 5] = hi;
  PAD[last - 4] = lo >>> 24;
  PAD[last - 3] = lo >>> 16;
  PAD[last - 2] = lo >>> 8;
  PAD[last - 1] = lo;
  compress(PAD, 0);
  if (last === 128) compress(PAD, 64);
  for (let i = 0; i < 8; i++) {
    const v = H[i]!;
    out[offset + 4 * i] = v >>> 24;
    out[offset + 4 * i + 1] = v >>> 16;
    out[offset + 4 * i + 2] = v >>> 8;
    out[offset + 4 * i + 3] = v;
  }
}

/** SHA-256 in plain JS (the default everywhere until useSha256 swaps in another). */
export function sha256Js(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(32);
  sha256Into(data, out);
  return out;
}

let sha256Impl: (data: Uint8Array) => Uint8Array = sha256Js;

export function sha256(data: Uint8Array): Uint8Array {
  return sha256Impl(data);
}

/** Lets the server swap in node:crypto's SHA-256 (faster on long inputs); browsers keep sha256Js. */
export function useSha256(impl: (data: Uint8Array) => Uint8Array): void {
  sha256Impl = impl;
}

const HEX = '0123456789abcdef';
/** The two hex digits of each byte value, as two ASCII codes (high byte first). */
const BYTE_HEX = new Uint16Array(256);
for (let i = 0; i < 256; i++) BYTE_HEX[i] = (HEX.charCodeAt(i >> 4) << 8) | HEX.charCodeAt(i & 15);
const hexOut = new Uint8Array(128);
const ascii = new TextDecoder();

/**
 * Lower-case hex. The digits are written as ASCII into a buffer and decoded once: one flat string.
 * (Concatenating two-digit pieces builds a rope of 32 parts per hash — a 64-digit leaf hash then
 * took about 600 bytes until something flattened it, and most were kept as they were.)
 */
export function bytesToHex(b: Uint8Array): string {
  const n = b.length;
  const out = 2 * n <= hexOut.length ? hexOut : new Uint8Array(2 * n);
  for (let i = 0; i < n; i++) {
    const c = BYTE_HEX[b[i]!]!;
    out[2 * i] = c >> 8;
    out[2 * i + 1] = c & 255;
  }
  return ascii.decode(out.subarray(0, 2 * n));
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

const B64_CODES = Uint8Array.from(B64, (c) => c.charCodeAt(0));
const b64Out = new Uint8Array(128);

/**
 * Standard base64 with padding (RFC 4648 §4), as signed notes use. Written as ASCII into a buffer
 * and decoded once, as bytesToHex: appending four characters per three bytes built a rope of
 * about a hundred parts for a signature, several times the string's own size in garbage.
 */
export function bytesToBase64(b: Uint8Array): string {
  const n = b.length;
  const size = 4 * Math.ceil(n / 3);
  const out = size <= b64Out.length ? b64Out : new Uint8Array(size);
  let o = 0;
  for (let i = 0; i < n; i += 3) {
    const v = (b[i]! << 16) | ((b[i + 1] ?? 0) << 8) | (b[i + 2] ?? 0);
    out[o++] = B64_CODES[(v >> 18) & 63]!;
    out[o++] = B64_CODES[(v >> 12) & 63]!;
    out[o++] = i + 1 < n ? B64_CODES[(v >> 6) & 63]! : 61; // '='
    out[o++] = i + 2 < n ? B64_CODES[v & 63]! : 61;
  }
  return ascii.decode(out.subarray(0, size));
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
