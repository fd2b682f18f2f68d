import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  EMPTY_ROOT,
  consistencyProof,
  frontierAppend,
  frontierFromText,
  frontierRoot,
  frontierToText,
  inclusionProof,
  leafHash,
  nodeHash,
  rootOf,
  subtreeRoot,
  verifyConsistency,
  verifyInclusion,
  type Frontier,
} from '../../lib/log/merkle';
import { base64ToBytes, bytesToBase64, bytesToHex, hexToBytes, utf8 } from '../../lib/log/bytes';

const fixture = JSON.parse(
  readFileSync(new URL('../fixtures/event-log-v1.json', import.meta.url), 'utf8'),
);

/** Deterministic pseudo-random leaves (a seeded xorshift), so failures reproduce. */
function makeLeaves(n: number, seed = 1): Uint8Array[] {
  let x = seed * 2654435761 || 1;
  return Array.from({ length: n }, () => {
    const b = new Uint8Array(8);
    for (let i = 0; i < 8; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      b[i] = x & 255;
    }
    return leafHash(b);
  });
}

const flipBit = (h: Uint8Array, bit: number) => {
  const c = h.slice();
  c[bit >> 3] ^= 1 << (bit & 7);
  return c;
};
const JUNK = leafHash(utf8('junk'));

test('EMPTY_ROOT is SHA-256 of the empty string', () => {
  assert.equal(
    bytesToHex(EMPTY_ROOT),
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  );
  assert.deepEqual(rootOf([]), EMPTY_ROOT);
  assert.deepEqual(frontierRoot([]), EMPTY_ROOT);
});

test('RFC 6962 reference roots (sizes 1..8)', () => {
  const { leaves_hex, roots_hex } = fixture.rfc6962_reference_roots as {
    leaves_hex: string[];
    roots_hex: string[];
  };
  const leaves = leaves_hex.map((h) => leafHash(hexToBytes(h)));
  let frontier: Frontier = [];
  for (let n = 1; n <= leaves.length; n++) {
    assert.equal(bytesToHex(rootOf(leaves.slice(0, n))), roots_hex[n - 1], `rootOf size ${n}`);
    frontier = frontierAppend(frontier, n - 1, leaves[n - 1]);
    assert.equal(bytesToHex(frontierRoot(frontier)), roots_hex[n - 1], `frontier size ${n}`);
  }
});

test('frontier built incrementally matches rootOf for sizes 0..70', () => {
  const leaves = makeLeaves(70, 7);
  let frontier: Frontier = [];
  assert.deepEqual(frontierRoot(frontier), rootOf([]));
  for (let n = 1; n <= 70; n++) {
    const before = frontier;
    const snapshot = frontierToText(before);
    frontier = frontierAppend(frontier, n - 1, leaves[n - 1]);
    assert.deepEqual(frontierToText(before), snapshot, 'frontierAppend must not mutate its input');
    // One entry per set bit of n.
    assert.equal(frontier.length, n.toString(2).replace(/0/g, '').length);
    assert.deepEqual(frontierRoot(frontier), rootOf(leaves.slice(0, n)), `size ${n}`);
    // Round trip through storage form, converted whole and from the frontier before (only its new nodes).
    const text = frontierToText(frontier);
    assert.equal(text.length, 64 * frontier.length);
    assert.equal(frontierToText(frontier, before, snapshot), text);
    assert.deepEqual(frontierFromText(text), frontier);
    // Rows written before held a JSON array of the nodes' hex: read, and converted whole after.
    assert.deepEqual(frontierFromText(JSON.stringify(frontier.map(bytesToHex))), frontier);
    assert.equal(frontierToText(frontier, before, JSON.stringify(before.map(bytesToHex))), text);
  }
});

test('frontierAppend refuses a frontier that does not fit the size', () => {
  const leaves = makeLeaves(3);
  const f2 = frontierAppend(frontierAppend([], 0, leaves[0]), 1, leaves[1]);
  assert.throws(() => frontierAppend(f2, 2 + 1, leaves[2])); // size 3 needs 2 entries
  assert.throws(() => frontierAppend([], 0, new Uint8Array(31)));
  assert.throws(() => frontierFromText('abcd'));
  assert.throws(() => frontierFromText('["abcd"]'));
  assert.throws(() => frontierFromText('zz'.repeat(32)));
});

