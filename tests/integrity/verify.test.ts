import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { startApi, type TestApi } from "../helpers/server";
import { eventLeafHash } from "../../lib/log/event";
import { testAgent } from "../helpers/agent";
import { base64ToBytes, bytesToHex, hexToBytes, utf8 } from "../../lib/log/bytes";
import { nobleSign, noblePublicKey, nobleVerify } from "../../lib/log/ed25519";
import { rootOf, verifyConsistency, verifyInclusion } from "../../lib/log/merkle";
import { replay } from "../../lib/domain/replay";
import { signCheckpoint } from "../../lib/log/checkpoint";
import { verifyBundle, type RoomBundle } from "../../lib/log/verify";
import { ed25519Verify, serverKeyFromSeed } from "../../lib/services/server-key";

let f: TestApi;
before(async () => (f = await startApi()));
after(() => f.close());

function signedBody(seed: Uint8Array, room: string, actor: string, text: string, ts?: string) {
  return { agent_id: actor, text, sig: testAgent(seed).signMessage(room, actor, { text }, { ts }) };
}

test("200 concurrent posts, signed and unsigned by several agents, then verify: CLEAN", async () => {
  const room = (await f.api.room()).uuid;
  const seeds = [crypto.randomBytes(32), crypto.randomBytes(32)];
  const posts = Array.from({ length: 200 }, (_, i) =>
    i % 3 === 0
      ? f.api.post(`/api/rooms/${room}/messages`, signedBody(seeds[i % 2]!, room, `signer-${i % 2}`, `signed ${i}`))
      : f.api.say(room, `anon-${i % 5}`, `plain ${i}`),
  );
  const results = await Promise.all(posts);
  assert.ok(results.every((r) => r.status === 201), JSON.stringify(results.find((r) => r.status !== 201)?.body));
  const report = await f.api.post(`/api/rooms/${room}/verify`, {});
  assert.equal(report.status, 200);
  assert.equal(report.body.verdict, "CLEAN", report.body.explanation);
  assert.equal(report.body.details.events, 201);
  assert.equal(report.body.details.agent_signatures, 67);
  assert.equal(report.body.details.projections.messages, 200);
});

test("a signature ts in another ISO form verifies later exactly as accepted", async () => {
  const room = (await f.api.room()).uuid;
  const ts = new Date().toISOString().replace(/\.\d{3}Z$/, "+00:00");
  const r = await f.api.post(`/api/rooms/${room}/messages`, signedBody(crypto.randomBytes(32), room, "iso", "other form", ts));
  assert.equal(r.status, 201);
  assert.equal(r.body.ts_iso, ts);
  assert.equal((await f.api.post(`/api/rooms/${room}/verify`, {})).body.verdict, "CLEAN");
});

describe("verify with a checkpoint the caller kept", () => {
  test("an older checkpoint of this room: consistent, CLEAN", async () => {
    const room = (await f.api.room()).uuid;
    const kept = (await f.api.say(room, "a", "one")).body.receipt.checkpoint;
    await f.api.say(room, "b", "two");
    const r = await f.api.post(`/api/rooms/${room}/verify`, { checkpoint: kept });
    assert.equal(r.body.verdict, "CLEAN");
    assert.deepEqual(r.body.details.caller_checkpoint, { size: 2, consistent: true });
  });

  test("a checkpoint of another room, a malformed one or a forged one: INCONCLUSIVE, never CLEAN", async () => {
    const room = (await f.api.room()).uuid;
    const other = (await f.api.room()).uuid;
    const foreign = (await f.api.say(other, "a", "x")).body.receipt.checkpoint as string;
    const mine = (await f.api.say(room, "a", "x")).body.receipt.checkpoint as string;
    const forged = mine.replace(/ [A-Za-z0-9+/=]+\n$/, ` ${Buffer.from(base64ToBytes(mine.trim().split(" ").at(-1)!).map((b, i) => (i === 10 ? b ^ 1 : b))).toString("base64")}\n`);
    for (const checkpoint of [foreign, "not a checkpoint", forged]) {
      const r = await f.api.post(`/api/rooms/${room}/verify`, { checkpoint });
      assert.equal(r.status, 200);
      assert.equal(r.body.verdict, "INCONCLUSIVE", checkpoint.slice(0, 40));
    }
    const bad = await f.api.post(`/api/rooms/${room}/verify`, { checkpoint: 5 });
    assert.equal(bad.status, 400);
  });

  test("unknown room 404, bad id 400", async () => {
    assert.equal((await f.api.post("/api/rooms/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23/verify", {})).body.code, "room_not_found");
    assert.equal((await f.api.post("/api/rooms/xyz/verify", {})).body.code, "invalid_uuid");
  });
});

