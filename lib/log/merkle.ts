// RFC 6962 / RFC 9162 Merkle tree over a room's leaf hashes.
// All `leaves` arguments below are *leaf hashes* (32 bytes each, from leafHash), not raw data.
import { bytesEqual, concatBytes, hexToBytes, sha256, bytesToHex } from './bytes';

export const HASH_LEN = 32;
const LEAF_PREFIX = new Uint8Array([0x00]);
const NODE_PREFIX = new Uint8Array([0x01]);

/** SHA-256(0x00 ‖ data): the domain prefix stops a leaf from posing as an inner node. */
export function leafHash(data: Uint8Array): Uint8Array {
  return sha256(concatBytes(LEAF_PREFIX, data));
}

/** SHA-256(0x01 ‖ left ‖ right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return sha256(concatBytes(NODE_PREFIX, left, right));
}

/** MTH({}) = SHA-256 of the empty string. */
export const EMPTY_ROOT: Uint8Array = sha256(new Uint8Array(0));

/** Largest power of two strictly less than n (n >= 2): the RFC 6962 split point. */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

// BigInt so sizes past 2^31 do not wrap in 32-bit bitwise operators.
const isPow2 = (n: number) => n > 0 && (BigInt(n) & BigInt(n - 1)) === 0n;

/**
 * A memoised MTH over a growing list of leaves: the root of an aligned perfect subtree never
 * changes once its leaves exist, so it is computed once; any other range costs O(log n) hashes.
 */
export function memoisedSubtree(leaves: Uint8Array[], memo: Map<string, Uint8Array>): SubtreeHash {
  const mth = (start: number, end: number): Uint8Array => {
    const n = end - start;
    if (n === 0) return EMPTY_ROOT;
    if (n === 1) return leaves[start];
    const key = isPow2(n) ? `${start}:${n}` : null;
    const known = key ? memo.get(key) : undefined;
    if (known) return known;
    const k = splitPoint(n);
    const root = nodeHash(mth(start, start + k), mth(start + k, end));
    if (key) memo.set(key, root);
    return root;
  };
  return mth;
}

/** MTH(leaves[start:end]). */
export function subtreeRoot(leaves: Uint8Array[], start: number, end: number): Uint8Array {
  const n = end - start;
  if (n === 0) return EMPTY_ROOT;
  if (n === 1) return leaves[start];
  const k = splitPoint(n);
  return nodeHash(subtreeRoot(leaves, start, start + k), subtreeRoot(leaves, start + k, end));
}

export function rootOf(leaves: Uint8Array[]): Uint8Array {
  return subtreeRoot(leaves, 0, leaves.length);
}

// ---------------------------------------------------------------------------------------------
// Right-edge frontier: lets the server append a leaf and get the new root in O(log n) without
// reloading the room. For size n the frontier holds the roots of the perfect subtrees that
// make up the tree, one per set bit of n, largest (leftmost) first.

export type Frontier = Uint8Array[];

function popcount(n: number): number {
  let c = 0;
  for (let s = n; s > 0; s = Math.floor(s / 2)) c += s % 2;
  return c;
}

/** Frontier after appending `leaf` to a tree of `size` leaves. Does not mutate its input. */
export function frontierAppend(frontier: Frontier, size: number, leaf: Uint8Array): Frontier {
  if (!Number.isSafeInteger(size) || size < 0 || frontier.length !== popcount(size)) {
    throw new Error(`merkle: frontier of length ${frontier.length} does not fit size ${size}`);
  }
  if (leaf.length !== HASH_LEN) throw new Error('merkle: leaf hash must be 32 bytes');
  const f = [...frontier, leaf];
  // Like binary increment: every trailing 1-bit of size is a perfect subtree of the same
  // height as the carry, so they merge.
  for (let s = size; s % 2 === 1; s = Math.floor(s / 2)) {
    const right = f.pop()!;
    const left = f.pop()!;
    f.push(nodeHash(left, right));
  }
  return f;
}

/** Root of the tree a frontier describes; RFC 6962's split nests to the right, so fold from there. */
export function frontierRoot(frontier: Frontier): Uint8Array {
  if (frontier.length === 0) return EMPTY_ROOT;
  let acc = frontier[frontier.length - 1];
  for (let i = frontier.length - 2; i >= 0; i--) acc = nodeHash(frontier[i], acc);
  return acc;
}

export function frontierToHex(frontier: Frontier): string[] {
  return frontier.map(bytesToHex);
}

