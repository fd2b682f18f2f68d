// Test vectors for the strict Ed25519 input rules (lib/log/ed25519.ts) and every verifier that
// runs them: the server's (node:crypto, sync and async), noble's, the watcher's browser module
// (WebCrypto under Node 20) and the shared bundle verifier's own check.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import * as ed from "@noble/ed25519";
import { bytesToHex, hexToBytes, utf8 } from "../../lib/log/bytes";
import { ed25519InputProblem, isStrictEd25519Input, nobleSign, noblePublicKey, nobleVerify } from "../../lib/log/ed25519";
import { ed25519Verify, ed25519VerifyAsync, serverKeyFromSeed } from "../../lib/services/server-key";
import { browserEd25519 } from "../../components/ed25519-browser";

const P = 2n ** 255n - 19n;
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

const le32 = (n: bigint): Uint8Array => {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++, n >>= 8n) out[i] = Number(n & 0xffn);
  return out;
};
const fromLe = (b: Uint8Array): bigint => b.reduceRight((acc, x) => (acc << 8n) | BigInt(x), 0n);
const cat = (a: Uint8Array, b: Uint8Array) => new Uint8Array([...a, ...b]);
/** An encoding with the x sign bit (bit 255) set. */
const withSign = (b: Uint8Array) => b.map((x, i) => (i === 31 ? x | 0x80 : x));

// RFC 8032 §7.1, TESTS 1–3: seed, public key, message, signature.
const RFC8032 = [
  {
    seed: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
    pub: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    msg: "",
    sig: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
  },
  {
    seed: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
    pub: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
    msg: "72",
    sig: "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
  },
  {
    seed: "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
    pub: "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
    msg: "af82",
    sig: "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
  },
].map((v) => ({ seed: hexToBytes(v.seed), pub: hexToBytes(v.pub), msg: hexToBytes(v.msg), sig: hexToBytes(v.sig) }));
const GOOD = RFC8032[0]!;

/** The eight canonical encodings of the small-order points, written out (checked against a derivation below). */
const TORSION_HEX = [
  "0100000000000000000000000000000000000000000000000000000000000000", // identity (0, 1), order 1
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // (0, -1), order 2
  "0000000000000000000000000000000000000000000000000000000000000000", // (±√-1, 0), order 4
  "0000000000000000000000000000000000000000000000000000000000000080",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
];
const TORSION = TORSION_HEX.map(hexToBytes);

/** Non-canonical encodings (y >= p, or x = 0 with the sign bit set) of small-order points. */
const TORSION_NON_CANONICAL = [
  le32(P), // y = p ≡ 0
  le32(P + 1n), // y = p + 1 ≡ 1: the identity again
  withSign(le32(P)),
  withSign(le32(P + 1n)),
  withSign(le32(1n)), // identity with x "negative" (x = 0 has no sign)
  withSign(le32(P - 1n)), // (0, -1) likewise
];

type Verifier = { name: string; verify: (pub: Uint8Array, msg: Uint8Array, sig: Uint8Array) => boolean | Promise<boolean> };
let browser: Awaited<ReturnType<typeof browserEd25519>> | undefined;
async function verifiers(): Promise<Verifier[]> {
  browser ??= await browserEd25519();
  const key = serverKeyFromSeed(GOOD.seed, "test.example");
  return [
    { name: "server key verify (svc.key.verify)", verify: key.verify },
    { name: "ed25519Verify", verify: ed25519Verify },
    { name: "ed25519VerifyAsync (CLI, online /verify)", verify: ed25519VerifyAsync },
    { name: "nobleVerify (browser noble path)", verify: nobleVerify },
    { name: `browserEd25519 (${browser.impl})`, verify: browser.verify },
  ];
}

async function assertAllRefuse(pub: Uint8Array, msg: Uint8Array, sig: Uint8Array, what: string) {
  for (const v of await verifiers()) assert.equal(await v.verify(pub, msg, sig), false, `${v.name} must refuse ${what}`);
}

describe("the small-order points", () => {
  test("the written-out encodings are exactly the 8-torsion subgroup, derived with noble as [L]·Q for a point Q with a torsion part", () => {
    const { Point } = ed;
    let q: InstanceType<typeof Point> | null = null;
    for (let y = 2n; !q; y++) {
      try {
        const pt = Point.fromBytes(le32(y), false);
        const t = pt.multiply(L - 1n, false).add(pt); // [L]·pt: kills the prime-order part
        if (!t.double().double().is0()) q = t; // order 8: generates the whole torsion subgroup
      } catch {
        // y has no x on the curve: try the next
      }
    }
    const derived = new Set<string>();
    let t = Point.ZERO;
    for (let k = 0; k < 8; k++, t = t.add(q)) derived.add(t.toHex());
    assert.equal(derived.size, 8);
    assert.deepEqual([...derived].sort(), [...TORSION_HEX].sort());
    for (const enc of TORSION) assert.ok(Point.fromBytes(enc, false).isSmallOrder());
  });
});

