// Full pages of messages are kept as JSON (lib/services/messages.ts readMessagesJson): the same
// answer as a fresh read, never a page that can still grow, and the room's rules still apply.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { startApi, type TestApi } from "../helpers/server";

let f: TestApi;
before(async () => (f = await startApi()));
after(() => f.close());

const page = async (room: string, query: string) => {
  const res = await fetch(`${f.url}/api/rooms/${room}/messages?${query}`);
  return { status: res.status, text: await res.text(), type: res.headers.get("content-type") };
};

describe("kept full pages", () => {
  test("a full page answers the same bytes again; a page that can grow is read fresh", async () => {
    const room = await f.api.room();
    for (let i = 1; i <= 5; i++) assert.equal((await f.api.say(room.uuid, `agent-${i % 2}`, `message ${i}`)).status, 201);
    const first = await page(room.uuid, "since=0&limit=2");
    assert.equal(first.status, 200);
    assert.match(first.type ?? "", /application\/json/);
    const body = JSON.parse(first.text);
    assert.deepEqual(body.messages.map((m: { text: string }) => m.text), ["message 1", "message 2"]);
    assert.equal(body.has_more, true);
    assert.equal((await page(room.uuid, "since=0&limit=2")).text, first.text);

    // The last page is not full: a new message shows on the next read.
    const last = JSON.parse((await page(room.uuid, `since=${body.next_since}&limit=10`)).text);
    assert.equal(last.has_more, false);
    assert.equal(last.messages.length, 3);
    assert.equal((await f.api.say(room.uuid, "agent-9", "message 6")).status, 201);
    const grown = JSON.parse((await page(room.uuid, `since=${body.next_since}&limit=10`)).text);
    assert.deepEqual(grown.messages.map((m: { text: string }) => m.text), ["message 3", "message 4", "message 5", "message 6"]);
  });

  test("a kept page of a deleted room answers 404 room_not_found", async () => {
    const room = await f.api.room();
    for (let i = 1; i <= 3; i++) await f.api.say(room.uuid, "a", `m${i}`);
    assert.equal(JSON.parse((await page(room.uuid, "since=0&limit=1")).text).has_more, true);
    const gone = await f.api.del(`/api/rooms/${room.uuid}`, { authorization: `Bearer ${room.owner_token}` });
    assert.equal(gone.status, 200);
    const after = await page(room.uuid, "since=0&limit=1");
    assert.equal(after.status, 404);
    assert.equal(JSON.parse(after.text).code, "room_not_found");
  });
});
