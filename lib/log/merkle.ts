// RFC 6962 / RFC 9162 Merkle tree over a room's leaf hashes.
// All `leaves` arguments below are *leaf hashes* (32 bytes each, from leafHash), not raw data.
import { bytesEqual, hexToBytes, sha256, sha256Into, bytesToHex } from './bytes';
import { ByteWriter } from './jcs';

export const HASH_LEN = 32;

const encoder = new TextEncoder();
/** 0x00 ‖ data, written in place: no concatenation per leaf. Grows to the largest event seen. */
let leafScratch = new Uint8Array(4096);
/** 0x01 ‖ left ‖ right. Hashing is synchronous, so one buffer serves every call. */
const nodeScratch = new Uint8Array(1 + 2 * HASH_LEN);
nodeScratch[0] = 0x01;
const siblings = nodeScratch.subarray(1);

/** SHA-256(0x00 ‖ data): the domain prefix stops a leaf from posing as an inner node. */
export function leafHash(data: Uint8Array): Uint8Array {
  if (leafScratch.length < data.length + 1) leafScratch = new Uint8Array(Math.max(data.length + 1, 2 * leafScratch.length));
  leafScratch[0] = 0x00;
  leafScratch.set(data, 1);
  return sha256(leafScratch.subarray(0, data.length + 1));
}

/** leafHash(UTF-8 of text), encoding straight behind the prefix (an event's canonical JSON). */
export function leafHashOfText(text: string): Uint8Array {
  // UTF-8 takes at most 3 bytes per UTF-16 code unit.
  if (leafScratch.length < 3 * text.length + 1) leafScratch = new Uint8Array(Math.max(3 * text.length + 1, 2 * leafScratch.length));
  leafScratch[0] = 0x00;
  const { written } = encoder.encodeInto(text, leafScratch.subarray(1));
  return sha256(leafScratch.subarray(0, written + 1));
}

/** 0x00 ‖ JCS bytes, written in place (one buffer, grown to the largest value seen). */
const canonicalLeaf = new ByteWriter(4096, 1);

/** leafHash(JCS bytes of value): an event's leaf hash, its canonical JSON written straight behind the prefix. */
export function leafHashOfCanonical(value: unknown): Uint8Array {
  canonicalLeaf.reset(1);
  canonicalLeaf.value(value);
  canonicalLeaf.buf[0] = 0x00;
  return sha256(canonicalLeaf.buf.subarray(0, canonicalLeaf.pos));
}

/** leafHashOfCanonical(o) for a plain object whose own keys are all in `keys` (sorted; ByteWriter.knownObject). */
export function leafHashOfKnownObject(o: Record<string, unknown>, keys: readonly string[]): Uint8Array {
  canonicalLeaf.reset(1);
  canonicalLeaf.knownObject(o, keys);
  canonicalLeaf.buf[0] = 0x00;
  return sha256(canonicalLeaf.buf.subarray(0, canonicalLeaf.pos));
}

/**
 * SHA-256(0x01 ‖ left ‖ right). Always the plain-JS SHA-256 (sha256Into): on 65 bytes it is faster
 * than the call into node:crypto, and it writes no intermediate buffer.
 */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  if (left.length !== HASH_LEN || right.length !== HASH_LEN) return nodeHashAnyLength(left, right);
  nodeScratch.set(left, 1);
  nodeScratch.set(right, 1 + HASH_LEN);
  const out = new Uint8Array(HASH_LEN);
  sha256Into(nodeScratch, out);
  return out;
}

function nodeHashAnyLength(left: Uint8Array, right: Uint8Array): Uint8Array {
  const buf = new Uint8Array(1 + left.length + right.length);
  buf[0] = 0x01;
  buf.set(left, 1);
  buf.set(right, 1 + left.length);
  return sha256(buf);
}

/** MTH({}) = SHA-256 of the empty string. */
export const EMPTY_ROOT: Uint8Array = sha256(new Uint8Array(0));

/** Largest power of two strictly less than n (n >= 2): the RFC 6962 split point. */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

// BigInt past 2^30 so sizes past 2^31 do not wrap in 32-bit bitwise operators.
const isPow2 = (n: number) => n > 0 && (n <= 0x40000000 ? (n & (n - 1)) === 0 : (BigInt(n) & BigInt(n - 1)) === 0n);

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

const HEX_PER_NODE = 2 * HASH_LEN;

/**
 * A frontier as a room's row stores it: its nodes' hex one after another, 64 digits a node. An
 * append replaces only a frontier's last nodes and shares the others, so given the frontier
 * `before` it (and `beforeText`, its text) only the new nodes are converted.
 */
export function frontierToText(frontier: Frontier, before?: Frontier, beforeText?: string): string {
  let shared = 0;
  if (before && beforeText?.length === before.length * HEX_PER_NODE) {
    while (shared < before.length && shared < frontier.length && frontier[shared] === before[shared]) shared++;
  }
  let text = beforeText?.slice(0, shared * HEX_PER_NODE) ?? '';
  for (let i = shared; i < frontier.length; i++) text += bytesToHex(frontier[i]);
  return text;
}