test('C2SP merkle-tree.md seven-entry example', () => {
  const d = ['d0', 'd1', 'd2', 'd3', 'd4', 'd5', 'd6'].map((s) => leafHash(utf8(s)));
  const [a, b, c, dd, e, f, g] = d;
  const h = nodeHash(a, b);
  const i = nodeHash(c, dd);
  const j = nodeHash(e, f);
  const k = nodeHash(h, i);
  const l = nodeHash(j, g);
  const root = nodeHash(k, l);
  assert.deepEqual(rootOf(d), root);
  assert.deepEqual(subtreeRoot(d, 4, 7), l);
  assert.deepEqual(inclusionProof(d, 0, 7), [b, i, l]);
  assert.deepEqual(inclusionProof(d, 3, 7), [c, h, l]);
  assert.deepEqual(inclusionProof(d, 4, 7), [f, g, k]);
  assert.deepEqual(inclusionProof(d, 6, 7), [j, k]);
  assert.deepEqual(consistencyProof(d, 3, 7), [c, dd, h, l]);
  assert.deepEqual(consistencyProof(d, 4, 7), [l]);
  assert.deepEqual(consistencyProof(d, 6, 7), [j, g, k]);
});

test('fixture inclusion and consistency vectors reproduce exactly', () => {
  const leaves = (fixture.events as { leaf_hash: string }[]).map((e) => hexToBytes(e.leaf_hash));
  for (const v of fixture.inclusion as { leaf_index: number; size: number; proof: string[] }[]) {
    const proof = inclusionProof(leaves, v.leaf_index, v.size);
    assert.deepEqual(proof.map(bytesToBase64), v.proof, `inclusion ${v.leaf_index}/${v.size}`);
    const root = rootOf(leaves.slice(0, v.size));
    assert.ok(verifyInclusion(leaves[v.leaf_index], v.leaf_index, v.size, v.proof.map(base64ToBytes), root));
  }
  for (const v of fixture.consistency as { from: number; to: number; proof: string[] }[]) {
    const proof = consistencyProof(leaves, v.from, v.to);
    assert.deepEqual(proof.map(bytesToBase64), v.proof, `consistency ${v.from}->${v.to}`);
    const rootM = rootOf(leaves.slice(0, v.from));
    const rootN = rootOf(leaves.slice(0, v.to));
    assert.ok(verifyConsistency(v.from, v.to, v.proof.map(base64ToBytes), rootM, rootN));
  }
});

/** Every way of damaging a proof that must stop it verifying. */
function* proofMutations(proof: Uint8Array[]): Generator<[string, Uint8Array[]]> {
  for (let i = 0; i < proof.length; i++) {
    for (const bit of [0, 7, 128, 255]) {
      yield [`flip bit ${bit} of element ${i}`, proof.map((p, j) => (j === i ? flipBit(p, bit) : p))];
    }
    yield [`drop element ${i}`, proof.filter((_, j) => j !== i)];
  }
  yield ['append element', [...proof, JUNK]];
  yield ['prepend element', [JUNK, ...proof]];
  if (proof.length > 0) yield ['duplicate last element', [...proof, proof[proof.length - 1]]];
  if (proof.length > 1) yield ['reversed', [...proof].reverse()];
}

const N = 16;
const LEAVES = makeLeaves(N, 3);
const ROOTS = Array.from({ length: N + 1 }, (_, n) => rootOf(LEAVES.slice(0, n)));

test('inclusion proofs verify for every (index, size) up to 16, and every mutation fails', () => {
  let verified = 0;
  let probes = 0;
  for (let size = 1; size <= N; size++) {
    for (let index = 0; index < size; index++) {
      const leaf = LEAVES[index];
      const root = ROOTS[size];
      const proof = inclusionProof(LEAVES, index, size);
      assert.ok(verifyInclusion(leaf, index, size, proof, root), `${index}/${size}`);
      verified++;
      const bad = (why: string, ok: boolean) => {
        probes++;
        assert.equal(ok, false, `${index}/${size}: ${why} still verifies`);
      };
      for (const [why, p] of proofMutations(proof)) bad(why, verifyInclusion(leaf, index, size, p, root));
      bad('index+1', verifyInclusion(leaf, index + 1, size, proof, root));
      if (index > 0) bad('index-1', verifyInclusion(leaf, index - 1, size, proof, root));
      bad('size*2', verifyInclusion(leaf, index, size * 2, proof, root));
      const half = Math.floor(size / 2);
      if (half !== size) bad('size/2', verifyInclusion(leaf, index, half, proof, root));
      // No 'size+1' probe: RFC 9162 proofs bind a (size, root) *pair*, and e.g. the size-3 proof
      // for index 0 also checks against (size 4, root of size 3), reading leaf 2 as a subtree
      // hash. Harmless because both numbers come from one signed checkpoint.
      bad('other leaf', verifyInclusion(flipBit(leaf, 3), index, size, proof, root));
      bad('flipped root', verifyInclusion(leaf, index, size, proof, flipBit(root, 9)));
      if (size > 1) bad('root of other size', verifyInclusion(leaf, index, size, proof, ROOTS[size - 1]));
    }
  }
  assert.equal(verified, (N * (N + 1)) / 2);
  assert.ok(probes > 1000);
});

