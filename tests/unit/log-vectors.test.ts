import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import crypto from 'node:crypto';
import {
  ZERO_HASH_HEX,
  agentEnvelope,
  base64ToBytes,
  bytesToBase64,
  bytesToHex,
  eventCanonical,
  eventLeafHash,
  frontierAppend,
  frontierRoot,
  hexToBytes,
  keyId,
  legacySignedString,
  nobleSign,
  noblePublicKey,
  nobleVerify,
  parseCheckpoint,
  signCheckpoint,
  utf8,
  verifyCheckpoint,
  type Frontier,
  type LogEvent,
} from '../../lib/log/index';

const fx = JSON.parse(readFileSync(new URL('../fixtures/event-log-v1.json', import.meta.url), 'utf8'));
const events = fx.events as {
  event: LogEvent;
  canonical: string;
  leaf_hash: string;
  root_after: string;
  checkpoint: string;
}[];
const serverSeed = hexToBytes(fx.server_key.seed_hex);
const serverPub = hexToBytes(fx.server_key.pubkey_hex);
const keyName: string = fx.server_key.key_name;
const SERVER_KEY = { keyName, pubkey: serverPub };

// node:crypto signing, as the server does it: PKCS#8 wrapping of the raw 32-byte seed.
const nodePrivateKey = crypto.createPrivateKey({
  key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), serverSeed]),
  format: 'der',
  type: 'pkcs8',
});
const nodeSign = (msg: Uint8Array) => new Uint8Array(crypto.sign(null, msg, nodePrivateKey));

test('fixture keys: seeds give the published public keys and key id', () => {
  assert.equal(bytesToHex(noblePublicKey(serverSeed)), fx.server_key.pubkey_hex);
  assert.equal(bytesToHex(noblePublicKey(hexToBytes(fx.agent_key.seed_hex))), fx.agent_key.pubkey_hex);
  assert.equal(bytesToHex(keyId(keyName, serverPub)), fx.server_key.key_id_hex);
});

test('key ids: another name or key, asked in turn, each gets its own (the last one is kept, not reused)', () => {
  const other = noblePublicKey(hexToBytes(fx.agent_key.seed_hex));
  const direct = (name: string, pub: Uint8Array) => crypto.createHash('sha256').update(Buffer.concat([Buffer.from(name), Buffer.from([0x0a, 0x01]), pub])).digest().subarray(0, 4).toString('hex');
  for (const [name, pub] of [[keyName, serverPub], [keyName, other], ['other.example', serverPub], [keyName, serverPub], [keyName, serverPub]] as const) {
    const id = keyId(name, pub);
    assert.equal(bytesToHex(id), direct(name, pub), `${name} ${bytesToHex(pub).slice(0, 8)}`);
    id.fill(0); // a caller's copy: changing it changes no later answer
  }
  const reused = new Uint8Array(serverPub);
  keyId(keyName, reused);
  reused[0]! ^= 1; // the same array, changed in place: a different key
  assert.equal(bytesToHex(keyId(keyName, reused)), direct(keyName, reused));
});

test('every event: canonical bytes, leaf hash, prev link, root, checkpoint', () => {
  let frontier: Frontier = [];
  let prev = ZERO_HASH_HEX;
  for (const [i, v] of events.entries()) {
    const e = v.event;
    assert.equal(e.seq, i + 1);
    assert.equal(eventCanonical(e), v.canonical, `canonical seq ${e.seq}`);
    const leaf = eventLeafHash(e);
    assert.equal(bytesToHex(leaf), v.leaf_hash, `leaf seq ${e.seq}`);
    assert.equal(e.prev, prev, `prev seq ${e.seq}`);
    prev = v.leaf_hash;

    frontier = frontierAppend(frontier, i, leaf);
    const root = frontierRoot(frontier);
    assert.equal(bytesToBase64(root), v.root_after, `root seq ${e.seq}`);

    const args = { origin: fx.origin, size: e.seq, root, keyName, pubkey: serverPub };
    const note = signCheckpoint({ ...args, sign: (m) => nobleSign(serverSeed, m) });
    assert.equal(note, v.checkpoint, `checkpoint seq ${e.seq}`);
    // Ed25519 is deterministic: the server's node:crypto path yields the same note.
    assert.equal(signCheckpoint({ ...args, sign: nodeSign }), v.checkpoint);

    const parsed = parseCheckpoint(v.checkpoint);
    assert.ok(parsed);
    assert.equal(parsed.origin, fx.origin);
    assert.equal(parsed.size, e.seq);
    assert.deepEqual(parsed.root, root);
    assert.equal(parsed.signatures.length, 1);
    assert.equal(bytesToHex(parsed.signatures[0].keyId), fx.server_key.key_id_hex);
  }
});

