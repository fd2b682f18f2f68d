// The shared verifier (lib/log/verify.ts) on imported bundles: small-order "signatures" are never
// CLEAN, whatever Ed25519 function the caller hands it, and `parley verify` (the offline CLI) agrees.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { eventLeafHash, legacySignedString, type EventSig } from "../../lib/log/event";
import { bytesToHex, hexToBytes, utf8 } from "../../lib/log/bytes";
import { nobleSign, noblePublicKey, nobleVerify } from "../../lib/log/ed25519";
import { rootOf } from "../../lib/log/merkle";
import { replay } from "../../lib/domain/replay";
import { signCheckpoint } from "../../lib/log/checkpoint";
import { verifyBundle, type Ed25519Verify, type RoomBundle } from "../../lib/log/verify";
import { ed25519Verify, ed25519VerifyAsync, serverKeyFromSeed } from "../../lib/services/server-key";
import { tempDir } from "../helpers/server";
import { testAgent } from "../helpers/agent";

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "../..");
const ROOM = "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23";
const TS = "2026-11-30T10:00:00.000Z";
const key = serverKeyFromSeed(crypto.randomBytes(32), "test.example");

type Ev = { type: string; actor: string; payload: Record<string, unknown>; sig?: EventSig };

/** A self-consistent bundle (chain, roots, server-signed checkpoints, projections) around the given events. */
function bundleOf(events: Ev[]): RoomBundle {
  const origin = `test.example/room/${ROOM}`;
  const out: RoomBundle = { format: "parley-room-bundle/1", origin, room: ROOM, server_key: { key_name: key.keyName, pubkey_hex: key.pubkeyHex }, events: [], checkpoints: [] };
  let prev = "0".repeat(64);
  const leaves: Uint8Array[] = [];
  events.forEach((e, i) => {
    const event = { v: 1 as const, room: ROOM, seq: i + 1, ts: TS, type: e.type, actor: e.actor, payload: e.payload, server: {}, prev, ...(e.sig ? { sig: e.sig } : {}) };
    out.events.push(event);
    const leaf = eventLeafHash(event);
    leaves.push(leaf);
    prev = bytesToHex(leaf);
    out.checkpoints.push(signCheckpoint({ origin, size: i + 1, root: rootOf(leaves), keyName: key.keyName, pubkey: key.pubkey, sign: key.sign }));
  });
  out.projections = replay(out.events, out.events.map((e) => bytesToHex(eventLeafHash(e))));
  return out;
}

const created: Ev = { type: "room.created", actor: "server", payload: { description: "", is_public: false, protocol_mode: "standard", mode: "open" } };
const IDENTITY = "01" + "00".repeat(31);
/** Every small-order point, canonically encoded (tests/unit/ed25519-strict.test.ts derives them). */
const TORSION = [
  IDENTITY,
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "00".repeat(32),
  "00".repeat(31) + "80",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
];

/** OpenSSL with no strict check in front: accepts the identity forgery on its own. */
const SPKI = Buffer.from("302a300506032b6570032100", "hex");
const laxOpenSsl: Ed25519Verify = (pub, msg, sig) => {
  try {
    return crypto.verify(null, msg, crypto.createPublicKey({ key: Buffer.concat([SPKI, pub]), format: "der", type: "spki" }), sig);
  } catch {
    return false;
  }
};

const VERIFIERS: [string, Ed25519Verify][] = [
  ["ed25519Verify", ed25519Verify],
  ["ed25519VerifyAsync", ed25519VerifyAsync],
  ["nobleVerify", nobleVerify],
  ["OpenSSL with no check of its own", laxOpenSsl],
];

/** A v1 "signature" of a message under a small-order key: R = identity, S = 0. */
const forged = (pub: string, nonce = "forged-nonce-0001"): EventSig => ({ alg: "ed25519-jcs-v1", pubkey_hex: pub, signature_hex: IDENTITY + "00".repeat(32), ts: TS, nonce });