export function frontierFromHex(hexes: string[]): Frontier {
  return hexes.map((h) => {
    const b = hexToBytes(h);
    if (b.length !== HASH_LEN) throw new Error('merkle: frontier entry must be 32 bytes');
    return b;
  });
}

// ---------------------------------------------------------------------------------------------
// Proofs, RFC 9162 §2.1.3 (inclusion) and §2.1.4 (consistency).

function checkRange(leaves: Uint8Array[], size: number) {
  if (!Number.isSafeInteger(size) || size < 0 || size > leaves.length) {
    throw new Error(`merkle: size ${size} out of range (have ${leaves.length} leaves)`);
  }
}

/** MTH over leaves[start:end]; a server may pass a memoised one (perfect subtrees never change). */
export type SubtreeHash = (start: number, end: number) => Uint8Array;

/** PATH(index, D[0:size]) (RFC 9162 §2.1.3.1). Throws on out-of-range input. */
export function inclusionProof(leaves: Uint8Array[], index: number, size: number, subtree: SubtreeHash = (a, b) => subtreeRoot(leaves, a, b)): Uint8Array[] {
  checkRange(leaves, size);
  if (!Number.isSafeInteger(index) || index < 0 || index >= size) {
    throw new Error(`merkle: index ${index} not in a tree of size ${size}`);
  }
  const path = (m: number, start: number, end: number): Uint8Array[] => {
    const n = end - start;
    if (n === 1) return [];
    const k = splitPoint(n);
    return m < k
      ? [...path(m, start, start + k), subtree(start + k, end)]
      : [...path(m - k, start + k, end), subtree(start, start + k)];
  };
  return path(index, 0, size);
}

const isHash = (h: unknown): h is Uint8Array => h instanceof Uint8Array && h.length === HASH_LEN;
const isProof = (p: unknown): p is Uint8Array[] => Array.isArray(p) && p.every(isHash);
const isSize = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;

/** RFC 9162 §2.1.3.2. Never throws: malformed input is simply not a valid proof. */
export function verifyInclusion(
  leaf: Uint8Array,
  index: number,
  size: number,
  proof: Uint8Array[],
  root: Uint8Array,
): boolean {
  if (!isHash(leaf) || !isHash(root) || !isProof(proof) || !isSize(index) || !isSize(size)) {
    return false;
  }
  if (index >= size) return false;
  // BigInt keeps the bit-twiddling correct past 2^31.
  let fn = BigInt(index);
  let sn = BigInt(size - 1);
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      r = nodeHash(p, r);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && bytesEqual(r, root);
}

/** PROOF(m, D[0:n]) (RFC 9162 §2.1.4.1). Empty for m == n; throws for m == 0 or m > n. */
export function consistencyProof(leaves: Uint8Array[], m: number, n: number, subtree: SubtreeHash = (a, b) => subtreeRoot(leaves, a, b)): Uint8Array[] {
  checkRange(leaves, n);
  if (!Number.isSafeInteger(m) || m < 1 || m > n) {
    throw new Error(`merkle: no consistency proof from ${m} to ${n}`);
  }
  // b = "the old tree is exactly this subtree's left edge so far": its root is already known
  // to the verifier, so it is left out.
  const sub = (m: number, start: number, end: number, b: boolean): Uint8Array[] => {
    const n = end - start;
    if (m === n) return b ? [] : [subtree(start, end)];
    const k = splitPoint(n);
    return m <= k
      ? [...sub(m, start, start + k, b), subtree(start + k, end)]
      : [...sub(m - k, start + k, end, false), subtree(start, start + k)];
  };
  return sub(m, 0, n, true);
}

/** RFC 9162 §2.1.4.2. Never throws: malformed input is simply not a valid proof. */
export function verifyConsistency(
  m: number,
  n: number,
  proof: Uint8Array[],
  rootM: Uint8Array,
  rootN: Uint8Array,
): boolean {
  if (!isHash(rootM) || !isHash(rootN) || !isProof(proof) || !isSize(m) || !isSize(n)) {
    return false;
  }
  if (m === 0 || m > n) return false;
  if (m === n) return proof.length === 0 && bytesEqual(rootM, rootN);
  if (proof.length === 0) return false;
  // When m is a power of two the old root is itself a node of the new tree, and the proof
  // omits it.
  const path = isPow2(m) ? [rootM, ...proof] : proof;
  let fn = BigInt(m - 1);
  let sn = BigInt(n - 1);
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && bytesEqual(fr, rootM) && bytesEqual(sr, rootN);
}