describe("proofs", () => {
  let room: string;
  let size: number;
  before(async () => {
    room = (await f.api.room()).uuid;
    for (let i = 0; i < 12; i++) await f.api.say(room, "a", `m${i}`);
    size = 13;
  });

  const b64 = (xs: string[]) => xs.map(base64ToBytes);

  test("every inclusion proof verifies against the signed root; mutations fail", async () => {
    for (let seq = 1; seq <= size; seq++) {
      for (const n of [seq, size]) {
        const r = (await f.api.get(`/api/rooms/${room}/proof/inclusion?seq=${seq}${n === size ? "" : `&size=${n}`}`)).body;
        assert.equal(r.leaf_index, seq - 1);
        assert.equal(r.size, n);
        const root = base64ToBytes(r.root);
        const leaf = hexToBytes(r.leaf_hash);
        const proof = b64(r.proof);
        assert.ok(verifyInclusion(leaf, seq - 1, n, proof, root), `seq ${seq} size ${n}`);
        assert.match(r.checkpoint, new RegExp(`\n${n}\n${r.root.replace(/[+/]/g, "\\$&")}\n`));
        for (let i = 0; i < proof.length; i++) {
          const flipped = proof.map((p: Uint8Array, j: number) => (j === i ? p.map((b, k) => (k === 0 ? b ^ 1 : b)) : p));
          assert.equal(verifyInclusion(leaf, seq - 1, n, flipped, root), false);
        }
        if (proof.length) assert.equal(verifyInclusion(leaf, seq - 1, n, proof.slice(1), root), false);
        assert.equal(verifyInclusion(leaf, seq - 1, n, [...proof, new Uint8Array(32)], root), false);
        if (n > 1) assert.equal(verifyInclusion(leaf, seq === n ? seq - 2 : seq, n, proof, root), false);
      }
    }
  });

  test("every consistency proof verifies; swapped roots and mutations fail", async () => {
    for (let from = 1; from <= size; from++) {
      const r = (await f.api.get(`/api/rooms/${room}/proof/consistency?from=${from}`)).body;
      const [rootM, rootN] = [base64ToBytes(r.from_root), base64ToBytes(r.to_root)];
      const proof = b64(r.proof);
      assert.ok(verifyConsistency(from, size, proof, rootM, rootN), `from ${from}`);
      if (from < size) {
        assert.equal(verifyConsistency(from, size, proof, rootN, rootM), false);
        assert.equal(verifyConsistency(size, from, proof, rootM, rootN), false);
        for (let i = 0; i < proof.length; i++) {
          const flipped = proof.map((p: Uint8Array, j: number) => (j === i ? p.map((b, k) => (k === 31 ? b ^ 0x80 : b)) : p));
          assert.equal(verifyConsistency(from, size, flipped, rootM, rootN), false);
        }
      }
    }
  });

  test("bad proof parameters are 400; the checkpoint route serves the head as text", async () => {
    for (const q of ["inclusion?seq=0", "inclusion?seq=14", "inclusion?seq=3&size=2", "inclusion?seq=1&size=99", "inclusion", "consistency?from=0", "consistency?from=5&to=4", "consistency?from=x"]) {
      const r = await f.api.get(`/api/rooms/${room}/proof/${q}`);
      assert.equal(r.status, 400, q);
      assert.equal(r.body.code, "validation_error");
    }
    const res = await fetch(`${f.url}/api/rooms/${room}/checkpoint`);
    assert.match(res.headers.get("content-type")!, /^text\/plain/);
    assert.equal(await res.text(), (await f.api.get(`/api/rooms/${room}`)).body.head.checkpoint);
  });
});

