// The hashing under the verifier (issue 15): an event's leaf hash written without sorting its keys
// must be the leaf hash of its JCS bytes for every shape an event can take (and for any object
// that only looks like one); the canonical writer's cycle check, now an array for shallow values
// and a Set below, must still refuse every cycle and take deep values; and the plain-JS SHA-256
// (the browser's, and every Merkle node's) must agree with node:crypto at every block edge.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { bytesToHex, sha256, sha256Js, utf8 } from "../../lib/log/bytes";
import { canonicalBytes, canonicalize } from "../../lib/log/jcs";
import { leafHash, leafHashOfCanonical, nodeHash } from "../../lib/log/merkle";
import { eventLeafHash, type LogEvent } from "../../lib/log/event";
import { installNodeSha256, nodeSha256 } from "../../lib/log/node-sha256";
// node:crypto's SHA-256 as the server and the CLI install it.
import "../../lib/services/server-key";
installNodeSha256();

const nodeSha = (data: Uint8Array) => crypto.createHash("sha256").update(data).digest("hex");
/** The leaf hash by its definition: SHA-256(0x00 ‖ UTF-8 of the JCS text). */
const definedLeaf = (v: unknown) => nodeSha(Buffer.concat([Buffer.from([0]), Buffer.from(canonicalize(v), "utf8")]));

const base: LogEvent = {
  v: 1,
  room: "0b6f3a52-6c1e-4f7e-9d1a-0d2b9c1e5f11",
  seq: 7,
  ts: "2026-12-01T10:00:00.000Z",
  type: "message.posted",
  actor: "alice",
  payload: { text: "hello é 😀 \"quoted\" \\ \n", reply_to: 3 },
  server: { mentions: [] },
  prev: "ab".repeat(32),
};
const sig = { alg: "ed25519-jcs-v1" as const, pubkey_hex: "11".repeat(32), signature_hex: "22".repeat(64), ts: "2026-12-01T10:00:00Z", nonce: "n".repeat(16) };

describe("an event's leaf hash without the key sort", () => {
  test("equals SHA-256(0x00 ‖ JCS) for unsigned, signed, reordered, partial and odd events", () => {
    const reordered: Record<string, unknown> = {};
    for (const k of Object.keys({ ...base, sig }).reverse()) reordered[k] = ({ ...base, sig } as Record<string, unknown>)[k];
    const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, base);
    const { prev: _prev, ...noPrev } = base;
    const shapes: unknown[] = [
      base,
      { ...base, sig },
      reordered,
      { ...base, sig: undefined }, // an undefined member is absent, as in JCS
      { ...base, payload: undefined },
      noPrev,
      nullProto,
      { ...base, leaf_hash: "cd".repeat(32) }, // an extra member is hashed, not dropped
      { ...base, checkpoint: "", sig },
      { ...base, seq: 1e21, v: -0 },
      { ...base, actor: "\u2028<\u0000>" },
      {},
    ];
    for (const e of shapes) {
      const want = definedLeaf(e);
      assert.equal(bytesToHex(eventLeafHash(e as LogEvent)), want, JSON.stringify(e));
      assert.equal(bytesToHex(leafHashOfCanonical(e)), want);
    }
    assert.equal(bytesToHex(eventLeafHash({ ...base, seq: 8 })) === bytesToHex(eventLeafHash(base)), false, "a changed member changes the hash");
  });

  test("what only looks like an event goes the general way: inherited members, non-plain objects, refusals", () => {
    const inheriting = Object.create({ sig }) as Record<string, unknown>;
    Object.assign(inheriting, base);
    assert.throws(() => eventLeafHash(inheriting as LogEvent), /plain objects/, "as canonicalize refuses it");
    assert.throws(() => canonicalize(inheriting), /plain objects/);
    // A member the general way leaves out (not enumerable, or only inherited) is left out here too.
    const hidden = { ...base } as Record<string, unknown>;
    Object.defineProperty(hidden, "actor", { value: "mallory", enumerable: false });
    const { actor: _actor, ...withoutActor } = base;
    assert.equal(bytesToHex(eventLeafHash(hidden as LogEvent)), definedLeaf(withoutActor));
    assert.equal(definedLeaf(hidden), definedLeaf(withoutActor));
    const hiddenSig = { ...base } as Record<string, unknown>;
    Object.defineProperty(hiddenSig, "sig", { value: sig, enumerable: false });
    assert.equal(bytesToHex(eventLeafHash(hiddenSig as LogEvent)), definedLeaf(base));
    const nullProtoParent = Object.assign(Object.create(null) as Record<string, unknown>, { actor: "inherited" });
    const child = Object.assign(Object.create(nullProtoParent) as Record<string, unknown>, withoutActor);
    assert.throws(() => eventLeafHash(child as LogEvent), /plain objects/, "an object over another prototype is refused, as canonicalize does");
    class Shaped {
      v = 1;
    }
    assert.throws(() => eventLeafHash(new Shaped() as unknown as LogEvent), /plain objects/);
    assert.throws(() => eventLeafHash({ ...base, seq: NaN }), /finite/);
    assert.throws(() => eventLeafHash({ ...base, actor: "\ud800" }), /surrogate/);
    // A refusal leaves the shared writer usable.
    assert.equal(bytesToHex(eventLeafHash(base)), definedLeaf(base));
    const cyclic: Record<string, unknown> = { ...base, payload: {} };
    (cyclic.payload as Record<string, unknown>).self = cyclic;
    assert.throws(() => eventLeafHash(cyclic as LogEvent), /cyclic/);
    assert.equal(bytesToHex(eventLeafHash(base)), definedLeaf(base));
  });
});

