/**
 * A room's live streams share its reads (lib/realtime/fanout.ts): one store read per head move for
 * all of them, each stream still exactly once and in order, a stream that falls behind catching up
 * from its own cursor, filters kept per stream.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { postMessage } from "../../lib/services/messages";
import { roomEventStream } from "../../lib/realtime/sse";
import { feedCount } from "../../lib/realtime/fanout";
import { startApi, type TestApi } from "../helpers/server";
import { openSse, type SseEvent } from "../helpers/sse";
import { waitUntil } from "../helpers/wait";

const caller = (f: TestApi) => ({ ip: "local", origin: f.url });
const ids = (events: SseEvent[]) => events.map((e) => Number(e.id));
const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/** Counts the store's event reads of one room, and the events they gave. */
function countReads(f: TestApi, room: string) {
  const store = f.server.svc.store;
  const listEvents = store.listEvents;
  const counter = { reads: 0, events: 0, restore: () => void (store.listEvents = listEvents) };
  store.listEvents = async (id, since, limit) => {
    const rows = await listEvents(id, since, limit);
    if (id === room) {
      counter.reads++;
      counter.events += rows.length;
    }
    return rows;
  };
  return counter;
}

/** The SSE events of a raw HTTP/1.1 answer with a chunked body (latin1 text, as read off the socket). */
function eventsOfRaw(raw: string): SseEvent[] {
  let rest = raw.slice(raw.indexOf("\r\n\r\n") + 4);
  let body = "";
  for (;;) {
    const eol = rest.indexOf("\r\n");
    if (eol < 0) break;
    const size = parseInt(rest.slice(0, eol), 16);
    if (!(size > 0) || rest.length < eol + 2 + size) break;
    body += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
  return Buffer.from(body, "latin1")
    .toString("utf8")
    .split("\n\n")
    .map((block) => {
      const ev: SseEvent = { data: "" };
      for (const line of block.split("\n")) {
        if (line.startsWith("id: ")) ev.id = line.slice(4);
        else if (line.startsWith("event: ")) ev.event = line.slice(7);
        else if (line.startsWith("data: ")) ev.data = line.slice(6);
      }
      return ev;
    })
    .filter((ev) => ev.id !== undefined);
}

describe("one room, many streams", () => {
  let f: TestApi;
  before(async () => (f = await startApi({ PARLEY_STALLED_STREAM_TIMEOUT: "60s" })));
  after(() => f.close());

  test("twenty streams get every event once and in order, from one store read per post", async () => {
    const room = (await f.api.room()).uuid;
    const streams = await Promise.all(Array.from({ length: 20 }, () => openSse(`${f.url}/api/rooms/${room}/events`)));
    await Promise.all(streams.map((s) => s.waitFor(1)));
    const counter = countReads(f, room);
    try {
      for (let i = 0; i < 10; i++) {
        assert.equal((await f.api.say(room, "ann", `post ${i}`)).status, 201);
        await Promise.all(streams.map((s) => s.waitFor(i + 2)));
      }
      assert.ok(counter.reads <= 10, `${counter.reads} store reads for 10 posts to 20 streams (one per post at most)`);
    } finally {
      counter.restore();
    }
    for (const s of streams) assert.deepEqual(ids(s.events), upTo(11));
    assert.deepEqual(JSON.parse(streams[19]!.events[10]!.data).payload, { text: "post 9" });
    await Promise.all(streams.map((s) => s.close()));
    await waitUntil("the room's feed being dropped with its last stream", () => feedCount(f.server.svc) === 0);
  });

  test("a commit's events reach the live streams from the commit itself: no store read, the same frames the store gives back", async () => {
    const room = (await f.api.room()).uuid;
    const counter = countReads(f, room);
    const live = await openSse(`${f.url}/api/rooms/${room}/events`);
    try {
      await live.waitFor(1);
      // Its catch-up: the room's event, then a read that finds nothing more (it joins the feed).
      await waitUntil("the stream caught up", () => counter.reads >= 2);
      counter.events = 0;
      const first = await f.api.say(room, "ann", "hello @ben, a line\u2028separator and a DEL \u007f");
      assert.equal(first.status, 201);
      await live.waitFor(2);
      assert.equal((await f.api.say(room, "ben", "a reply ✓", { reply_to: first.body.id })).status, 201);
      assert.equal((await f.api.say(room, "ann", "third")).status, 201);
      await live.waitFor(4);
      assert.equal(counter.events, 0, "the live stream read no event back from the store");
      // The same events read from the store (the room's frames forgotten): byte for byte the same.
      f.server.svc.frames.forget(room);
      const fresh = await openSse(`${f.url}/api/rooms/${room}/events?since=0`);
      await fresh.waitFor(4);
      assert.ok(counter.events >= 4, "the fresh stream read the room's events from the store");
      assert.deepEqual(fresh.events, live.events);
      assert.deepEqual(JSON.parse(live.events[2]!.data).message.reply_to, first.body.id);
      await fresh.close();
    } finally {
      counter.restore();
      await live.close();
    }
  });

  test("a commit whose frames cannot be made here does not fail: the room is forgotten and its stream reads the events back", async () => {
    const room = (await f.api.room()).uuid;
    const live = await openSse(`${f.url}/api/rooms/${room}/events`);
    let counter: ReturnType<typeof countReads> | undefined;
    try {
      await live.waitFor(1);
      assert.equal((await f.api.say(room, "ann", "first")).status, 201);
      await live.waitFor(2);
      // A row the frame cannot be made of (its payload is not JSON), as a commit would hand it on.
      const bad = { room, seq: 99, ts: new Date().toISOString(), type: "message.posted", actor: "ann", payload: "{not json", server: "{}", prev: "", sig: null, leafHash: "", checkpoint: "" };
      assert.doesNotThrow(() => f.server.svc.frames.committed(new Map([[room, { rows: [bad] }]])));
      // The room's frames forgotten, the stream goes on from the store: the next post is read
      // back, and arrives with nothing missing or doubled.
      counter = countReads(f, room);
      assert.equal((await f.api.say(room, "ben", "second")).status, 201);
      await live.waitFor(3);
      assert.deepEqual(ids(live.events), [1, 2, 3]);
      assert.ok(counter.events >= 1, "the stream read the post back from the store");
    } finally {
      counter?.restore();
      await live.close();
    }
  });

  test("long-polls woken by one post share its page: from the commit, or one message read per cursor when it is not here; the next post is read afresh", async () => {
    const room = (await f.api.room()).uuid;
    await f.api.say(room, "ann", "before");
    const head = (await f.api.get(`/api/rooms/${room}/messages?tail=1`)).body.next_since as number;
    const store = f.server.svc.store;
    const listMessages = store.listMessages;
    const reads: number[] = [];
    store.listMessages = (id, since, limit) => {
      if (id === room) reads.push(since);
      return listMessages(id, since, limit);
    };
    const poll = (since: number) => f.api.get(`/api/rooms/${room}/messages?since=${since}&wait=20`);
    const lastCommits = f.server.svc.lastCommits;
    const after = lastCommits.after;
    try {
      for (const round of [1, 2, 3]) {
        // Round 2: the commit is not kept here (as when another instance's commit moved the head).
        lastCommits.after = round === 2 ? () => undefined : after;
        const cursor = round === 1 ? head : (await f.api.get(`/api/rooms/${room}/messages?tail=1`)).body.next_since;
        const waiting = f.server.svc.notifier.streamCount;
        const atHead = Array.from({ length: 20 }, () => poll(cursor));
        await waitUntil("the twenty long-polls waiting", () => f.server.svc.notifier.streamCount >= waiting + 20);
        reads.length = 0;
        assert.equal((await f.api.say(room, "ben", `wake ${round}`)).status, 201);
        const answers = await Promise.all(atHead);
        for (const a of answers) {
          assert.equal(a.status, 200);
          assert.deepEqual(a.body.messages.map((m: { text: string }) => m.text), [`wake ${round}`]);
          assert.equal(a.body.next_since, answers[0]!.body.next_since);
          assert.ok(a.body.next_since > cursor);
        }
        assert.deepEqual(reads, round === 2 ? [cursor] : [], `round ${round}: ${round === 2 ? "one read" : "no read"} of the page for twenty woken long-polls`);
      }
    } finally {
      lastCommits.after = after;
      store.listMessages = listMessages;
    }
  });

  test("a stream that joins while others are live, from an old cursor, catches up and then follows", async () => {
    const room = (await f.api.room()).uuid;
    const live = await openSse(`${f.url}/api/rooms/${room}/events`);
    for (let i = 0; i < 30; i++) await postMessage(f.server.svc, caller(f), room, { agent_id: "ann", text: `early ${i}` });
    await live.waitFor(31);
    const late = await openSse(`${f.url}/api/rooms/${room}/events?since=3`);
    const posting = (async () => {
      for (let i = 0; i < 20; i++) await f.api.say(room, "ben", `while joining ${i}`);
    })();
    await posting;
    await live.waitFor(51);
    await late.waitFor(48);
    assert.deepEqual(ids(live.events), upTo(51));
    assert.deepEqual(ids(late.events), upTo(51).slice(3));
    await Promise.all([live.close(), late.close()]);
  });

  test("a client that stops reading falls behind the others and, reading again, gets every event once, in order", { timeout: 60_000 }, async () => {
    const room = (await f.api.room()).uuid;
    const live = await openSse(`${f.url}/api/rooms/${room}/events`);
    await live.waitFor(1);
    const socket = net.connect(f.server.port, "127.0.0.1");
    let raw = "";
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => (raw += d));
    socket.write(`GET /api/rooms/${room}/events HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    await waitUntil("the paused stream's first frame", () => raw.includes("event: room.created"));
    socket.pause(); // reads nothing more: its socket's buffers fill and the server stops writing to it
    const dropped = f.server.stalls.dropped;
    // About 12 MB of frames: more than the loopback socket buffers hold.
    const text = "€".repeat(20_000);
    const n = 200;
    for (let i = 0; i < n; i++) await postMessage(f.server.svc, caller(f), room, { agent_id: `agent-${i % 3}`, text: `${i} ${text}` });
    await live.waitFor(n + 1, 30_000);
    assert.deepEqual(ids(live.events), upTo(n + 1), "the reading stream was not held back");
    const last = `id: ${n + 1}\n`;
    assert.ok(!raw.includes(last), "the paused client has not received the last frame yet");
    socket.resume();
    await waitUntil("the paused client catching up", () => raw.includes(last), 30_000);
    await f.api.say(room, "ann", "after the catch-up");
    await waitUntil("the next post reaching the caught-up client", () => raw.includes(`id: ${n + 2}\n`), 10_000);
    socket.destroy();
    const events = eventsOfRaw(raw);
    assert.deepEqual(ids(events), upTo(n + 2), "every event once, in order");
    assert.equal(JSON.parse(events[n]!.data).payload.text, `${n - 1} ${text}`);
    assert.equal(f.server.stalls.dropped, dropped, "a client that reads again is not dropped");
    await live.close();
  });

  test("each stream keeps its own filter: mentioning= and unfiltered streams of one room", async () => {
    const room = (await f.api.room()).uuid;
    const all = await openSse(`${f.url}/api/rooms/${room}/events`);
    const bob = await openSse(`${f.url}/api/rooms/${room}/events?mentioning=bob`);
    await all.waitFor(1);
    await f.api.say(room, "ann", "hello everyone");
    const mention = (await f.api.say(room, "ann", "@bob your turn")).body.id as number;
    await f.api.say(room, "bob", "@bob talking to myself");
    const sentinel = (await f.api.say(room, "ann", "and @bob again")).body.id as number;
    await all.waitFor(5);
    await waitUntil("the last mention reaching bob's stream", () => bob.events.some((e) => Number(e.id) === sentinel));
    assert.deepEqual(ids(all.events), upTo(5));
    assert.deepEqual(ids(bob.events), [mention, sentinel]);
    await Promise.all([all.close(), bob.close()]);
  });

  test("the ReadableStream form (no Node response) follows the room the same way", async () => {
    const room = (await f.api.room()).uuid;
    const live = await openSse(`${f.url}/api/rooms/${room}/events`);
    await f.api.say(room, "ann", "one");
    const abort = new AbortController();
    const reader = roomEventStream(f.server.svc, room, 1, abort.signal).getReader();
    const decoder = new TextDecoder();
    let text = "";
    await f.api.say(room, "ann", "two");
    while (!text.includes("id: 3\n")) text += decoder.decode((await reader.read()).value, { stream: true });
    abort.abort();
    assert.deepEqual([...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])), [2, 3]);
    await live.waitFor(3);
    await live.close();
  });
});
