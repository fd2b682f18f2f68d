// The signer's thread (lib/services/signer-thread.ts): signatures asked for now and taken later,
// handed over through shared memory. Ed25519 is deterministic: every signature taken must be the
// one node:crypto makes on the spot, wherever it was made.
import { test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { signerThread, type SignTicket } from "../../lib/services/signer-thread";

const { privateKey } = crypto.generateKeyPairSync("ed25519");
const expected = (message: Uint8Array) => Buffer.from(crypto.sign(null, message, privateKey)).toString("hex");
const hex = (signature: Uint8Array) => Buffer.from(signature).toString("hex");
const message = (i: number) => new TextEncoder().encode(`localhost/room/${crypto.randomUUID()}\n${i}\n${crypto.randomBytes(32).toString("base64")}\n`);

async function readyWithin(ticket: SignTicket, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!ticket.ready() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  return ticket.ready();
}

test("signatures made on the thread are the ones made on the spot; more requests than slots, some taken at once", async () => {
  const signer = signerThread(privateKey);
  const first = message(0);
  const ticket = signer.signSoon(first);
  assert.equal(await readyWithin(ticket, 10_000), true, "the thread started and signed");
  assert.equal(hex(ticket.take()), expected(first));
  for (let round = 0; round < 3; round++) {
    const asked = Array.from({ length: 200 }, (_, i) => message(i)).map((m) => ({ m, ticket: signer.signSoon(m) }));
    // Every tenth at once (still being signed, or not yet: made on the spot), the rest once all are ready.
    for (const [i, { m, ticket: t }] of asked.entries()) if (i % 10 === 0) assert.equal(hex(t.take()), expected(m));
    assert.equal(await readyWithin(asked.at(-1)!.ticket, 10_000), true);
    for (const [i, { m, ticket: t }] of asked.entries()) if (i % 10 !== 0) assert.equal(hex(t.take()), expected(m));
  }
  const counts = signer.counts();
  assert.equal(counts.asked, 601);
  assert.equal(counts.thread + counts.here, 601);
  assert.ok(counts.thread >= 540, `the ones taken once ready came from the thread (${JSON.stringify(counts)})`);
});

test("a ticket left untaken while its slot serves a later request still gives its own signature; a long message is signed on the spot", async () => {
  const signer = signerThread(privateKey);
  const old = message(-1);
  const left = signer.signSoon(old);
  assert.equal(await readyWithin(left, 10_000), true);
  // 256 more requests: the last one takes the left ticket's slot over.
  const later = Array.from({ length: 256 }, (_, i) => message(i)).map((m) => ({ m, ticket: signer.signSoon(m) }));
  assert.equal(await readyWithin(later.at(-1)!.ticket, 10_000), true);
  assert.equal(left.ready(), false, "its slot holds another request now");
  assert.equal(hex(left.take()), expected(old));
  for (const { m, ticket } of later) assert.equal(hex(ticket.take()), expected(m));
  const long = new Uint8Array(1025).fill(0x61);
  const ticket = signer.signSoon(long);
  assert.equal(ticket.ready(), false);
  assert.equal(hex(ticket.take()), expected(long));
});

test("request numbers wrap past 2^31 (a server that has signed for days): slots stay in range and every signature is the right one", async () => {
  const signer = signerThread(privateKey, 2 ** 31 - 100);
  for (let round = 0; round < 2; round++) {
    const asked = Array.from({ length: 150 }, (_, i) => message(i)).map((m) => ({ m, ticket: signer.signSoon(m) }));
    assert.equal(await readyWithin(asked.at(-1)!.ticket, 10_000), true);
    for (const { m, ticket } of asked) assert.equal(hex(ticket.take()), expected(m));
  }
  const counts = signer.counts();
  assert.equal(counts.asked, 300);
  assert.ok(counts.thread >= 290, `the thread signed across the wrap (${JSON.stringify(counts)})`);
  // Closed (the server's close): the thread signs nothing more; what is asked for after is signed
  // on the spot when taken, and right.
  signer.close();
  const after = message(-2);
  const ticket = signer.signSoon(after);
  assert.equal(await readyWithin(ticket, 200), false, "no thread made it");
  assert.equal(hex(ticket.take()), expected(after));
  assert.equal(signer.counts().here, counts.here + 1);
});

test("settled() resolves when the thread has signed (it wakes the waiter), at once for a ticket that will be made on the spot", async () => {
  const signer = signerThread(privateKey);
  // The waiter's promise alone keeps no process alive (the server's sockets do): a timer does here.
  const within = async (settled: Promise<void>, ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve("still waiting"), ms)));
    try {
      return await Promise.race([settled.then(() => "settled"), late]);
    } finally {
      clearTimeout(timer);
    }
  };
  for (let round = 0; round < 3; round++) {
    const asked = Array.from({ length: 100 }, (_, i) => message(i)).map((m) => ({ m, ticket: signer.signSoon(m) }));
    // Without the thread's wake-up a waiter would sit out its whole 60 s.
    assert.equal(await within(asked.at(-1)!.ticket.settled(60_000), 20_000), "settled");
    assert.equal(asked.at(-1)!.ticket.ready(), true);
    for (const { m, ticket } of asked) assert.equal(hex(ticket.take()), expected(m));
  }
  assert.equal(signer.counts().here, 0, "every signature came from the thread");
  // A long message is never handed to the thread: nothing to wait for.
  const long = new Uint8Array(1025).fill(0x62);
  const ticket = signer.signSoon(long);
  assert.equal(await within(ticket.settled(60_000), 20_000), "settled");
  assert.equal(hex(ticket.take()), expected(long));
  // Closed: nothing to wait for; made on the spot.
  signer.close();
  const lateMessage = message(-3);
  const late = signer.signSoon(lateMessage);
  assert.equal(await within(late.settled(60_000), 20_000), "settled");
  assert.equal(late.ready(), false);
  assert.equal(hex(late.take()), expected(lateMessage));
});
