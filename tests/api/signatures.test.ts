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

/** Now, to the second, in the form Roomcomm clients send (2026-12-01T10:00:06Z). */
const nowIso = () => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");

/** The legacy signature fields (compat) over text ‖ ts_iso ‖ room ‖ memory_root. */
const legacy = (seed: Uint8Array, room: string, text: string, opts: { ts_iso?: string; memory_root?: string } = {}) => {
  const ts_iso = opts.ts_iso ?? nowIso();
  return {
    pubkey_hex: bytesToHex(noblePublicKey(seed)),
    signature_hex: bytesToHex(nobleSign(seed, utf8(legacySignedString(text, ts_iso, room, opts.memory_root)))),
    ts_iso,
    ...(opts.memory_root !== undefined ? { memory_root: opts.memory_root } : {}),
  };
};

const headSize = async (room: string) => (await f.api.get(`/api/rooms/${room}`)).body.head.size as number;

test("a v1 signature made for one room is refused in another, or under another name, and writes nothing", async () => {
  const [a, b] = [(await f.api.room()).uuid, (await f.api.room()).uuid];
  const seed = newKey();
  const sig = signV1(seed, a, "eve", { text: "for room a" });
  const head = async (room: string) => (await f.api.get(`/api/rooms/${room}`)).body.head.size as number;
  const before = await head(b);
  const elsewhere = await f.api.say(b, "eve", "for room a", { sig });
  assert.equal(elsewhere.status, 400);
  assert.equal(elsewhere.body.code, "bad_signature");
  const otherName = await f.api.say(a, "mallory", "for room a", { sig });
  assert.equal(otherName.body.code, "bad_signature");
  assert.equal(await head(b), before);
  // The same signature where it was made for: stored as signed.
  const ok = await f.api.say(a, "eve", "for room a", { sig });
  assert.equal(ok.status, 201);
  assert.equal(ok.body.auth, "signed");
});

