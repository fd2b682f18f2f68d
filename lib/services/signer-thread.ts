import crypto from "node:crypto";
import { Worker } from "node:worker_threads";

/** A signature asked for now and taken later. */
export interface SignTicket {
  /** Whether the thread has made it (take() then only reads it). */
  ready(): boolean;
  /** Resolves once it is ready, or after `ms` (then take() makes it on the spot). Never rejects. */
  settled(ms: number): Promise<void>;
  take(): Uint8Array;
}

/** Signatures asked for so far; of those taken, how many the thread made; and how many were made on the spot (signHere's too). */
export interface SignerCounts {
  asked: number;
  thread: number;
  here: number;
}

/** A power of two: a request's slot is its number's low bits, right across the int32 wrap. */
const SLOTS = 256;
const MESSAGE_MAX = 1024;
/** A slot's state: free (or its signature taken), asked for, signed. */
const FREE = 0;
const ASKED = 1;
const SIGNED = 2;

// Shared memory, in Int32s: [0] the number of signatures asked for so far, [1] 1 while the thread
// sleeps until woken; then per slot its state, the number of the request it holds and its message's
// length. Bytes: the messages, the signatures.
//
// Waking a sleeping thread costs the waker about 21 µs here (measured: a notify every 300 µs; 1 µs
// when the thread is awake): more than half the signature it hands over. So the thread, once out of
// work, looks for more every 0.1 ms for 10 ms (timed waits: its own timer wakes it, the main thread
// never does), and only then sleeps until a request wakes it.
const THREAD = `
const { workerData } = require("node:worker_threads");
const crypto = require("node:crypto");
const { key, ctrl, msgs, sigs, slots, messageMax, first } = workerData;
const asked = new Int32Array(ctrl, 0, 1), sleeping = new Int32Array(ctrl, 4, 1);
const state = new Int32Array(ctrl, 8, slots), lengths = new Int32Array(ctrl, 8 + 8 * slots, slots);
const messages = new Uint8Array(msgs), signatures = new Uint8Array(sigs);
let done = first;
for (;;) {
  let upTo = Atomics.load(asked, 0);
  for (let looks = 0; upTo === done && looks < 100; looks++) {
    Atomics.wait(asked, 0, done, 0.1);
    upTo = Atomics.load(asked, 0);
  }
  if (upTo === done) {
    Atomics.store(sleeping, 0, 1);
    if (Atomics.load(asked, 0) === done) Atomics.wait(asked, 0, done);
    Atomics.store(sleeping, 0, 0);
    continue;
  }
  for (; done !== upTo; done = (done + 1) | 0) {
    const slot = done & (slots - 1);
    const at = slot * messageMax;
    signatures.set(crypto.sign(null, messages.subarray(at, at + lengths[slot]), key), slot * 64);
    Atomics.store(state, slot, ${SIGNED});
    // Wakes a settled() waiting for this slot (no waiter, no cost: V8 keeps the async waiters' list).
    Atomics.notify(state, slot);
  }
}
`;

/**
 * Ed25519 signatures made on a thread of their own, handed over through shared memory: asking
 * costs the main thread a copy, taking one that is ready a read, where signing costs it about
 * 34 µs. Nothing waits: no event-loop turn (a group commit stays within its turn), and a signature
 * not ready when it is taken (or asked for while the thread is SLOTS behind, or when the thread
 * could not start or stopped) is made on the spot instead.
 */
export function signerThread(
  privateKey: crypto.KeyObject,
  /** The number of the first request (tests start near the int32 wrap; requests are numbered mod 2^32). */
  first = 0,
): { signSoon(message: Uint8Array): SignTicket; signHere(message: Uint8Array): Uint8Array; counts(): SignerCounts; close(): void } {
  const counted: SignerCounts = { asked: 0, thread: 0, here: 0 };
  const signHere = (message: Uint8Array) => {
    counted.here++;
    return new Uint8Array(crypto.sign(null, message, privateKey));
  };
  const here = (message: Uint8Array): SignTicket => ({ ready: () => false, settled: async () => {}, take: () => signHere(message) });
  let shared: { asked: Int32Array; sleeping: Int32Array; state: Int32Array; request: Int32Array; lengths: Int32Array; messages: Uint8Array; signatures: Uint8Array } | undefined;
  let broken = false;
  let worker: Worker | undefined;
  let next = first | 0;

  function start() {
    const ctrl = new SharedArrayBuffer(8 + 12 * SLOTS);
    const msgs = new SharedArrayBuffer(SLOTS * MESSAGE_MAX);
    const sigs = new SharedArrayBuffer(SLOTS * 64);
    new Int32Array(ctrl, 0, 1)[0] = next;
    try {
      worker = new Worker(THREAD, { eval: true, workerData: { key: privateKey, ctrl, msgs, sigs, slots: SLOTS, messageMax: MESSAGE_MAX, first: next } });
      worker.unref();
      worker.on("error", () => (broken = true));
      worker.on("exit", () => (broken = true));
    } catch {
      broken = true;
      return;
    }
    shared = {
      asked: new Int32Array(ctrl, 0, 1),
      sleeping: new Int32Array(ctrl, 4, 1),
      state: new Int32Array(ctrl, 8, SLOTS),
      request: new Int32Array(ctrl, 8 + 4 * SLOTS, SLOTS),
      lengths: new Int32Array(ctrl, 8 + 8 * SLOTS, SLOTS),
      messages: new Uint8Array(msgs),
      signatures: new Uint8Array(sigs),
    };
  }

  return {
    signSoon(message) {
      counted.asked++;
      if (!shared && !broken) start();
      if (!shared || broken || message.length > MESSAGE_MAX) return here(message);
      const s = shared;
      const n = next;
      const slot = n & (SLOTS - 1);
      if (Atomics.load(s.state, slot) === ASKED) return here(message);
      next = (n + 1) | 0;
      s.messages.set(message, slot * MESSAGE_MAX);
      s.lengths[slot] = message.length;
      s.request[slot] = n;
      Atomics.store(s.state, slot, ASKED);
      Atomics.store(s.asked, 0, next);
      // Sequentially consistent: either the thread sees this request before it sleeps, or this sees it asleep.
      if (Atomics.load(s.sleeping, 0) === 1) Atomics.notify(s.asked, 0);
      const ready = () => s.request[slot] === n && Atomics.load(s.state, slot) === SIGNED;
      return {
        ready,
        async settled(ms) {
          if (ready() || s.request[slot] !== n) return;
          const wait = Atomics.waitAsync(s.state, slot, ASKED, ms);
          if (wait.async) await wait.value;
        },
        take() {
          // Still being signed, or the slot taken over by a later request (this ticket left that long).
          if (!ready()) return signHere(message);
          const signature = s.signatures.slice(slot * 64, slot * 64 + 64);
          Atomics.store(s.state, slot, FREE);
          counted.thread++;
          return signature;
        },
      };
    },
    /** Made now, on this thread (counted with those made on the spot). */
    signHere,
    counts: () => ({ ...counted }),
    /** Stops the thread: what is asked for after (or not taken before) is signed on the spot. */
    close() {
      broken = true;
      void worker?.terminate();
    },
  };
}