test('an event without sig canonicalises the same with sig: undefined', () => {
  const e = { ...events[0].event, sig: undefined };
  assert.equal(eventCanonical(e), events[0].canonical);
});

test('agent envelope: canonical string and signature', () => {
  const env = fx.agent_envelope;
  const canonical = agentEnvelope(env.object);
  assert.equal(canonical, env.canonical);
  const pub = hexToBytes(fx.agent_key.pubkey_hex);
  const sig = hexToBytes(env.signature_hex);
  assert.ok(nobleVerify(pub, utf8(canonical), sig));
  // Deterministic signature: re-signing with the agent seed reproduces it.
  assert.equal(bytesToHex(nobleSign(hexToBytes(fx.agent_key.seed_hex), utf8(canonical))), env.signature_hex);
  assert.equal(nobleVerify(pub, utf8(canonical + ' '), sig), false);
  assert.equal(nobleVerify(serverPub, utf8(canonical), sig), false);
  // The stored event (seq 3) carries this signature, and its payload is the envelope payload.
  const stored = events[2].event;
  assert.equal(stored.sig?.alg, 'ed25519-jcs-v1');
  assert.equal(stored.sig?.signature_hex, env.signature_hex);
  if (stored.sig?.alg === 'ed25519-jcs-v1') {
    const rebuilt = agentEnvelope({
      room: stored.room,
      type: stored.type,
      actor: stored.actor,
      payload: stored.payload,
      ts: stored.sig.ts,
      nonce: stored.sig.nonce,
    });
    assert.equal(rebuilt, env.canonical);
  }
});

test('legacy signature over text ‖ ts_iso ‖ room ‖ memory_root', () => {
  const l = fx.legacy_signature;
  const s = legacySignedString(l.text, l.ts_iso, l.room, l.memory_root);
  assert.equal(s, l.signed_string);
  assert.equal(legacySignedString(l.text, l.ts_iso, l.room), l.signed_string);
  assert.equal(legacySignedString(l.text, l.ts_iso, l.room, null), l.signed_string);
  const pub = hexToBytes(fx.agent_key.pubkey_hex);
  assert.ok(nobleVerify(pub, utf8(s), hexToBytes(l.signature_hex)));
  assert.equal(nobleVerify(pub, utf8(s + 'x'), hexToBytes(l.signature_hex)), false);
  const stored = events[3].event;
  assert.equal(stored.sig?.alg, 'ed25519-legacy-v0');
  assert.equal(stored.sig?.signature_hex, l.signature_hex);
});

test('nobleVerify never throws on malformed input', () => {
  const msg = utf8('x');
  const sig = nobleSign(serverSeed, msg);
  assert.ok(nobleVerify(serverPub, msg, sig));
  assert.equal(nobleVerify(serverPub.slice(1), msg, sig), false);
  assert.equal(nobleVerify(serverPub, msg, sig.slice(1)), false);
  assert.equal(nobleVerify(new Uint8Array(32).fill(255), msg, sig), false);
  assert.equal(nobleVerify(null as never, msg, sig), false);
});

test('verifyCheckpoint accepts every fixture checkpoint', () => {
  for (const v of events) {
    const r = verifyCheckpoint(v.checkpoint, SERVER_KEY, nobleVerify);
    assert.equal(r.ok, true, r.reason);
    assert.equal(r.parsed?.size, v.event.seq);
  }
});

test('verifyCheckpoint rejects tampered notes, wrong key names and wrong keys', () => {
  const otherPub = noblePublicKey(hexToBytes(fx.agent_key.seed_hex));
  for (const v of events) {
    const note = v.checkpoint;
    const lines = note.split('\n');
    // One changed character in the root: still a well-formed note, but the signature breaks.
    const root = lines[2];
    const c = root[5] === 'A' ? 'B' : 'A';
    const tampered = note.replace(root, root.slice(0, 5) + c + root.slice(6));
    const rt = verifyCheckpoint(tampered, SERVER_KEY, nobleVerify);
    assert.equal(rt.ok, false);
    assert.equal(rt.reason, 'bad signature');
    // Other tampering: size, origin.
    assert.equal(verifyCheckpoint(note.replace(`\n${v.event.seq}\n`, `\n${v.event.seq + 1}\n`), SERVER_KEY, nobleVerify).ok, false);
    assert.equal(verifyCheckpoint(note.replace('parley.example/room', 'parley.example/rooms'), SERVER_KEY, nobleVerify).ok, false);
    // Wrong key name: the line is not from the expected key.
    const wrongName = verifyCheckpoint(note, { keyName: 'other.example', pubkey: serverPub }, nobleVerify);
    assert.equal(wrongName.ok, false);
    assert.equal(wrongName.reason, 'no signature from this key');
    // Wrong key: its key id does not match the line, so there is no signature from it.
    const wrongKey = verifyCheckpoint(note, { keyName, pubkey: otherPub }, nobleVerify);
    assert.equal(wrongKey.ok, false);
    // Right name and id but a signature that fails: the verify callback is what decides.
    assert.equal(verifyCheckpoint(note, SERVER_KEY, () => false).ok, false);
    // A renamed signature line cannot be re-attributed.
    assert.equal(verifyCheckpoint(note.replace(`— ${keyName} `, '— other.example '), SERVER_KEY, nobleVerify).ok, false);
  }
});

