import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { startApi, type TestApi } from "../helpers/server";
import { legacySignedString } from "../../lib/log/event";
import { testAgent } from "../helpers/agent";
import { bytesToHex, utf8 } from "../../lib/log/bytes";
import { keyRef } from "../../lib/log/keys";
import { nobleSign, noblePublicKey } from "../../lib/log/ed25519";

let f: TestApi;
before(async () => (f = await startApi()));
after(() => f.close());

const newKey = () => crypto.randomBytes(32);
const signV1 = (seed: Uint8Array, room: string, actor: string, payload: Record<string, unknown>, opts: { ts?: string; nonce?: string } = {}) =>
  testAgent(seed).signMessage(room, actor, payload, opts);

test("a signed message is stored as signed, with its key_ref, and pins the key", async () => {
  const room = (await f.api.room()).uuid;
  const seed = newKey();
  const sig = signV1(seed, room, "dora", { text: "signed hello", reply_to: undefined });
  const r = await f.api.say(room, "dora", "signed hello", { sig });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.auth, "signed");
  assert.equal(r.body.pubkey_hex, sig.pubkey_hex);
  assert.equal(r.body.key_ref, keyRef(sig.pubkey_hex));
  assert.equal(r.body.ts_iso, sig.ts);

  const list = await f.api.get(`/api/rooms/${room}/messages`);
  assert.equal(list.body.messages[0].signature_hex, sig.signature_hex, "lists carry the signature so anyone can re-verify");

  const unsigned = await f.api.say(room, "dora", "unsigned now");
  assert.equal(unsigned.status, 403);
  assert.equal(unsigned.body.code, "signature_required");

  const other = newKey();
  const mismatch = await f.api.say(room, "dora", "other key", { sig: signV1(other, room, "dora", { text: "other key" }) });
  assert.equal(mismatch.status, 403);
  assert.equal(mismatch.body.code, "agent_key_mismatch");

  const again = await f.api.say(room, "dora", "second", { sig: signV1(seed, room, "dora", { text: "second" }) });
  assert.equal(again.status, 201);
});

test("the signed payload includes reply_to and memory_root when given", async () => {
  const room = (await f.api.room()).uuid;
  const first = await f.api.say(room, "a", "q");
  const seed = newKey();
  const payload = { text: "a", reply_to: first.body.id, memory_root: "mr" };
  const r = await f.api.say(room, "b", "a", { reply_to: first.body.id, memory_root: "mr", sig: signV1(seed, room, "b", payload) });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const wrong = await f.api.say(room, "c", "a", { reply_to: first.body.id, sig: signV1(seed, room, "c", { text: "a" }) });
  assert.equal(wrong.status, 400, "a signature that leaves out reply_to does not verify");
  assert.equal(wrong.body.code, "bad_signature");
});

test("replayed nonces, bad signatures and clock skew are refused, changing nothing", async () => {
  const room = (await f.api.room()).uuid;
  const seed = newKey();
  const sig = signV1(seed, room, "eve", { text: "once" }, { nonce: "n".repeat(16) });
  assert.equal((await f.api.say(room, "eve", "once", { sig })).status, 201);
  const replay = await f.api.say(room, "eve", "once", { sig });
  assert.equal(replay.status, 409);
  assert.equal(replay.body.code, "replayed_signature");

  const tampered = await f.api.say(room, "eve", "changed", { sig: signV1(seed, room, "eve", { text: "original" }) });
  assert.equal(tampered.status, 400);
  assert.equal(tampered.body.code, "bad_signature");

  const old = new Date(Date.now() - 6 * 60_000).toISOString();
  const skew = await f.api.say(room, "eve", "late", { sig: signV1(seed, room, "eve", { text: "late" }, { ts: old }) });
  assert.equal(skew.status, 400);
  assert.match(skew.body.detail, /5 minutes/);

  const shortNonce = await f.api.say(room, "eve", "x", { sig: { ...signV1(seed, room, "eve", { text: "x" }), nonce: "short" } });
  assert.equal(shortNonce.status, 400);
  assert.equal(shortNonce.body.code, "validation_error");

  const info = await f.api.get(`/api/rooms/${room}`);
  assert.equal(info.body.message_count, 1);
});

test("legacy signatures (compat) are accepted with the exact ts_iso kept, and a repeat is a replay", async () => {
  const room = (await f.api.room()).uuid;
  const seed = newKey();
  const ts_iso = "2026-11-30T10:00:06Z";
  const body = {
    pubkey_hex: bytesToHex(noblePublicKey(seed)),
    signature_hex: bytesToHex(nobleSign(seed, utf8(legacySignedString("legacy hi", ts_iso, room, "")))),
    ts_iso,
  };
  const r = await f.api.say(room, "lex", "legacy hi", body);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.auth, "signed");
  assert.equal(r.body.ts_iso, ts_iso);
  const replay = await f.api.say(room, "lex", "legacy hi", body);
  assert.equal(replay.status, 409);
  assert.equal(replay.body.code, "replayed_signature");
  const partial = await f.api.say(room, "lex", "legacy hi", { pubkey_hex: body.pubkey_hex });
  assert.equal(partial.status, 400);
});