describe("the pure check: ed25519InputProblem", () => {
  const goodS = GOOD.sig.slice(32);
  const goodR = GOOD.sig.slice(0, 32);

  test("valid RFC 8032 vectors pass", () => {
    for (const v of RFC8032) {
      assert.equal(ed25519InputProblem(v.pub, v.sig), null);
      assert.ok(isStrictEd25519Input(v.pub, v.sig));
    }
  });

  test("the identity key with (R = identity, S = 0): refused", () => {
    const identity = TORSION[0]!;
    assert.equal(ed25519InputProblem(identity, cat(identity, new Uint8Array(32))), "key_small_order");
  });

  test("each small-order point, as the key and as R, canonical or not", () => {
    for (const enc of TORSION) {
      assert.equal(ed25519InputProblem(enc, GOOD.sig), "key_small_order", bytesToHex(enc));
      assert.equal(ed25519InputProblem(GOOD.pub, cat(enc, goodS)), "r_small_order", bytesToHex(enc));
    }
    for (const enc of TORSION_NON_CANONICAL) {
      assert.match(ed25519InputProblem(enc, GOOD.sig) ?? "", /^key_(small_order|non_canonical)$/, bytesToHex(enc));
      assert.match(ed25519InputProblem(GOOD.pub, cat(enc, goodS)) ?? "", /^r_(small_order|non_canonical)$/, bytesToHex(enc));
    }
  });

  test("y >= p: every non-canonical encoding of a key or R is refused, including one of a real point", () => {
    for (let k = 0n; k < 19n; k++) {
      for (const enc of [le32(P + k), withSign(le32(P + k))]) {
        assert.equal(ed25519InputProblem(enc, GOOD.sig), "key_non_canonical", `key y = p + ${k}`);
        assert.equal(ed25519InputProblem(GOOD.pub, cat(enc, goodS)), "r_non_canonical", `R y = p + ${k}`);
      }
    }
    // The public key of TEST 1 with y + p: the same point for a lax decoder, a different byte string.
    const y = fromLe(GOOD.pub.map((b, i) => (i === 31 ? b & 0x7f : b)));
    if (y + P < 2n ** 255n) {
      const alias = le32(y + P);
      alias[31]! |= GOOD.pub[31]! & 0x80;
      assert.equal(ed25519InputProblem(alias, GOOD.sig), "key_non_canonical");
    }
    // A point with small y, encoded with y + p: ZIP-215 decoders take it as that point.
    const real = [2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n].find((k) => {
      try {
        return !ed.Point.fromBytes(le32(k), false).isSmallOrder();
      } catch {
        return false;
      }
    })!;
    const nonCanonical = le32(P + real);
    assert.ok(ed.Point.fromBytes(nonCanonical, true).equals(ed.Point.fromBytes(le32(real), false)), "the alias decodes to the real point under ZIP-215");
    assert.equal(ed25519InputProblem(nonCanonical, GOOD.sig), "key_non_canonical");
    assert.equal(ed25519InputProblem(GOOD.pub, cat(nonCanonical, goodS)), "r_non_canonical");
  });

  test("S >= L is refused (S = L, L + 1, S + L of a valid signature, 2^256 - 1); S = L - 1 passes the check", () => {
    for (const s of [L, L + 1n, fromLe(goodS) + L, 2n ** 256n - 1n]) {
      assert.equal(ed25519InputProblem(GOOD.pub, cat(goodR, le32(s))), "s_non_canonical", `S = ${s}`);
    }
    assert.equal(ed25519InputProblem(GOOD.pub, cat(goodR, le32(L - 1n))), null);
  });

  test("wrong lengths and non-bytes are refused without throwing", () => {
    assert.equal(ed25519InputProblem(GOOD.pub.slice(1), GOOD.sig), "key_length");
    assert.equal(ed25519InputProblem(GOOD.pub, GOOD.sig.slice(1)), "signature_length");
    assert.equal(isStrictEd25519Input(null as never, GOOD.sig), false);
  });
});

