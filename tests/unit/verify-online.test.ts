// POST /verify's service (lib/services/verify.ts verifyRoom) on a real SQLite room: it streams the
// rows through the shared verifier and checks the server's own checkpoint signatures by signing
// their bodies again (Ed25519 is deterministic). That shortcut must decide exactly as a
// verification does: a broken signature is still refused, and a valid signature that is not the
// deterministic one (another nonce, same key) is still accepted — and the offline verifier on the
// room's export agrees every time.
import { test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import * as ed from "@noble/ed25519";
import { sha512 } from "@noble/hashes/sha2.js";
import { buildDemoRoom } from "../../cli/tamper";
import { bytesToBase64, concatBytes, utf8 } from "../../lib/log/bytes";
import { keyId, parseCheckpoint } from "../../lib/log/checkpoint";
import { verifyBundle } from "../../lib/log/verify";
import { exportRoom, verifyRoom } from "../../lib/services/verify";
import { ed25519Verify } from "../../lib/services/server-key";

const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const le = (b: Uint8Array) => BigInt(`0x${Buffer.from(b).reverse().toString("hex")}`);
const toLe32 = (n: bigint) => new Uint8Array(Buffer.from(n.toString(16).padStart(64, "0"), "hex").reverse());

/** An Ed25519 signature by `seed` over `msg` with a random nonce: valid, but not RFC 8032's deterministic one. */
function randomNonceSignature(seed: Uint8Array, msg: Uint8Array): Uint8Array {
  const h = sha512(seed);
  const a = h.slice(0, 32);
  a[0]! &= 248;
  a[31]! &= 127;
  a[31]! |= 64;
  const A = ed.Point.BASE.multiply(le(a) % L).toBytes();
  const r = (le(crypto.randomBytes(32)) % (L - 1n)) + 1n;
  const R = ed.Point.BASE.multiply(r).toBytes();
  const k = le(sha512(concatBytes(R, A, msg))) % L;
  return concatBytes(R, toLe32((r + k * le(a)) % L));
}

function seedOf(keyFile: string): Uint8Array {
  return new Uint8Array(Buffer.from(fs.readFileSync(keyFile, "utf8").trim(), "hex"));
}

async function bothVerdicts(demo: Awaited<ReturnType<typeof buildDemoRoom>>) {
  const online = await verifyRoom(demo.svc, demo.room);
  const offline = await verifyBundle(await exportRoom(demo.svc, demo.room), { verify: ed25519Verify });
  return { online, offline };
}

test("the server's own checkpoints: re-signing decides exactly as verifying", async () => {
  const demo = await buildDemoRoom();
  try {
    const honest = await bothVerdicts(demo);
    assert.equal(honest.online.verdict, "CLEAN", honest.online.explanation);
    assert.equal(honest.offline.verdict, "CLEAN");
    assert.equal(honest.online.details.checkpoints, honest.offline.details.checkpoints);

    const db = new Database(demo.dbFile);
    const row = db.prepare("SELECT seq, checkpoint FROM events WHERE room = ? AND checkpoint != '' ORDER BY seq LIMIT 1 OFFSET 2").get(demo.room) as { seq: number; checkpoint: string };
    const cp = parseCheckpoint(row.checkpoint)!;
    const { keyName, pubkey } = demo.svc.key;
    const note = (sig: Uint8Array) => `${cp.body}\n\u2014 ${keyName} ${bytesToBase64(concatBytes(keyId(keyName, pubkey), sig))}\n`;
    const setNote = (text: string) => db.prepare("UPDATE events SET checkpoint = ? WHERE room = ? AND seq = ?").run(text, demo.room, row.seq);

    // Another valid signature of the same body by the same key: accepted, as a verification accepts it.
    const seed = seedOf(path.join(path.dirname(demo.dbFile), "server.key"));
    const other = randomNonceSignature(seed, utf8(cp.body));
    assert.ok(ed25519Verify(pubkey, utf8(cp.body), other), "a valid signature");
    assert.notDeepEqual(other, cp.signatures[0]!.signature, "and not the deterministic one");
    setNote(note(other));
    const resigned = await bothVerdicts(demo);
    assert.equal(resigned.online.verdict, "CLEAN", resigned.online.explanation);
    assert.equal(resigned.offline.verdict, "CLEAN");

    // One bit of the signature flipped: refused online and offline, at that size.
    const broken = cp.signatures[0]!.signature.slice();
    broken[40]! ^= 1;
    setNote(note(broken));
    const refuted = await bothVerdicts(demo);
    for (const r of [refuted.online, refuted.offline]) {
      assert.equal(r.verdict, "REFUTED");
      assert.deepEqual(r.failures.map((f) => [f.type, f.seq]), [["checkpoint_signature", row.seq]]);
    }
    db.close();
  } finally {
    await demo.close();
  }
});
