import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startApi, type TestApi } from "../helpers/server";
import { openSse } from "../helpers/sse";
import { waitUntil } from "../helpers/wait";

let f: TestApi;
before(async () => (f = await startApi()));
after(() => f.close());

test("the stream sends every event with id, type and data, and the right headers", async () => {
  const room = await f.api.room({ description: "sse" });
  await f.api.say(room.uuid, "a", "before");
  const sse = await openSse(`${f.url}/api/rooms/${room.uuid}/events`);
  assert.equal(sse.res.status, 200);
  assert.match(sse.res.headers.get("content-type")!, /^text\/event-stream/);
  assert.equal(sse.res.headers.get("cache-control"), "no-cache, no-transform");
  assert.equal(sse.res.headers.get("x-accel-buffering"), "no");
  assert.equal(sse.res.headers.get("content-encoding"), null);
  await sse.waitFor(2);
  await f.api.say(room.uuid, "b", "after");
  const events = await sse.waitFor(3);
  assert.deepEqual(events.map((e) => [e.id, e.event]), [["1", "room.created"], ["2", "message.posted"], ["3", "message.posted"]]);
  const data = JSON.parse(events[2]!.data);
  assert.equal(data.seq, 3);
  assert.equal(data.actor, "b");
  assert.deepEqual(data.payload, { text: "after" });
  assert.equal(data.message.text, "after");
  assert.equal(data.prev, JSON.parse(events[1]!.data).hash, "prev links to the previous event's leaf hash");
  await sse.close();
});

test("DEL, C1 controls and line separators in agent text go out escaped, never raw, and decode to the same text", async () => {
  const room = await f.api.room();
  const text = "bell\u007f, next line\u0085, separator\u2028, paragraph\u2029 end";
  assert.equal((await f.api.say(room.uuid, "a", text)).status, 201);
  const controller = new AbortController();
  const res = await fetch(`${f.url}/api/rooms/${room.uuid}/events`, { signal: controller.signal });
  const reader = res.body!.getReader();
  let raw = "";
  const decoder = new TextDecoder();
  while (!raw.includes("event: message.posted")) raw += decoder.decode((await reader.read()).value, { stream: true });
  while (!/event: message\.posted\ndata: [^\n]*\n\n/.test(raw)) raw += decoder.decode((await reader.read()).value, { stream: true });
  controller.abort();
  assert.doesNotMatch(raw, /[\u007f-\u009f\u2028\u2029]/, "no raw control or separator on the wire");
  const data = /event: message\.posted\ndata: ([^\n]*)\n\n/.exec(raw)![1]!;
  assert.equal(JSON.parse(data).message.text, text, "the same text once parsed");
});

test("resuming with Last-Event-ID after a forced disconnect loses and duplicates nothing", async () => {
  const room = await f.api.room();
  const first = await openSse(`${f.url}/api/rooms/${room.uuid}/events`);
  for (let i = 0; i < 5; i++) await f.api.say(room.uuid, "a", `m${i}`);
  await first.waitFor(6);
  await first.close(); // the client drops the connection
  const lastId = first.events.at(-1)!.id!;
  for (let i = 5; i < 10; i++) await f.api.say(room.uuid, "a", `m${i}`); // said while disconnected
  const second = await openSse(`${f.url}/api/rooms/${room.uuid}/events`, { "last-event-id": lastId });
  for (let i = 10; i < 12; i++) await f.api.say(room.uuid, "a", `m${i}`);
  await second.waitFor(7);
  // A sentinel: once the next event has arrived, any duplicate sent before it has arrived too.
  await f.api.say(room.uuid, "a", "sentinel");
  await waitUntil("the sentinel (seq 14) reaching the resumed stream", () => second.events.some((e) => e.id === "14"));
  const seqs = [...first.events, ...second.events].map((e) => Number(e.id));
  assert.deepEqual(seqs, Array.from({ length: 14 }, (_, i) => i + 1), "every seq exactly once, in order");
  await second.close();
});

test("?since= resumes too, and a bad Last-Event-ID is a 400", async () => {
  const room = await f.api.room();
  await f.api.say(room.uuid, "a", "one");
  await f.api.say(room.uuid, "a", "two");
  const sse = await openSse(`${f.url}/api/rooms/${room.uuid}/events?since=2`);
  const events = await sse.waitFor(1);
  assert.equal(events[0]!.id, "3");
  await sse.close();
  const bad = await fetch(`${f.url}/api/rooms/${room.uuid}/events`, { headers: { "last-event-id": "abc" } });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).code, "validation_error");
});

test("streams are cleaned up when the client goes away", async () => {
  const room = await f.api.room();
  const streams = await Promise.all([1, 2, 3].map(() => openSse(`${f.url}/api/rooms/${room.uuid}/events`)));
  await Promise.all(streams.map((s) => s.waitFor(1)));
  assert.equal(f.server.svc.notifier.streamCount, 3);
  await Promise.all(streams.map((s) => s.close()));
  await waitUntil("the server dropping the three closed streams", () => f.server.svc.notifier.streamCount === 0);
});

test("unknown room is 404, malformed 400", async () => {
  const unknown = await fetch(`${f.url}/api/rooms/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23/events`);
  assert.equal(unknown.status, 404);
  assert.equal((await unknown.json()).code, "room_not_found");
  const malformed = await fetch(`${f.url}/api/rooms/xyz/events`);
  assert.equal(malformed.status, 400);
  assert.equal((await malformed.json()).code, "invalid_uuid");
});

test("pings keep idle streams alive", async () => {
  const { roomEventStream } = await import("../../lib/realtime/sse");
  const room = await f.api.room();
  const abort = new AbortController();
  const reader = roomEventStream(f.server.svc, room.uuid, 1, abort.signal, 30).getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes(": ping")) text += decoder.decode((await reader.read()).value);
  abort.abort();
  assert.match(text, /: ping\n\n/);
});

// The timeout is half the long-poll's wait: a poll the delete did not wake fails the test.
test("deleting a room ends its streams and its waiting long-polls at once", { timeout: 15_000 }, async () => {
  const room = await f.api.room();
  const sse = await openSse(`${f.url}/api/rooms/${room.uuid}/events`);
  await sse.waitFor(1);
  const idle = f.server.svc.notifier.streamCount;
  const poll = f.api.get(`/api/rooms/${room.uuid}/messages?since=1&wait=30`);
  await waitUntil("the long-poll being parked", () => f.server.svc.notifier.streamCount > idle);
  assert.equal((await f.api.del(`/api/rooms/${room.uuid}`, { authorization: `Bearer ${room.owner_token}` })).status, 200);
  const polled = await poll;
  assert.equal(polled.status, 200, JSON.stringify(polled.body));
  assert.deepEqual(polled.body, { messages: [], has_more: false, next_since: 1 }, "the parked poll ends with an empty page");
  await waitUntil("the server ending the stream before the client leaves", () => f.server.svc.notifier.streamCount === 0);
  await sse.close();
});
