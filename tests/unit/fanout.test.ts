// The room feed (lib/realtime/fanout.ts) on a store whose reads the test answers by hand: reads
// that race commits, streams that fall behind and catch up, a room that goes away.
import { test } from "node:test";
import assert from "node:assert/strict";
import { feedCount, watchRoom, type Sink } from "../../lib/realtime/fanout";
import type { Frame } from "../../lib/realtime/feed";
import { Notifier, ROOM_GONE } from "../../lib/realtime/notifier";
import type { Services } from "../../lib/services/context";

const ROOM = "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23";
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const frame = (seq: number, addressed: string[] = []): Frame => ({ seq, bytes: encoder.encode(`id: ${seq}\n\n`), addressed });
const settle = () => new Promise<void>((r) => setImmediate(r));

interface Read {
  since: number;
  limit: number;
  answer(frames: Frame[]): void;
}

/** Services with a notifier, a room that exists while `alive`, and frame reads the test answers (or a log to answer from). */
function fakeServices(log?: Frame[]) {
  const reads: Read[] = [];
  const state = { alive: true };
  const frames = {
    read: (_room: string, since: number, limit = 500) =>
      new Promise<Frame[]>((resolve) => {
        if (log) return resolve(log.filter((f) => f.seq > since).slice(0, limit));
        reads.push({ since, limit, answer: resolve });
      }),
  };
  const row = { uuid: ROOM, status: "open", expiresAt: "2999-01-01T00:00:00.000Z" };
  const svc = {
    notifier: new Notifier(),
    frames,
    roomRows: { get: async () => (state.alive ? row : undefined) },
    clock: { now: () => Date.now() },
  } as unknown as Services;
  return { svc, reads, state };
}

/** A sink that holds `capacity` bytes until drain() empties it. */
function fakeSink(capacity = 1 << 20) {
  let queued = 0;
  let resume = () => {};
  const got: number[] = [];
  const sink: Sink & { got: number[]; ended: boolean; drain(): void; onResume(fn: () => void): void } = {
    got,
    ended: false,
    room: () => capacity - queued,
    write(bytes) {
      queued += bytes.byteLength;
      const id = /^id: (\d+)/.exec(decoder.decode(bytes));
      if (id) got.push(Number(id[1]));
      return queued < capacity;
    },
    flush() {},
    end() {
      sink.ended = true;
    },
    drain() {
      queued = 0;
      resume();
    },
    onResume(fn) {
      resume = fn;
    },
  };
  return sink;
}

const opts = { pingMs: 3_600_000, ping: encoder.encode(": ping\n\n") };

/** Waits until the next frame read is asked for, and returns it. */
async function nextRead(reads: Read[]): Promise<Read> {
  for (let i = 0; i < 100 && reads.length === 0; i++) await settle();
  const read = reads.shift();
  assert.ok(read, "a frame read was asked for");
  return read;
}

test("a wake-up that arrives while the feed's read is out reads again, even when that read found nothing", async () => {
  const { svc, reads } = fakeServices();
  const sink = fakeSink();
  const watch = watchRoom(svc, ROOM, 0, sink, opts);
  (await nextRead(reads)).answer([frame(1)]); // the stream catches up…
  (await nextRead(reads)).answer([]); // …to the end of the room, and joins the feed
  svc.notifier.publish(ROOM, 2);
  const racing = await nextRead(reads); // the feed reads after 1
  assert.equal(racing.since, 1);
  svc.notifier.publish(ROOM, 3); // a commit lands while that read is out
  racing.answer([]); // the read began before it and saw nothing
  const again = await nextRead(reads);
  assert.equal(again.since, 1, "read again from the same position");
  again.answer([frame(2), frame(3)]);
  await settle();
  assert.deepEqual(sink.got, [1, 2, 3]);
  watch.stop();
  assert.equal(feedCount(svc), 0);
});

test("one read per head move for every live stream; a repeated wake-up reads nothing", async () => {
  const { svc, reads } = fakeServices();
  const sinks = [fakeSink(), fakeSink(), fakeSink()];
  const watches = sinks.map((s) => watchRoom(svc, ROOM, 0, s, opts));
  for (let i = 0; i < 3; i++) (await nextRead(reads)).answer([]); // each joins at 0
  svc.notifier.publish(ROOM, 1);
  svc.notifier.publish(ROOM, 1); // the same head again (a reconnected LISTEN's re-read)
  (await nextRead(reads)).answer([frame(1)]);
  await settle();
  assert.equal(reads.length, 0, "one read served all three streams");
  for (const s of sinks) assert.deepEqual(s.got, [1]);
  for (const w of watches) w.stop();
});

