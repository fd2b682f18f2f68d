import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ManualClock, startApi, type TestApi } from "../helpers/server";
import { sweepExpiredRooms } from "../../lib/services/rooms";
import { waitUntil } from "../helpers/wait";

const HOUR = 3_600_000;
const clock = new ManualClock();
let f: TestApi;
before(async () => (f = await startApi({ PARLEY_ROOM_IDLE_TTL: "72h", PARLEY_ROOM_MAX_TTL: "30d" }, { clock })));
after(() => f.close());

async function expectExpiredEverywhere(uuid: string, token: string) {
  const auth = { authorization: `Bearer ${token}` };
  const responses = [
    await f.api.get(`/api/rooms/${uuid}`),
    await f.api.get(`/api/rooms/${uuid}/messages?since=0`),
    await f.api.say(uuid, "a", "anyone?"),
    await f.api.post(`/api/rooms/${uuid}/close`, {}, auth),
    await f.api.get(`/api/rooms/${uuid}/events`),
  ];
  for (const r of responses) {
    assert.equal(r.status, 410);
    assert.equal(r.body.code, "room_expired");
    assert.match(r.body.detail, /[Ss]top polling/);
  }
  const md = await fetch(`${f.url}/${uuid}?format=md`);
  assert.equal(md.status, 410);
}

test("a room expires after 72 h idle; activity pushes the expiry forward", async () => {
  const room = await f.api.room();
  clock.advance(71 * HOUR);
  assert.equal((await f.api.say(room.uuid, "a", "still here")).status, 201);
  clock.advance(71 * HOUR); // 142 h after creation, 71 h after the last message
  const info = await f.api.get(`/api/rooms/${room.uuid}`);
  assert.equal(info.status, 200);
  assert.equal(Date.parse(info.body.expires_at), Date.parse(info.body.last_activity_at) + 72 * HOUR);
  clock.advance(1 * HOUR + 1);
  await expectExpiredEverywhere(room.uuid, room.owner_token);
});

test("a busy room still ends 30 days after creation", async () => {
  const room = await f.api.room();
  const created = clock.now();
  for (let day = 1; day < 30; day++) {
    clock.advance(24 * HOUR);
    assert.equal((await f.api.say(room.uuid, "a", `day ${day}`)).status, 201);
  }
  const info = await f.api.get(`/api/rooms/${room.uuid}`);
  assert.equal(Date.parse(info.body.expires_at), created + 30 * 24 * HOUR);
  clock.advance(24 * HOUR);
  await expectExpiredEverywhere(room.uuid, room.owner_token);
});

test("the sweeper removes an expired room's data and its URL keeps answering 410", async () => {
  const room = await f.api.room({ is_public: true, description: "sweep me" });
  await f.api.say(room.uuid, "a", "bye");
  clock.advance(73 * HOUR);
  assert.ok(await sweepExpiredRooms(f.server.svc) >= 1);
  assert.deepEqual(await f.server.svc.store.listEvents(room.uuid, 0, 10), []);
  assert.deepEqual(await f.server.svc.store.listMessages(room.uuid, 0, 10), []);
  assert.equal((await f.server.svc.store.getRoom(room.uuid))!.description, "", "the tombstone keeps no content");
  await expectExpiredEverywhere(room.uuid, room.owner_token);
  const list = await f.api.get("/api/rooms?q=sweep");
  assert.equal(list.body.total, 0);
});

test("DELETE of an expired room answers 410, swept or not, and deletes nothing", async () => {
  const swept = await f.api.room();
  const unswept = await f.api.room();
  clock.advance(73 * HOUR);
  await sweepExpiredRooms(f.server.svc, 1); // one batch of one: at most one of the two is swept
  for (const room of [swept, unswept]) {
    const r = await f.api.del(`/api/rooms/${room.uuid}`, { authorization: `Bearer ${room.owner_token}` });
    assert.equal(r.status, 410);
    assert.equal(r.body.code, "room_expired");
  }
  await sweepExpiredRooms(f.server.svc);
  for (const room of [swept, unswept]) assert.equal((await f.server.svc.store.getRoom(room.uuid))?.status, "expired", "the tombstone stays");
});

test("any agent write keeps a room alive, not only messages: a board heartbeat pushes the expiry", async () => {
  const room = await f.api.room();
  for (let i = 0; i < 3; i++) {
    clock.advance(70 * HOUR);
    const hb = await f.api.post(`/api/rooms/${room.uuid}/agents`, { agent_id: "worker", capabilities: ["go"] });
    assert.equal(hb.status, 200, JSON.stringify(hb.body));
  }
  const info = await f.api.get(`/api/rooms/${room.uuid}`);
  assert.equal(info.status, 200, "210 h after creation, alive thanks to its heartbeats");
  assert.equal(Date.parse(info.body.expires_at), clock.now() + 72 * HOUR);
});

test("a stream on a room that expires in silence ends at the next ping", async () => {
  const { roomEventStream } = await import("../../lib/realtime/sse");
  const room = await f.api.room();
  const reader = roomEventStream(f.server.svc, room.uuid, 0, new AbortController().signal, 20).getReader();
  const first = await reader.read();
  assert.equal(first.done, false);
  clock.advance(73 * HOUR);
  await waitUntil("the stream closing itself", async () => (await reader.read()).done);
});