test("legacy signatures (compat) are accepted with the exact ts_iso kept, and a repeat is a replay", async () => {
  const room = (await f.api.room()).uuid;
  const seed = newKey();
  const body = legacy(seed, room, "legacy hi");
  const ts_iso = body.ts_iso;
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

// The identity point (0, 1) as a 32-byte encoding, and (R = identity, S = 0): with that key,
// OpenSSL alone verifies every message.
const IDENTITY = "01" + "00".repeat(31);
const FORGED = IDENTITY + "00".repeat(32);
const SMALL_ORDER = [IDENTITY, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", "00".repeat(32), "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"];
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

test("a small-order key or a forged signature is 400 bad_signature and writes nothing, pinned name or not", async () => {
  const room = (await f.api.room()).uuid;
  const alice = newKey();
  assert.equal((await f.api.say(room, "alice", "real", { sig: signV1(alice, room, "alice", { text: "real" }) })).status, 201);
  const size = await headSize(room);
  const forgedV1 = (pub: string, actor: string) => ({ sig: { ...signV1(newKey(), room, actor, { text: "I am alice" }), pubkey_hex: pub, signature_hex: FORGED } });
  const attempts: [string, string, Record<string, unknown>][] = [
    ["v1, identity key, unpinned name", "mallory", forgedV1(IDENTITY, "mallory")],
    ["v1, identity key, pinned name", "alice", forgedV1(IDENTITY, "alice")],
    ["legacy, identity key", "mallory", { pubkey_hex: IDENTITY, signature_hex: FORGED, ts_iso: nowIso() }],
    ...SMALL_ORDER.map((k): [string, string, Record<string, unknown>] => [`v1, small-order key ${k.slice(0, 8)}`, "mallory", forgedV1(k, "mallory")]),
  ];
  for (const [what, actor, body] of attempts) {
    const r = await f.api.say(room, actor, "I am alice", body);
    assert.equal(r.status, 400, what);
    assert.equal(r.body.code, "bad_signature", what);
    assert.match(r.body.detail, /^pubkey_hex: is a point of small order/, what);
  }
  // A real key with a small-order R, or with S + L (the same signature, malleated): refused too.
  const good = signV1(newKey(), room, "bob", { text: "hi" });
  const s = BigInt("0x" + Buffer.from(good.signature_hex.slice(64), "hex").reverse().toString("hex")) + L;
  const sPlusL = Buffer.from(s.toString(16).padStart(64, "0"), "hex").reverse().toString("hex");
  for (const [what, signature_hex, detail] of [
    ["R = identity", IDENTITY + good.signature_hex.slice(64), /^signature_hex: its R half is a point of small order/],
    ["S + L", good.signature_hex.slice(0, 64) + sPlusL, /^signature_hex: its S half is not below the group order/],
  ] as const) {
    const r = await f.api.say(room, "bob", "hi", { sig: { ...good, signature_hex } });
    assert.equal(r.body.code, "bad_signature", what);
    assert.match(r.body.detail, detail, what);
  }
  assert.equal(await headSize(room), size, "nothing was written");
  assert.equal((await f.api.get(`/api/rooms/${room}`)).body.message_count, 1);
  assert.equal((await f.api.post(`/api/rooms/${room}/verify`, {})).body.verdict, "CLEAN");
});

test("legacy ts_iso is checked like sig.ts: strict ISO 8601 UTC, within 5 minutes", async () => {
  const room = (await f.api.room()).uuid;
  const seed = newKey();
  for (const ts_iso of ["not a time", "Tue, 01 Dec 2026 10:00:00 GMT", "2026-12-01 10:00:00Z", "2026-12-01T10:00:00", "2026-12-01T10:00:00+05:00", "2026-02-30T10:00:00Z"]) {
    const r = await f.api.say(room, "lex", "hi", legacy(seed, room, "hi", { ts_iso }));
    assert.equal(r.status, 400, ts_iso);
    assert.equal(r.body.code, "validation_error", ts_iso);
    assert.match(r.body.detail, /^ts_iso: must be an ISO 8601 UTC time/, ts_iso);
  }
  const old = await f.api.say(room, "lex", "hi", legacy(seed, room, "hi", { ts_iso: "2001-01-01T00:00:00Z" }));
  assert.equal(old.status, 400);
  assert.equal(old.body.code, "bad_signature");
  assert.match(old.body.detail, /^ts_iso is more than 5 minutes from the server's clock/);
  assert.equal(await headSize(room), 1, "nothing was written");
  const ok = await f.api.say(room, "lex", "hi", legacy(seed, room, "hi", { ts_iso: new Date().toISOString() }));
  assert.equal(ok.status, 201, JSON.stringify(ok.body));
});

test("a legacy signature shows as signed but never pins; under a name a v1 signature pinned it needs the pinned key", async () => {
  const room = (await f.api.room()).uuid;
  const k1 = newKey();
  const k2 = newKey();
  const first = await f.api.say(room, "lex", "legacy one", legacy(k1, room, "legacy one"));
  assert.equal(first.status, 201, JSON.stringify(first.body));
  assert.equal(first.body.auth, "signed");
  const unsigned = await f.api.say(room, "lex", "unsigned, same name");
  assert.equal(unsigned.status, 201, "a legacy signature did not pin lex");
  assert.equal(unsigned.body.auth, "anon");
  const otherKey = await f.api.say(room, "lex", "v1 with k2", { sig: signV1(k2, room, "lex", { text: "v1 with k2" }) });
  assert.equal(otherKey.status, 201, "a v1 signature pins lex to k2");
  const legacyK1 = await f.api.say(room, "lex", "legacy k1", legacy(k1, room, "legacy k1"));
  assert.equal(legacyK1.status, 403);
  assert.equal(legacyK1.body.code, "agent_key_mismatch");
  const legacyK2 = await f.api.say(room, "lex", "legacy k2", legacy(k2, room, "legacy k2"));
  assert.equal(legacyK2.status, 201, "the pinned key may still sign the legacy way");
  const after = await f.api.say(room, "lex", "unsigned again");
  assert.equal(after.status, 403);
  assert.equal(after.body.code, "signature_required");
  const report = await f.api.post(`/api/rooms/${room}/verify`, {});
  assert.equal(report.body.verdict, "CLEAN", report.body.explanation);
  assert.equal(report.body.details.agent_signatures, 3);
});

test("a legacy message cannot be re-posted in another room with its fields shifted", async () => {
  const roomA = (await f.api.room()).uuid;
  const roomB = (await f.api.room()).uuid;
  const victim = newKey();
  const ts = nowIso();
  // The victim's message in room A mentions a time and room B's id ...
  const text = `moving to ${ts}${roomB}`;
  const original = legacy(victim, roomA, text, { ts_iso: ts });
  assert.equal((await f.api.say(roomA, "victim", text, original)).status, 201);
  // ... so the same signed bytes read as "moving to " ‖ ts ‖ roomB ‖ (ts ‖ roomA).
  const shifted = { text: "moving to ", ts_iso: ts, memory_root: `${ts}${roomA}` };
  assert.equal(legacySignedString(shifted.text, shifted.ts_iso, roomB, shifted.memory_root), legacySignedString(text, ts, roomA));
  const r = await f.api.say(roomB, "anyone", shifted.text, { pubkey_hex: original.pubkey_hex, signature_hex: original.signature_hex, ts_iso: shifted.ts_iso, memory_root: shifted.memory_root });
  assert.equal(r.status, 400);
  assert.equal(r.body.code, "bad_signature");
  assert.match(r.body.detail, /^memory_root: with a legacy signature must be empty or/);
  assert.equal(await headSize(roomB), 1, "nothing was written in room B");
  // A memory_root in the strict form is fine with a legacy signature (and anything is with v1).
  const hash = "ab".repeat(32);
  assert.equal((await f.api.say(roomA, "v", "with root", legacy(newKey(), roomA, "with root", { memory_root: hash }))).status, 201);
});

test("sig.ts must be ISO 8601 UTC: RFC 2822 and other Date.parse forms are 400 validation_error naming sig.ts", async () => {
  const room = (await f.api.room()).uuid;
  const seed = newKey();
  const now = new Date();
  const rfc2822 = now.toUTCString(); // "Tue, 01 Dec 2026 10:00:00 GMT": within the window, the wrong form
  for (const ts of [rfc2822, now.toString(), String(now.getTime()), now.toISOString().replace("Z", ""), now.toISOString().replace("Z", "+01:00"), now.toISOString().toLowerCase(), "2026-13-01T00:00:00Z"]) {
    const r = await f.api.say(room, "tim", "t", { sig: signV1(seed, room, "tim", { text: "t" }, { ts }) });
    assert.equal(r.status, 400, ts);
    assert.equal(r.body.code, "validation_error", ts);
    assert.match(r.body.detail, /^sig\.ts: must be an ISO 8601 UTC time such as 2026-12-01T10:00:00Z/, ts);
  }
  assert.equal(await headSize(room), 1, "nothing was written");
  for (const ts of [now.toISOString(), now.toISOString().replace(/\.\d{3}Z$/, "Z"), now.toISOString().replace("Z", "+00:00"), now.toISOString().replace("Z", "456Z")]) {
    const r = await f.api.say(room, "tim", "t", { sig: signV1(seed, room, "tim", { text: "t" }, { ts }) });
    assert.equal(r.status, 201, `${ts}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.ts_iso, ts, "the exact string is kept");
  }
});