describe("small-order keys in a bundle", () => {
  test("the OpenSSL verifier alone would take the identity forgery: the check in verifyBundle is what refuses it", () => {
    assert.equal(laxOpenSsl(hexToBytes(IDENTITY), new TextEncoder().encode("anything"), hexToBytes(IDENTITY + "00".repeat(32))), true);
  });

  test("a message 'signed' with the identity key is REFUTED (agent_signature at its seq), with every verify function", async () => {
    const b = bundleOf([created, { type: "message.posted", actor: "mallory", payload: { text: "I am alice" }, sig: forged(IDENTITY) }]);
    for (const [name, verify] of VERIFIERS) {
      const r = await verifyBundle(b, { verify });
      assert.equal(r.verdict, "REFUTED", `${name}: ${r.explanation}`);
      assert.deepEqual(r.failures.map((f) => [f.seq, f.type]), [[2, "agent_signature"]], name);
      assert.match(r.failures[0]!.detail, /key_small_order/);
    }
  });

  test("each small-order point as the key, and as R under a real key, is REFUTED", async () => {
    const honest = testAgent();
    for (const t of TORSION) {
      const asKey = bundleOf([created, { type: "message.posted", actor: "m", payload: { text: "x" }, sig: forged(t) }]);
      const signed = honest.signMessage(ROOM, "h", { text: "x" }, { ts: TS });
      const asR = bundleOf([created, { type: "message.posted", actor: "h", payload: { text: "x" }, sig: { alg: "ed25519-jcs-v1", ...signed, signature_hex: t + signed.signature_hex.slice(64) } }]);
      for (const b of [asKey, asR]) {
        const r = await verifyBundle(b, { verify: laxOpenSsl });
        assert.equal(r.verdict, "REFUTED", t);
        assert.deepEqual(r.failures.map((f) => f.type), ["agent_signature"], t);
      }
    }
  });

  test("the same bundle with an honest signature is CLEAN (the check refuses only what it should)", async () => {
    const honest = testAgent();
    const b = bundleOf([created, { type: "message.posted", actor: "h", payload: { text: "x" }, sig: { alg: "ed25519-jcs-v1", ...honest.signMessage(ROOM, "h", { text: "x" }, { ts: TS }) } }]);
    for (const [name, verify] of VERIFIERS) assert.equal((await verifyBundle(b, { verify })).verdict, "CLEAN", name);
  });

  test("`parley verify bundle.json` (offline CLI): REFUTED, exit 1", async () => {
    const dir = tempDir();
    try {
      const file = path.join(dir, "bundle.json");
      fs.writeFileSync(file, JSON.stringify(bundleOf([created, { type: "message.posted", actor: "mallory", payload: { text: "I am alice" }, sig: forged(IDENTITY) }])));
      const result = await run(process.execPath, [path.join(ROOT, "bin/parley.mjs"), "verify", file]).then(
        (r) => ({ code: 0, out: r.stdout }),
        (err: { code: number; stdout: string }) => ({ code: err.code, out: err.stdout }),
      );
      assert.equal(result.code, 1, result.out);
      assert.match(result.out, /^REFUTED/);
      assert.match(result.out, /2 agent_signature/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("key pinning replay: a legacy signature never pins (as at intake)", () => {
  const k1 = crypto.randomBytes(32);
  const k2 = crypto.randomBytes(32);
  const legacyMsg = (seed: Uint8Array, actor: string, text: string): Ev => ({
    type: "message.posted",
    actor,
    payload: { text },
    sig: { alg: "ed25519-legacy-v0", pubkey_hex: bytesToHex(noblePublicKey(seed)), signature_hex: bytesToHex(nobleSign(seed, utf8(legacySignedString(text, TS, ROOM)))), ts_iso: TS },
  });
  const v1Msg = (seed: Uint8Array, actor: string, text: string): Ev => ({
    type: "message.posted",
    actor,
    payload: { text },
    sig: { alg: "ed25519-jcs-v1", ...testAgent(seed).signMessage(ROOM, actor, { text }, { ts: TS }) },
  });
  const plain = (actor: string, text: string): Ev => ({ type: "message.posted", actor, payload: { text } });
  const verdictOf = async (events: Ev[]) => {
    const r = await verifyBundle(bundleOf([created, ...events]), { verify: ed25519Verify });
    return { verdict: r.verdict, failures: r.failures.map((f) => [f.seq, f.type]) };
  };

  test("legacy, then unsigned under the same name: CLEAN", async () => {
    assert.deepEqual(await verdictOf([legacyMsg(k1, "lex", "one"), plain("lex", "two")]), { verdict: "CLEAN", failures: [] });
  });

  test("legacy with one key, then v1 with another: CLEAN (the v1 signature is the first pin)", async () => {
    assert.deepEqual(await verdictOf([legacyMsg(k1, "lex", "one"), v1Msg(k2, "lex", "two")]), { verdict: "CLEAN", failures: [] });
  });

  test("v1 pins; legacy with the pinned key is CLEAN, with another key it is key_pinning", async () => {
    assert.deepEqual(await verdictOf([v1Msg(k1, "lex", "one"), legacyMsg(k1, "lex", "two")]), { verdict: "CLEAN", failures: [] });
    assert.deepEqual(await verdictOf([v1Msg(k1, "lex", "one"), legacyMsg(k2, "lex", "two")]), { verdict: "REFUTED", failures: [[3, "key_pinning"]] });
    assert.deepEqual(await verdictOf([v1Msg(k1, "lex", "one"), plain("lex", "two")]), { verdict: "REFUTED", failures: [[3, "key_pinning"]] });
  });
});