test('signed-note rules: foreign signature lines are ignored, a bad line from our key rejects', () => {
  const note = events[1].checkpoint;
  const agentSeed = hexToBytes(fx.agent_key.seed_hex);
  const body = note.slice(0, note.indexOf('\n\n') + 1);
  const foreign = `— witness.example ${bytesToBase64(new Uint8Array([...keyId('witness.example', noblePublicKey(agentSeed)), ...nobleSign(agentSeed, utf8(body))]))}\n`;
  assert.equal(verifyCheckpoint(note + foreign, SERVER_KEY, nobleVerify).ok, true);
  const ours = note.slice(body.length + 1);
  assert.equal(verifyCheckpoint(body + '\n' + foreign + ours, SERVER_KEY, nobleVerify).ok, true);
  // A second line with our name and id but a broken signature: reject the whole note.
  const sigB64 = ours.trim().split(' ')[2];
  const sig = base64ToBytes(sigB64);
  sig[10] ^= 1;
  const broken = `— ${keyName} ${bytesToBase64(sig)}\n`;
  assert.equal(verifyCheckpoint(note + broken, SERVER_KEY, nobleVerify).ok, false);
});

test('parseCheckpoint is strict and never throws', () => {
  const good = events[0].checkpoint;
  assert.ok(parseCheckpoint(good));
  const bad: unknown[] = [
    '',
    'x',
    good.slice(0, -1), // no final newline
    good.replace('\n\n', '\n'), // no blank line
    good + '\n', // empty signature line
    good.replace('\n1\n', '\n01\n'), // leading zero
    good.replace('\n1\n', '\n-1\n'),
    good.replace('\n1\n', '\n1.0\n'),
    good.replace('\n1\n', '\n99999999999999999999\n'), // beyond 2^53
    good.replace('\n1\n', '\n1\nextension\n'), // extension lines are not Parley's
    good.replace('=\n\n', '\n\n'), // root without padding
    good.replace(/\n[^\n]*=\n\n/, '\nAAAA\n\n'), // root not 32 bytes
    good.replace('\n', '\r\n'), // control character
    good.replace('\n', '\t\n'),
    good.replace('— ', '- '), // hyphen instead of em dash
    good.replace('— ', '—'),
    good.replace(`— ${keyName} `, '— a+b '), // '+' in key name
    good.replace(`— ${keyName} `, `— ${keyName}  `), // double space
    good.replace(/ [A-Za-z0-9+/=]+\n$/, ' AAAA\n'), // signature blob < 5 bytes
    good.replace(/ ([A-Za-z0-9+/=]+)\n$/, ' $1 \n'), // trailing space
    good.replace('parley', '\ud800'), // not valid UTF-8
    'parley.example\n1\n' + good.split('\n')[2] + '\n', // unsigned
    good.replace(/^[^\n]*/, ''), // empty origin
    null,
    undefined,
    42,
  ];
  for (const b of bad) {
    assert.notEqual(b, good, 'probe must change the note');
    assert.equal(parseCheckpoint(b as string), null, JSON.stringify(b));
  }
  // A note with many signature lines is refused rather than processed.
  const many = good + good.slice(good.indexOf('\n\n') + 2).repeat(200);
  assert.equal(parseCheckpoint(many), null);
});

test('signCheckpoint refuses inputs it could not encode unambiguously', () => {
  const root = new Uint8Array(32);
  const base = { origin: 'o.example/room/x', size: 1, root, keyName, pubkey: serverPub, sign: (m: Uint8Array) => nobleSign(serverSeed, m) };
  assert.ok(signCheckpoint(base));
  assert.throws(() => signCheckpoint({ ...base, origin: 'a\nb' }));
  assert.throws(() => signCheckpoint({ ...base, origin: '' }));
  assert.throws(() => signCheckpoint({ ...base, size: -1 }));
  assert.throws(() => signCheckpoint({ ...base, size: 1.5 }));
  assert.throws(() => signCheckpoint({ ...base, root: new Uint8Array(31) }));
  assert.throws(() => signCheckpoint({ ...base, keyName: 'has space' }));
  assert.throws(() => signCheckpoint({ ...base, sign: () => new Uint8Array(10) }));
});
