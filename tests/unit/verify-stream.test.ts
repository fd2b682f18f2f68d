// The fast paths of the verifier (issue 15) against the plain definitions they replace: the
// canonicaliser and canonical equality, strict hex and base64, the stored Merkle tree, and the
// streamed bundle reader (lib/log/bundle-stream.ts), which must give the report verifyBundle gives
// on the parsed bundle, whatever the chunking and field order, and refuse what is not a bundle.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { bytesToBase64, base64ToBytes, bytesToHex, hexToBytes, sha256Into, sha256Js } from "../../lib/log/bytes";
import { canonicalBytes, canonicalize, canonicalEqual } from "../../lib/log/jcs";
import { consistencyProof, MerkleTree, rootOf, subtreeRoot, verifyConsistency, leafHash, EMPTY_ROOT } from "../../lib/log/merkle";
import { eventLeafHash, signAgentWrite, type LogEvent } from "../../lib/log/event";
import { signCheckpoint } from "../../lib/log/checkpoint";
import { replay } from "../../lib/domain/replay";
import { verifyBundle, type Ed25519Verify, type RoomBundle } from "../../lib/log/verify";
import { BundleFormatError, verifyBundleStream } from "../../lib/log/bundle-stream";
import { ed25519Verify, ed25519VerifyAsync, serverKeyFromSeed } from "../../lib/services/server-key";

// ---- canonical JSON --------------------------------------------------------------------------