describe("verdicts on imported bundles", () => {
  const seed = crypto.randomBytes(32);
  const key = serverKeyFromSeed(seed, "test.example");
  const ROOM = "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23";

  /** A self-consistent bundle: chain, roots and checkpoints all made correctly. */
  function bundleOf(events: { type: string; actor: string; payload: Record<string, unknown>; sig?: Record<string, unknown> }[], withCheckpoints = true): RoomBundle {
    const origin = `test.example/room/${ROOM}`;
    const out: RoomBundle = { format: "parley-room-bundle/1", origin, room: ROOM, server_key: { key_name: key.keyName, pubkey_hex: key.pubkeyHex }, events: [], checkpoints: [] };
    let prev = "0".repeat(64);
    const leaves: Uint8Array[] = [];
    events.forEach((e, i) => {
      const event = { v: 1 as const, room: ROOM, seq: i + 1, ts: "2026-11-30T10:00:00.000Z", type: e.type, actor: e.actor, payload: e.payload, server: {}, prev, ...(e.sig ? { sig: e.sig as never } : {}) };
      out.events.push(event);
      const leaf = eventLeafHash(event);
      leaves.push(leaf);
      prev = bytesToHex(leaf);
      if (withCheckpoints) {
        out.checkpoints.push(signCheckpoint({ origin, size: i + 1, root: rootOf(leaves), keyName: key.keyName, pubkey: key.pubkey, sign: key.sign }));
      }
    });
    return out;
  }
  const created = { type: "room.created", actor: "server", payload: { description: "", is_public: false, protocol_mode: "standard", mode: "open" } };

  test("an unknown signature algorithm is INCONCLUSIVE, never CLEAN", async () => {
    const b = bundleOf([created, { type: "message.posted", actor: "x", payload: { text: "hi" }, sig: { alg: "ed448-future", pubkey_hex: "00", signature_hex: "00" } }]);
    const report = await verifyBundle(b, { verify: ed25519Verify });
    assert.equal(report.verdict, "INCONCLUSIVE");
    assert.match(report.explanation, /ed448-future/);
  });

  test("events imported without checkpoints are INCONCLUSIVE; the same events with checkpoints are CLEAN", async () => {
    const events = [created, { type: "message.posted", actor: "x", payload: { text: "hi" } }];
    assert.equal((await verifyBundle(bundleOf(events, false), { verify: ed25519Verify })).verdict, "INCONCLUSIVE");
    const b = bundleOf(events);
    assert.equal((await verifyBundle(b, { verify: ed25519Verify })).verdict, "INCONCLUSIVE", "no projections to compare");
    b.projections = replay(b.events, b.events.map((e) => bytesToHex(eventLeafHash(e))));
    assert.equal((await verifyBundle(b, { verify: ed25519Verify })).verdict, "CLEAN");
    assert.equal((await verifyBundle(b, { verify: nobleVerify })).verdict, "CLEAN", "the same with @noble/ed25519");
    const asyncVerify = async (p: Uint8Array, m: Uint8Array, s: Uint8Array) => nobleVerify(p, m, s);
    assert.equal((await verifyBundle(b, { verify: asyncVerify })).verdict, "CLEAN", "and with an async verifier (WebCrypto)");
    const otherKey = serverKeyFromSeed(crypto.randomBytes(32), "test.example");
    const pinned = await verifyBundle(b, { verify: ed25519Verify, trustedKey: { key_name: "test.example", pubkey_hex: otherKey.pubkeyHex } });
    assert.equal(pinned.verdict, "REFUTED", "checkpoints signed by a key other than the trusted one");
  });

  test("node:crypto and @noble/ed25519 accept each other's signatures", () => {
    const msg = utf8("cross-check");
    assert.ok(nobleVerify(key.pubkey, msg, key.sign(msg)));
    assert.ok(ed25519Verify(noblePublicKey(seed), msg, nobleSign(seed, msg)));
    assert.equal(bytesToHex(noblePublicKey(seed)), key.pubkeyHex);
  });
});