test("a stream whose sink fills leaves the feed, catches up from its own cursor once drained, and rejoins", async () => {
  const log = [frame(1)];
  const { svc } = fakeServices(log);
  const fast = fakeSink();
  const slow = fakeSink(14); // two frames of 7 bytes fill it
  const a = watchRoom(svc, ROOM, 0, fast, opts);
  const b = watchRoom(svc, ROOM, 0, slow, opts);
  slow.onResume(b.resume);
  await settle();
  for (let seq = 2; seq <= 6; seq++) {
    log.push(frame(seq));
    svc.notifier.publish(ROOM, seq);
    await settle();
  }
  assert.deepEqual(fast.got, [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(slow.got, [1, 2], "the full stream stopped at its sink's limit");
  slow.drain();
  await settle();
  slow.drain();
  await settle();
  slow.drain();
  await settle();
  assert.deepEqual(slow.got, [1, 2, 3, 4, 5, 6], "caught up, each frame once and in order");
  slow.drain();
  log.push(frame(7));
  svc.notifier.publish(ROOM, 7);
  await settle();
  assert.deepEqual(fast.got.at(-1), 7);
  assert.deepEqual(slow.got.at(-1), 7, "back on the feed");
  a.stop();
  b.stop();
});

test("a filtered stream skips frames addressed to others, and its cursor moves past them", async () => {
  const log = [frame(1), frame(2, ["bob"]), frame(3, ["ann"]), frame(4, ["bob", "ann"])];
  const { svc } = fakeServices(log);
  const bob = fakeSink();
  const all = fakeSink();
  const w1 = watchRoom(svc, ROOM, 0, bob, { ...opts, addressedTo: "bob" });
  const w2 = watchRoom(svc, ROOM, 0, all, opts);
  await settle();
  log.push(frame(5, ["bob"]), frame(6));
  svc.notifier.publish(ROOM, 6);
  await settle();
  assert.deepEqual(bob.got, [2, 4, 5]);
  assert.deepEqual(all.got, [1, 2, 3, 4, 5, 6]);
  w1.stop();
  w2.stop();
});

test("the streams of a room that is gone end, with one check for all of them", async () => {
  const { svc, state } = fakeServices([frame(1)]);
  const sinks = [fakeSink(), fakeSink()];
  for (const s of sinks) watchRoom(svc, ROOM, 0, s, opts);
  await settle();
  svc.notifier.publish(ROOM, ROOM_GONE); // a wake-up of a room still there changes nothing
  await settle();
  assert.ok(sinks.every((s) => !s.ended));
  state.alive = false;
  svc.notifier.publish(ROOM, ROOM_GONE);
  await settle();
  assert.ok(sinks.every((s) => s.ended));
  assert.equal(svc.notifier.streamCount, 0);
  assert.equal(feedCount(svc), 0);
});

test("the frame cache shares a read among readers at one cursor, but not across a head move", async () => {
  const { FrameCache } = await import("../../lib/realtime/feed");
  const queries: { since: number; answer(rows: unknown[]): void }[] = [];
  const notifier = new Notifier();
  const svc = { notifier, store: { listEvents: (_room: string, since: number) => new Promise((answer) => queries.push({ since, answer })) } } as unknown as Services;
  const cache = new FrameCache(svc);
  const first = cache.read(ROOM, 0, 16);
  const second = cache.read(ROOM, 0, 16);
  assert.equal(queries.length, 1, "two readers at one cursor, one query");
  notifier.publish(ROOM, 1); // a commit: a read asked for from now on must see it
  const third = cache.read(ROOM, 0, 16);
  assert.equal(queries.length, 2, "a reader after the head move gets a query of its own");
  queries[0]!.answer([]);
  assert.deepEqual(await first, []);
  assert.deepEqual(await second, []);
  queries[1]!.answer([]);
  assert.deepEqual(await third, []);
});

test("long-polls woken by a commit resume together, after the commit's fan-out to the streams", async () => {
  const log = [frame(1)];
  const { svc } = fakeServices(log);
  const sink = fakeSink();
  const watch = watchRoom(svc, ROOM, 0, sink, opts);
  await settle();
  const seenByPolls: number[][] = [];
  const polls = [0, 1, 2].map(() => svc.notifier.waitFor(ROOM, 1, async () => 1, 5_000).then((woke) => (seenByPolls.push([...sink.got]), woke)));
  await settle();
  log.push(frame(2));
  svc.notifier.publish(ROOM, 2);
  assert.deepEqual(await Promise.all(polls), [true, true, true]);
  assert.deepEqual(seenByPolls, [[1, 2], [1, 2], [1, 2]], "the stream had the frame before any long-poll resumed");
  assert.equal(svc.notifier.streamCount, 1, "the woken polls stopped listening at once");
  watch.stop();
});