/** RFC 8785 the slow, obvious way: the reference the fast canonicaliser must match. */
function reference(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(reference).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).filter((k) => o[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${reference(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

const CHARS = ["a", "Z", "0", " ", '"', "\\", "/", "\n", "\t", "\u0000", "\u001f", "\u007f", "é", "€", "😀", "\u2028", "<", "\u00ff"];
function randomValue(rnd: () => number, depth = 0): unknown {
  const r = rnd();
  if (depth > 3 || r < 0.35) {
    const k = Math.floor(rnd() * 6);
    if (k === 0) return null;
    if (k === 1) return rnd() < 0.5;
    if (k === 2) return [0, -0, 1, -1.5, 1e21, 1e-7, 123456789012, 0.1 + 0.2, -1e308][Math.floor(rnd() * 9)];
    return Array.from({ length: Math.floor(rnd() * 8) }, () => CHARS[Math.floor(rnd() * CHARS.length)]).join("");
  }
  if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 4) }, () => randomValue(rnd, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(rnd() * 6); i > 0; i--) o[String(randomValue(rnd, 9))] = rnd() < 0.1 ? undefined : randomValue(rnd, depth + 1);
  return o;
}

function seeded(seed: number): () => number {
  let s = seed;
  return () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
}

describe("canonical JSON, fast paths", () => {
  test("canonicalize matches the obvious RFC 8785 serialisation on 3,000 random values", () => {
    const rnd = seeded(7);
    for (let i = 0; i < 3000; i++) {
      const v = randomValue(rnd);
      assert.equal(canonicalize(v), reference(v), JSON.stringify(v));
      assert.equal(bytesToHex(canonicalBytes(v)), Buffer.from(reference(v), "utf8").toString("hex"), "the bytes written directly");
    }
    // The byte writer refuses what canonicalize refuses, and a refusal leaves it usable.
    for (const bad of [NaN, [undefined], { a: "\ud800" }, "x\udfff", new Date(0), () => 1, 10n]) {
      assert.throws(() => canonicalize(bad));
      assert.throws(() => canonicalBytes(bad));
    }
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = { back: cyclic };
    assert.throws(() => canonicalBytes(cyclic), /cyclic/);
    assert.equal(bytesToHex(canonicalBytes({ b: "é", a: [1, "\n"] })), Buffer.from('{"a":[1,"\\n"],"b":"é"}').toString("hex"));
  });

  test("an event's leaf hash is SHA-256(0x00 ‖ its JCS bytes), also after a refused event and for one larger than any before", () => {
    const ev = (text: string): LogEvent => ({ v: 1, room: "r", seq: 1, ts: TS, type: "message.posted", actor: "a", payload: { text }, server: {}, prev: "0".repeat(64) });
    const expect = (e: LogEvent) => crypto.createHash("sha256").update(Buffer.concat([Buffer.from([0]), Buffer.from(canonicalize(e))])).digest("hex");
    for (const text of ["plain", "ünïcödé 😀 \"quoted\"\n", "x".repeat(100_000), "short again"]) {
      assert.equal(bytesToHex(eventLeafHash(ev(text))), expect(ev(text)));
      assert.throws(() => eventLeafHash(ev("\ud800")));
    }
  });

  test("canonicalEqual(a, b) is canonicalize(a) === canonicalize(b)", () => {
    const rnd = seeded(11);
    const values = Array.from({ length: 150 }, () => randomValue(rnd));
    // Reordered and undefined-padded copies must be equal; everything else as the strings say.
    const reordered = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(reordered);
      if (v && typeof v === "object") {
        const o = v as Record<string, unknown>;
        return Object.fromEntries([...Object.keys(o).reverse().map((k) => [k, reordered(o[k])]), ["zz-absent", undefined]]);
      }
      return v;
    };
    for (const a of values) {
      assert.equal(canonicalEqual(a, reordered(a)), true, JSON.stringify(a));
      for (const b of values.slice(0, 40)) assert.equal(canonicalEqual(a, b), canonicalize(a) === canonicalize(b), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
    }
    assert.equal(canonicalEqual({ a: 0 }, { a: -0 }), true, "-0 is 0");
    assert.equal(canonicalEqual({ a: 1, b: undefined }, { a: 1 }), true);
    assert.equal(canonicalEqual({ a: 1 }, { a: 1, b: null }), false);
    assert.equal(canonicalEqual([1, 2], [2, 1]), false);
    assert.equal(canonicalEqual({ a: [1] }, { a: { 0: 1 } }), false);
    assert.equal(canonicalEqual("1", 1), false);
    assert.equal(canonicalEqual(NaN, NaN), false, "NaN has no canonical form, so is never equal");
    assert.throws(() => canonicalEqual(new Date(0), new Date(0)), "what canonicalize refuses is still refused");
  });
});

// ---- bytes ------------------------------------------------------------------------------------

describe("SHA-256 in plain JS", () => {
  test("FIPS 180-4 examples, and node:crypto's digest for every length up to 300 bytes and some long ones", () => {
    const hex = (s: string) => bytesToHex(sha256Js(new TextEncoder().encode(s)));
    assert.equal(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert.equal(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert.equal(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    for (const n of [...Array.from({ length: 301 }, (_, i) => i), 1000, 4095, 4096, 100_001]) {
      const data = crypto.randomBytes(n);
      assert.equal(bytesToHex(sha256Js(data)), crypto.createHash("sha256").update(data).digest("hex"), `${n} bytes`);
    }
    const out = new Uint8Array(40).fill(9);
    sha256Into(new Uint8Array([1, 2, 3]), out, 5);
    assert.deepEqual(out.subarray(5, 37), new Uint8Array(crypto.createHash("sha256").update(new Uint8Array([1, 2, 3])).digest()));
    assert.deepEqual([...out.subarray(0, 5), ...out.subarray(37)], [9, 9, 9, 9, 9, 9, 9, 9], "nothing written around it");
  });
});

describe("strict hex and base64", () => {
  test("base64 round-trips and refuses every non-canonical or malformed form", () => {
    // Past 96 bytes the encoding no longer fits the encoder's reused buffer.
    for (let n = 0; n < 200; n++) {
      const b = crypto.randomBytes(n);
      assert.deepEqual(base64ToBytes(bytesToBase64(b)), new Uint8Array(b));
      assert.equal(bytesToBase64(b), b.toString("base64"));
    }
    for (const bad of ["A", "AB=", "A===", "====", "AB==CD==", "AB=C", " AAA", "AAA\n", "AA-_", "AB==", "AAB=", "Zm9vYmE=x", "Zm9vYg=", "é===", "AA\u0000="]) {
      assert.throws(() => base64ToBytes(bad), bad);
    }
    // The unused bits must be zero: "AB==" and "AA==" would both decode to 0x00.
    assert.deepEqual(base64ToBytes("AA=="), new Uint8Array([0]));
    assert.deepEqual(base64ToBytes("AAE="), new Uint8Array([0, 1]));
    assert.deepEqual(base64ToBytes(""), new Uint8Array(0));
  });

  test("hex round-trips, takes either case, refuses the rest", () => {
    const b = crypto.randomBytes(40);
    assert.equal(bytesToHex(b), b.toString("hex"));
    assert.deepEqual(hexToBytes(b.toString("hex").toUpperCase()), new Uint8Array(b));
    for (const bad of ["0", "0g", "g0", " 00", "0x00", "-1", "ｆｆ", "0\u0000"]) assert.throws(() => hexToBytes(bad), bad);
  });
});

// ---- the stored tree ---------------------------------------------------------------------------

describe("MerkleTree", () => {
  const leaves = Array.from({ length: 70 }, (_, i) => leafHash(new Uint8Array([i, i >> 8])));
  const tree = new MerkleTree();
  for (const l of leaves) tree.append(l);

  test("the root at every size, every subtree and every consistency proof are the RFC 9162 ones", () => {
    assert.deepEqual(new MerkleTree().root(), EMPTY_ROOT);
    for (let n = 0; n <= leaves.length; n++) assert.deepEqual(tree.root(n), rootOf(leaves.slice(0, n)), `size ${n}`);
    for (let a = 0; a < 40; a++) for (let b = a; b <= 40; b++) assert.deepEqual(tree.subtree(a, b), subtreeRoot(leaves, a, b), `[${a}, ${b})`);
    for (let n = 1; n <= leaves.length; n++) {
      for (let m = 1; m <= n; m++) {
        const proof = tree.consistencyProof(m, n);
        assert.deepEqual(proof, consistencyProof(leaves, m, n), `${m} -> ${n}`);
        assert.ok(verifyConsistency(m, n, proof, tree.root(m), tree.root(n)));
      }
    }
    assert.deepEqual(tree.leaf(69), leaves[69]);
  });

  test("what it returns is a copy, and it refuses what does not fit", () => {
    const r = tree.root(64);
    r.fill(0);
    assert.deepEqual(tree.root(64), rootOf(leaves.slice(0, 64)));
    assert.throws(() => tree.root(71));
    assert.throws(() => tree.subtree(3, 2));
    assert.throws(() => tree.append(new Uint8Array(31)));
    assert.throws(() => tree.consistencyProof(0, 5));
  });
});

// ---- the streamed bundle ----------------------------------------------------------------------

const ROOM = "7c1f1a52-9b8e-4c3d-a1f0-2e4b6d8c0a19";
const TS = "2026-12-01T10:00:00.000Z";
const serverKey = serverKeyFromSeed(crypto.createHash("sha256").update("verify-stream server").digest(), "test.example");
const agent = serverKeyFromSeed(crypto.createHash("sha256").update("verify-stream agent").digest(), "agent");
const origin = `test.example/room/${ROOM}`;

/** A self-consistent bundle: messages, some signed, a checkpoint per batch of three (one listed twice), projections. */
function bundle(messages = 40): RoomBundle {
  const out: RoomBundle = { format: "parley-room-bundle/1", origin, room: ROOM, server_key: { key_name: serverKey.keyName, pubkey_hex: serverKey.pubkeyHex }, events: [], checkpoints: [] };
  const tree = new MerkleTree();
  let prev = "0".repeat(64);
  const add = (type: string, actor: string, payload: Record<string, unknown>, sig?: LogEvent["sig"]) => {
    const event: LogEvent = { v: 1, room: ROOM, seq: out.events.length + 1, ts: TS, type, actor, payload, server: {}, prev, ...(sig ? { sig } : {}) };
    out.events.push(event);
    const leaf = eventLeafHash(event);
    tree.append(leaf);
    prev = bytesToHex(leaf);
    if (event.seq % 3 === 0 || event.seq === messages + 1) {
      out.checkpoints.push(signCheckpoint({ origin, size: event.seq, root: tree.root(), keyName: serverKey.keyName, pubkey: serverKey.pubkey, sign: serverKey.sign }));
    }
  };
  add("room.created", "server", { description: "streamed", is_public: false, protocol_mode: "standard", mode: "open" });
  for (let i = 0; i < messages; i++) {
    const text = `message ${i} with "quotes", a \\ backslash, ünïcödé 😀 and a\nnewline`;
    if (i % 4 === 0) {
      const s = signAgentWrite(agent, { room: ROOM, type: "message.posted", actor: "signer", payload: { text }, ts: TS, nonce: `nonce-${i}-0123456789abcdef` });
      add("message.posted", "signer", { text }, { alg: "ed25519-jcs-v1", ...s });
    } else add("message.posted", `agent-${i % 3}`, { text });
  }
  out.checkpoints.push(out.checkpoints[2]!); // listed twice: checked once
  out.projections = replay(out.events, out.events.map((e) => bytesToHex(eventLeafHash(e))));
  return out;
}

async function* chunked(text: string, size: number): AsyncGenerator<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  for (let i = 0; i < bytes.length; i += size) yield bytes.slice(i, i + size);
}

const streamed = (text: string, size: number, verify: Ed25519Verify = ed25519Verify, checkpoint?: string) => verifyBundleStream(chunked(text, size), { verify, checkpoint });

describe("verifyBundleStream", () => {
  const b = bundle();
  const text = JSON.stringify(b);

  test("an honest bundle: the same CLEAN report as verifyBundle, in chunks of any size", async () => {
    const want = await verifyBundle(b, { verify: ed25519Verify });
    assert.equal(want.verdict, "CLEAN", want.explanation);
    assert.equal(want.details.checkpoints, b.checkpoints.length);
    for (const size of [1, 2, 3, 7, 64, 1000, text.length]) assert.deepEqual(await streamed(text, size), want, `chunks of ${size}`);
    assert.deepEqual(await streamed(text, 100, ed25519VerifyAsync), want, "with the async (thread pool) verifier");
  });

  test("each distinct checkpoint signature is verified once", async () => {
    let calls = 0;
    const counting: Ed25519Verify = (pub, msg, sig) => {
      calls++;
      return ed25519Verify(pub, msg, sig);
    };
    const report = await streamed(text, 512, counting);
    assert.equal(report.verdict, "CLEAN");
    assert.equal(calls, new Set(b.checkpoints).size + report.details.agent_signatures);
  });

  test("the fields in another order (lists before the header) give the same report", async () => {
    const { format, origin: o, room, server_key, events, checkpoints, projections } = b;
    const shuffled = JSON.stringify({ projections, checkpoints, events, server_key, room, origin: o, format });
    const want = await verifyBundle(b, { verify: ed25519Verify });
    assert.deepEqual(await streamed(shuffled, 97), want);
    const spaced = JSON.stringify(b, null, 2);
    assert.deepEqual(await streamed(spaced, 333), want, "pretty-printed");
  });

  test("tampering is REFUTED exactly as verifyBundle reports it", async () => {
    const cases: [string, (x: RoomBundle) => void][] = [
      ["an edited message", (x) => ((x.events[5]!.payload as { text: string }).text = "edited")],
      ["a removed event", (x) => x.events.splice(7, 1)],
      ["a cut tail", (x) => x.events.splice(-4)],
      ["an edited projection", (x) => (x.projections!.messages[3]!.text = "edited")],
      ["a message served twice", (x) => x.projections!.messages.push({ ...x.projections!.messages[0]!, text: "twice" })],
      ["a message not served", (x) => x.projections!.messages.splice(2, 1)],
      ["a checkpoint's signature broken", (x) => (x.checkpoints[4] = x.checkpoints[4]!.replace(/ (.)/u, (_, c: string) => ` ${c === "A" ? "B" : "A"}`))],
      ["a checkpoint for another root", (x) => (x.checkpoints[1] = signCheckpoint({ origin, size: 6, root: EMPTY_ROOT, keyName: serverKey.keyName, pubkey: serverKey.pubkey, sign: serverKey.sign }))],
      ["a checkpoint past the end", (x) => x.checkpoints.push(signCheckpoint({ origin, size: 99, root: EMPTY_ROOT, keyName: serverKey.keyName, pubkey: serverKey.pubkey, sign: serverKey.sign }))],
      ["an agent signature replayed", (x) => (x.events[9]!.sig = x.events[5]!.sig)],
      ["no checkpoints", (x) => (x.checkpoints = [])],
      ["no projections", (x) => delete x.projections],
      ["a message whose text no reducer can take", (x) => ((x.events[6]!.payload as { text: unknown }).text = { not: "text" })],
      ["the same, without projections", (x) => {
        (x.events[6]!.payload as { text: unknown }).text = 5;
        delete x.projections;
      }],
    ];
    for (const [name, tamper] of cases) {
      const x = structuredClone(b);
      tamper(x);
      const want = await verifyBundle(x, { verify: ed25519Verify });
      assert.notEqual(want.verdict, "CLEAN", name);
      assert.deepEqual(await streamed(JSON.stringify(x), 61), want, name);
    }
  });

  test("an event no reducer can take stops the replay, not the other checks: every event is still hashed and every checkpoint checked", async () => {
    const x = structuredClone(b);
    (x.events[6]!.payload as { text: unknown }).text = { not: "text" };
    const report = await streamed(JSON.stringify(x), 61);
    assert.equal(report.verdict, "REFUTED");
    assert.equal(report.details.events, b.events.length);
    assert.equal(report.details.checkpoints, b.checkpoints.length);
    assert.equal(report.details.projections, null);
    const types = new Set(report.failures.map((f) => f.type));
    for (const t of ["event_format", "prev_link", "checkpoint_root", "projection"]) assert.ok(types.has(t), `${t} in ${[...types].join(", ")}`);
    assert.ok(report.failures.some((f) => f.type === "projection" && /cannot be replayed/.test(f.detail)));
    // The checkpoints before the edited event still hold: only those from size 7 on are refuted.
    const roots = report.failures.filter((f) => f.type === "checkpoint_root").map((f) => f.seq!);
    assert.ok(roots.length > 0 && roots.every((size) => size >= 7), roots.join(", "));
  });

  test("a kept checkpoint: consistent when the log grew, REFUTED when its tail was cut", async () => {
    const kept = b.checkpoints[3]!;
    const grown = await streamed(text, 256, ed25519Verify, kept);
    assert.equal(grown.verdict, "CLEAN");
    assert.deepEqual(grown.details.caller_checkpoint, { size: 12, consistent: true });
    const cut = structuredClone(b);
    cut.events.splice(10);
    cut.checkpoints = cut.checkpoints.filter((c) => Number(c.split("\n")[1]) <= 10);
    const report = await streamed(JSON.stringify(cut), 256, ed25519Verify, kept);
    assert.equal(report.verdict, "REFUTED");
    assert.ok(report.failures.some((f) => f.type === "truncated"));
    assert.deepEqual(report, await verifyBundle(cut, { verify: ed25519Verify, checkpoint: kept }));
  });

  test("what is not a bundle is a BundleFormatError, never a verdict", async () => {
    const bad: [string, string, boolean][] = [
      ["empty", "", true],
      ["not JSON", "{format: 1}", true],
      ["cut short", text.slice(0, text.length / 2), true],
      ["cut inside a string", text.slice(0, text.indexOf("message 3") + 4), true],
      ["text after it", `${text} x`, true],
      ["a second object after it", `${text}{}`, true],
      ["an array", "[]", false],
      ["an empty object", "{}", false],
      ["another format", text.replace('"parley-room-bundle/1"', '"other/1"'), false],
      ["events not a list", JSON.stringify({ ...b, events: {} }), false],
      ["no checkpoints list", JSON.stringify({ ...b, checkpoints: undefined }), false],
      ["a key twice", text.replace('{"format"', '{"events":[],"format"'), false],
      ["a broken item", text.replace('"seq":2,', '"seq":2,,'), true],
      ["no header", JSON.stringify({ format: b.format, events: b.events, checkpoints: b.checkpoints }), false],
      ["a malformed server key", JSON.stringify({ ...b, server_key: "k" }), false],
    ];
    for (const [name, input, syntax] of bad) {
      await assert.rejects(streamed(input, 50), (err: unknown) => err instanceof BundleFormatError && err.syntax === syntax, name);
    }
  });
});

describe("verifyBundleStream: lists cut at `},{` (parseToCut)", () => {
  // Texts that put `},{` (and its look-alikes) inside strings, so a cut there must not parse.
  const TRICKY = ['},{', '"},{"', '\\"},{\\"', '}, {', '}]},{[{', '{"v":1}', '],[', '\\', '"', '},{"seq":1}'];
  function trickyBundle(n: number): RoomBundle {
    const b = bundle(n);
    const rnd = seeded(11);
    for (const e of b.events.slice(1)) {
      if (e.sig) continue; // a signed text must stay as signed
      const p = e.payload as { text: string };
      p.text = Array.from({ length: 1 + Math.floor(rnd() * 6) }, () => TRICKY[Math.floor(rnd() * TRICKY.length)]!).join(rnd() < 0.5 ? "" : " ");
    }
    // A value nested in an item with `},{` outside any string.
    (b.events[7]!.payload as Record<string, unknown>).extra = [{ a: 1 }, { b: [{ c: 2 }, { d: 3 }] }];
    return b;
  }
  /** The bundle again with every hash, checkpoint and projection made to fit its (edited) events. */
  function resealed(b: RoomBundle): RoomBundle {
    const tree = new MerkleTree();
    let prev = "0".repeat(64);
    const checkpoints: string[] = [];
    for (const e of b.events) {
      e.prev = prev;
      const leaf = eventLeafHash(e);
      tree.append(leaf);
      prev = bytesToHex(leaf);
      if (e.seq % 3 === 0 || e.seq === b.events.length) checkpoints.push(signCheckpoint({ origin, size: e.seq, root: tree.root(), keyName: serverKey.keyName, pubkey: serverKey.pubkey, sign: serverKey.sign }));
    }
    b.checkpoints = checkpoints;
    try {
      b.projections = replay(b.events, b.events.map((e) => bytesToHex(eventLeafHash(e))));
    } catch {
      delete b.projections;
    }
    return b;
  }

  test("the same report as verifyBundle when strings and nested values hold `},{`, whatever the chunks", async () => {
    const b = resealed(trickyBundle(300));
    const text = JSON.stringify(b);
    assert.ok(text.length > 40_000);
    const want = await verifyBundle(b, { verify: ed25519Verify });
    assert.ok(text.includes('[{"a":1},{"b":[{"c":2},{"d":3}]}]'), "a `},{` outside strings, inside an item");
    assert.ok(text.split("},{").length > 2 * b.events.length, "and many inside strings");
    for (const size of [4096, 4097, 5003, 8192, 65_536, text.length]) assert.deepEqual(await streamed(text, size), want, `chunks of ${size}`);
    const spaced = JSON.stringify(b, null, 1);
    assert.deepEqual(await streamed(spaced, 8192), want, "pretty-printed: no cut, scanned");
  });

  test("an honest bundle with tricky texts is CLEAN, streamed in large chunks", async () => {
    const b = trickyBundle(300);
    delete (b.events[7]!.payload as Record<string, unknown>).extra;
    resealed(b);
    const text = JSON.stringify(b);
    const want = await verifyBundle(b, { verify: ed25519Verify });
    assert.equal(want.verdict, "CLEAN", want.explanation);
    for (const size of [4096, 6000, 1 << 20]) assert.deepEqual(await streamed(text, size), want, `chunks of ${size}`);
  });

  test("what is not a bundle is refused in large chunks too, as in small ones", async () => {
    const b = bundle(200);
    const text = JSON.stringify(b);
    const mid = text.indexOf('},{"v":1', text.length / 4);
    const bad: [string, string, boolean][] = [
      ["a broken item deep in the list", text.replace('"seq":150,', '"seq":150,,'), true],
      ["garbage between two items", `${text.slice(0, mid + 1)} x ${text.slice(mid + 1)}`, true],
      ["a missing comma between two items", `${text.slice(0, mid + 1)}${text.slice(mid + 2)}`, true],
      ["an extra comma between two items", `${text.slice(0, mid + 1)},${text.slice(mid + 1)}`, true],
      ["cut short in the list", text.slice(0, text.length / 3), true],
      ["the list closed early", `${text.slice(0, mid + 1)}]}`, false],
      ["the list closed early, then text", `${text.slice(0, mid + 1)}]} x`, true],
      ["a key twice after the list", text.replace('"checkpoints"', '"events":[],"checkpoints"'), false],
    ];
    for (const [name, input, syntax] of bad) {
      for (const size of [4096, 10_000, input.length]) {
        await assert.rejects(streamed(input, size), (err: unknown) => err instanceof BundleFormatError && err.syntax === syntax, `${name}, chunks of ${size}`);
        await assert.rejects(streamed(input, 50), (err: unknown) => err instanceof BundleFormatError && err.syntax === syntax, `${name}, small chunks`);
      }
    }
  });
});