/** The frontier of a row's text: frontierToText's, or the JSON array of hex nodes rows held before it. */
export function frontierFromText(text: string): Frontier {
  const hexes: string[] = [];
  if (text.startsWith('[')) hexes.push(...(JSON.parse(text) as string[]));
  else for (let i = 0; i < text.length; i += HEX_PER_NODE) hexes.push(text.slice(i, i + HEX_PER_NODE));
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
  return consistencyPath(m, n, subtree);
}

function consistencyPath(m: number, n: number, subtree: SubtreeHash): Uint8Array[] {
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

// ---------------------------------------------------------------------------------------------
// A whole tree kept as it grows: every leaf and the root of every aligned perfect subtree, each
// level one flat byte array (about 64 bytes per leaf in all). Appending costs one hash per carry,
// n - 1 node hashes for n leaves; the root at any size is then popcount(size) - 1 hashes, and any
// subtree or proof O(log n). The verifier builds one over a room's events as they stream past.

export class MerkleTree {
  /** levels[h] holds the roots of the perfect subtrees of 2^h leaves, in order, 32 bytes each. */
  private levels: Uint8Array[] = [new Uint8Array(64 * HASH_LEN)];
  private counts: number[] = [0];
  private sizeNow = 0;

  get size(): number {
    return this.sizeNow;
  }

  /** Appends a 32-byte leaf hash (copied). */
  append(leaf: Uint8Array): void {
    if (leaf.length !== HASH_LEN) throw new Error('merkle: leaf hash must be 32 bytes');
    let i = this.counts[0]!;
    this.reserve(0, i);
    this.levels[0]!.set(leaf, i * HASH_LEN);
    this.counts[0] = i + 1;
    // A node with an odd index completes its parent (binary increment's carry). Siblings lie side
    // by side in their level, so the parent is hashed from one 64-byte copy straight into its own.
    for (let h = 0; i % 2 === 1; h++) {
      const parent = (i - 1) / 2;
      siblings.set(this.levels[h]!.subarray((i - 1) * HASH_LEN, (i + 1) * HASH_LEN));
      if (h + 1 === this.levels.length) {
        this.levels.push(new Uint8Array(Math.max(64, this.levels[h]!.length / (2 * HASH_LEN)) * HASH_LEN));
        this.counts.push(0);
      }
      this.reserve(h + 1, parent);
      sha256Into(nodeScratch, this.levels[h + 1]!, parent * HASH_LEN);
      this.counts[h + 1] = parent + 1;
      i = parent;
    }
    this.sizeNow++;
  }

  /** Leaf hash `i` (a view: copy it to keep it past later appends). */
  leaf(i: number): Uint8Array {
    if (!Number.isSafeInteger(i) || i < 0 || i >= this.sizeNow) throw new Error(`merkle: no leaf ${i}`);
    return this.node(0, i);
  }

  /** MTH(D[0:size]). */
  root(size: number = this.sizeNow): Uint8Array {
    this.checkSize(size);
    return this.mth(0, size).slice();
  }

  /** MTH(D[start:end]) (a new array): stored when the range is an aligned perfect subtree, else O(log n) hashes. */
  readonly subtree: SubtreeHash = (start, end) => {
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || start > end || end > this.sizeNow) {
      throw new Error(`merkle: no subtree [${start}, ${end}) in a tree of ${this.sizeNow} leaves`);
    }
    return this.mth(start, end).slice();
  };

  /** Stored nodes are written once and never change (a grown level keeps the old bytes), so views are safe here. */
  private mth(start: number, end: number): Uint8Array {
    const n = end - start;
    if (n === 0) return EMPTY_ROOT;
    if (isPow2(n) && start % n === 0) return this.node(Math.log2(n), start / n);
    const k = splitPoint(n);
    return nodeHash(this.mth(start, start + k), this.mth(start + k, end));
  }

  /** PROOF(m, D[0:n]) (RFC 9162 §2.1.4.1) from the stored nodes. */
  consistencyProof(m: number, n: number = this.sizeNow): Uint8Array[] {
    this.checkSize(n);
    return consistencyPath(m, n, this.subtree);
  }

  private checkSize(size: number): void {
    if (!Number.isSafeInteger(size) || size < 0 || size > this.sizeNow) {
      throw new Error(`merkle: size ${size} out of range (have ${this.sizeNow} leaves)`);
    }
  }

  private node(h: number, i: number): Uint8Array {
    return this.levels[h]!.subarray(i * HASH_LEN, (i + 1) * HASH_LEN);
  }

  /** Room in level h for node i. */
  private reserve(h: number, i: number): void {
    const level = this.levels[h]!;
    if ((i + 1) * HASH_LEN > level.length) {
      const grown = new Uint8Array(2 * level.length);
      grown.set(level);
      this.levels[h] = grown;
    }
  }
}
