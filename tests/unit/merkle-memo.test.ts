import { test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { consistencyProof, inclusionProof, leafHash, memoisedSubtree, subtreeRoot } from "../../lib/log/merkle";

test("the memoised subtree hash equals MTH for every range, and proofs built with it are identical", () => {
  const leaves: Uint8Array[] = [];
  const memo = new Map<string, Uint8Array>();
  const subtree = memoisedSubtree(leaves, memo);
  for (let n = 1; n <= 40; n++) {
    leaves.push(leafHash(crypto.randomBytes(8))); // the tree grows under the memo, as a room does
    for (let start = 0; start < n; start++) {
      for (let end = start; end <= n; end++) assert.deepEqual(subtree(start, end), subtreeRoot(leaves, start, end), `${start}..${end} of ${n}`);
    }
    for (let i = 0; i < n; i++) assert.deepEqual(inclusionProof(leaves, i, n, subtree), inclusionProof(leaves, i, n));
    for (let m = 1; m <= n; m++) assert.deepEqual(consistencyProof(leaves, m, n, subtree), consistencyProof(leaves, m, n));
  }
  assert.ok(memo.size > 0);
});