describe("the canonical writer's cycle check", () => {
  const nest = (depth: number, inner: unknown) => {
    let v = inner;
    for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { k: v };
    return v;
  };

  test("refuses a cycle at any depth, shallow or past the array part", () => {
    for (const at of [0, 1, 15, 16, 17, 40]) {
      for (const back of [0, 1, 15, 16, 17, 40]) {
        if (back > at) continue;
        // A chain of `at` objects whose deepest one points back to the one at depth `back`.
        const chain: Record<string, unknown>[] = Array.from({ length: at + 1 }, () => ({}));
        for (let i = 0; i < at; i++) chain[i]!.next = chain[i + 1];
        chain[at]!.back = chain[back];
        assert.throws(() => canonicalBytes(chain[0]), /cyclic/, `cycle from ${at} to ${back}`);
        assert.throws(() => canonicalize(chain[0]), /cyclic/);
      }
    }
  });

  test("takes shared (non-cyclic) values and deep nesting, as canonicalize does", () => {
    const shared = { a: 1 };
    const v = { x: shared, y: [shared, shared], z: nest(30, shared) };
    assert.equal(Buffer.from(canonicalBytes(v)).toString("utf8"), canonicalize(v));
    const deep = nest(3000, "end");
    assert.equal(Buffer.from(canonicalBytes(deep)).toString("utf8"), canonicalize(deep));
    assert.equal(bytesToHex(leafHashOfCanonical(deep)), definedLeaf(deep));
  });
});

describe("SHA-256: the plain-JS one and node:crypto", () => {
  test("agree at every padding edge and on multi-MB inputs; the installed sha256 is node:crypto's digest", () => {
    const sizes = [0, 1, 31, 32, 33, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 4096, 65_536, 3 * 1024 * 1024 + 7];
    for (const n of sizes) {
      const data = new Uint8Array(crypto.randomBytes(n));
      const want = nodeSha(data);
      assert.equal(bytesToHex(sha256Js(data)), want, `${n} bytes, JS`);
      assert.equal(bytesToHex(sha256(data)), want, `${n} bytes, installed`);
      // A view into a larger buffer hashes its own bytes only.
      const padded = new Uint8Array(n + 10).fill(0xaa);
      padded.set(data, 5);
      assert.equal(bytesToHex(sha256Js(padded.subarray(5, 5 + n))), want, `${n} bytes, a view`);
      assert.equal(bytesToHex(sha256(padded.subarray(5, 5 + n))), want);
    }
    // The same bytes across the 2^29-byte boundary of the bit length's high word cannot be
    // allocated here; the length encoding's high word is covered by the multi-MB case being zero.
  });

  test("node:crypto's one-shot hash and its createHash fallback give the same digests, as plain Uint8Arrays", () => {
    const oneShot = nodeSha256(crypto);
    const fallback = nodeSha256({ createHash: crypto.createHash });
    assert.equal(typeof (crypto as { hash?: unknown }).hash, "function", "this Node has crypto.hash (20.12+)");
    for (const n of [0, 55, 56, 63, 64, 65, 267, 1000, 2 * 1024 * 1024]) {
      const data = new Uint8Array(crypto.randomBytes(n));
      const want = nodeSha(data);
      for (const [name, f] of [["crypto.hash", oneShot], ["createHash", fallback]] as const) {
        const out = f(data);
        assert.equal(bytesToHex(out), want, `${name}, ${n} bytes`);
        assert.equal(Object.getPrototypeOf(out), Uint8Array.prototype, `${name}: not a Buffer (whose slice() shares memory)`);
        assert.equal(out.length, 32);
        const copy = out.slice();
        copy[0] ^= 1;
        assert.notEqual(out[0], copy[0], "slice() copies");
      }
    }
  });

  test("a tree node and a leaf are the prefixed hashes of their definitions", () => {
    const l = new Uint8Array(crypto.randomBytes(32));
    const r = new Uint8Array(crypto.randomBytes(32));
    assert.equal(bytesToHex(nodeHash(l, r)), nodeSha(Buffer.concat([Buffer.from([1]), l, r])));
    for (const text of ["", "a", "x".repeat(54), "x".repeat(55), "x".repeat(62), "x".repeat(63), "é".repeat(40)]) {
      const bytes = utf8(text);
      assert.equal(bytesToHex(leafHash(bytes)), nodeSha(Buffer.concat([Buffer.from([0]), bytes])), `${bytes.length} bytes`);
    }
  });
});