describe("every verifier runs the check", () => {
  test("valid RFC 8032 vectors verify everywhere (and noble reproduces them from the seeds)", async () => {
    for (const v of RFC8032) {
      assert.equal(bytesToHex(noblePublicKey(v.seed)), bytesToHex(v.pub));
      assert.equal(bytesToHex(nobleSign(v.seed, v.msg)), bytesToHex(v.sig));
      for (const x of await verifiers()) assert.equal(await x.verify(v.pub, v.msg, v.sig), true, x.name);
    }
  });

  test("the identity key with (R = identity, S = 0) verifies no message anywhere", async () => {
    const identity = TORSION[0]!;
    const forged = cat(identity, new Uint8Array(32));
    for (const msg of [new Uint8Array(0), utf8("anything at all"), utf8('{"v":1}')]) await assertAllRefuse(identity, msg, forged, "the identity forgery");
  });

  test("small-order keys and R, with S = 0 or a real S", async () => {
    const msg = utf8("hello");
    for (const enc of [...TORSION, ...TORSION_NON_CANONICAL]) {
      for (const r of [...TORSION, ...TORSION_NON_CANONICAL]) await assertAllRefuse(enc, msg, cat(r, new Uint8Array(32)), `key ${bytesToHex(enc)} R ${bytesToHex(r)}`);
      await assertAllRefuse(GOOD.pub, GOOD.msg, cat(enc, GOOD.sig.slice(32)), `R ${bytesToHex(enc)}`);
    }
  });

  test("a malleated signature (S + L) and S = L are refused everywhere", async () => {
    const r = GOOD.sig.slice(0, 32);
    await assertAllRefuse(GOOD.pub, GOOD.msg, cat(r, le32(fromLe(GOOD.sig.slice(32)) + L)), "S + L");
    await assertAllRefuse(GOOD.pub, GOOD.msg, cat(r, le32(L)), "S = L");
    await assertAllRefuse(GOOD.pub, GOOD.msg, cat(r, le32(L + 1n)), "S = L + 1");
  });

  test("a non-canonical key (y + p) is refused everywhere", async () => {
    const real = [2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n].find((k) => {
      try {
        return !ed.Point.fromBytes(le32(k), false).isSmallOrder();
      } catch {
        return false;
      }
    })!;
    await assertAllRefuse(le32(P + real), GOOD.msg, GOOD.sig, "y = p + k");
  });

  test("the browser module under Node 20 picks WebCrypto (the verifier list above used it)", async () => {
    browser ??= await browserEd25519();
    assert.equal(browser.impl, "WebCrypto");
  });

  test("the browser module's noble path (a browser without WebCrypto Ed25519): the same refusals, the same good vectors", async () => {
    // A fresh instance of the module, loaded and asked while there is no WebCrypto, with a
    // MessageChannel stand-in (Node's real one would keep the test process alive).
    class Channel {
      port1: { onmessage: (() => void) | null } = { onmessage: null };
      port2 = { postMessage: () => setImmediate(() => this.port1.onmessage?.()) };
    }
    const saved = { crypto: Object.getOwnPropertyDescriptor(globalThis, "crypto")!, channel: Object.getOwnPropertyDescriptor(globalThis, "MessageChannel")! };
    let noble: Awaited<ReturnType<typeof browserEd25519>>;
    try {
      Object.defineProperty(globalThis, "crypto", { value: undefined, configurable: true, writable: true });
      Object.defineProperty(globalThis, "MessageChannel", { value: Channel, configurable: true, writable: true });
      const spec = "../../components/ed25519-browser.ts?noble-path";
      const fresh = (await import(spec)) as typeof import("../../components/ed25519-browser");
      noble = await fresh.browserEd25519();
    } finally {
      Object.defineProperty(globalThis, "crypto", saved.crypto);
      Object.defineProperty(globalThis, "MessageChannel", saved.channel);
    }
    assert.equal(noble.impl, "noble");
    for (const v of RFC8032) assert.equal(await noble.verify(v.pub, v.msg, v.sig), true);
    const identity = TORSION[0]!;
    assert.equal(await noble.verify(identity, utf8("anything"), cat(identity, new Uint8Array(32))), false);
    for (const enc of [...TORSION, ...TORSION_NON_CANONICAL]) {
      assert.equal(await noble.verify(enc, GOOD.msg, cat(enc, new Uint8Array(32))), false, bytesToHex(enc));
      assert.equal(await noble.verify(GOOD.pub, GOOD.msg, cat(enc, GOOD.sig.slice(32))), false, bytesToHex(enc));
    }
    assert.equal(await noble.verify(GOOD.pub, GOOD.msg, cat(GOOD.sig.slice(0, 32), le32(fromLe(GOOD.sig.slice(32)) + L))), false);
  });
});