test('consistency proofs verify for every (m, n) up to 16, and every mutation fails', () => {
  let probes = 0;
  for (let n = 1; n <= N; n++) {
    for (let m = 1; m <= n; m++) {
      const proof = consistencyProof(LEAVES, m, n);
      const [rm, rn] = [ROOTS[m], ROOTS[n]];
      assert.ok(verifyConsistency(m, n, proof, rm, rn), `${m}->${n}`);
      if (m === n) assert.equal(proof.length, 0);
      const bad = (why: string, ok: boolean) => {
        probes++;
        assert.equal(ok, false, `${m}->${n}: ${why} still verifies`);
      };
      for (const [why, p] of proofMutations(proof)) bad(why, verifyConsistency(m, n, p, rm, rn));
      if (m !== n) bad('swapped roots', verifyConsistency(m, n, proof, rn, rm));
      bad('flipped old root', verifyConsistency(m, n, proof, flipBit(rm, 1), rn));
      bad('flipped new root', verifyConsistency(m, n, proof, rm, flipBit(rn, 1)));
      bad('m+1', verifyConsistency(m + 1, n, proof, rm, rn));
      bad('m-1', verifyConsistency(m - 1, n, proof, rm, rn));
      bad('n*2', verifyConsistency(m, n * 2, proof, rm, rn));
      const half = Math.floor(n / 2);
      if (half !== n) bad('n/2', verifyConsistency(m, half, proof, rm, rn));
      if (m * 2 !== m) bad('m*2', verifyConsistency(m * 2, n, proof, rm, rn));
      if (m !== n) bad('m > n (sizes swapped)', verifyConsistency(n, m, proof, rn, rm));
    }
  }
  assert.ok(probes > 1000);
});

test('verifiers return false, never throw, on malformed input', () => {
  const leaf = LEAVES[0];
  const proof = inclusionProof(LEAVES, 0, 4);
  const root = ROOTS[4];
  const garbage: unknown[] = [undefined, null, 'x', 1.5, -1, NaN, {}, [1], [new Uint8Array(31)], new Uint8Array(33)];
  for (const g of garbage) {
    const a = g as never;
    assert.equal(verifyInclusion(a, 0, 4, proof, root), false);
    assert.equal(verifyInclusion(leaf, a, 4, proof, root), false);
    assert.equal(verifyInclusion(leaf, 0, a, proof, root), false);
    assert.equal(verifyInclusion(leaf, 0, 4, a, root), false);
    assert.equal(verifyInclusion(leaf, 0, 4, proof, a), false);
    assert.equal(verifyConsistency(a, 4, proof, ROOTS[1], root), false);
    assert.equal(verifyConsistency(1, a, proof, ROOTS[1], root), false);
    assert.equal(verifyConsistency(1, 4, a, ROOTS[1], root), false);
    assert.equal(verifyConsistency(1, 4, proof, a, root), false);
    assert.equal(verifyConsistency(1, 4, proof, ROOTS[1], a), false);
  }
  // m == 0 is not a meaningful claim here, even with an empty proof.
  assert.equal(verifyConsistency(0, 4, [], EMPTY_ROOT, root), false);
  assert.equal(verifyConsistency(0, 0, [], EMPTY_ROOT, EMPTY_ROOT), false);
  // m == n: empty proof verifies iff the roots are equal.
  assert.equal(verifyConsistency(4, 4, [], root, root), true);
  assert.equal(verifyConsistency(4, 4, [], root, ROOTS[3]), false);
  assert.equal(verifyConsistency(4, 4, [JUNK], root, root), false);
  // index >= size.
  assert.equal(verifyInclusion(leaf, 4, 4, proof, root), false);
});

test('proof generators reject out-of-range requests', () => {
  assert.throws(() => inclusionProof(LEAVES, 4, 4));
  assert.throws(() => inclusionProof(LEAVES, 0, N + 1));
  assert.throws(() => consistencyProof(LEAVES, 0, 4));
  assert.throws(() => consistencyProof(LEAVES, 5, 4));
  assert.deepEqual(consistencyProof(LEAVES, 4, 4), []);
});
