import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { startApi, type TestApi } from "../helpers/server";
import { rawSql } from "../helpers/db";
import { testAgent } from "../helpers/agent";

let f: TestApi;
before(async () => (f = await startApi({ PARLEY_ADMIN_TOKEN: "admin-token-for-tests-0123456789" })));
after(() => f.close());

describe("POST /api/rooms", () => {
  test("creates a room with defaults and an owner token shown once", async () => {
    const r = await f.api.post("/api/rooms", {});
    assert.equal(r.status, 201);
    assert.match(r.body.uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(r.body.url, `${f.url}/${r.body.uuid}`);
    assert.equal(r.body.description, "");
    assert.equal(r.body.is_public, false);
    assert.equal(r.body.protocol_mode, "standard");
    assert.equal(r.body.mode, "open");
    assert.match(r.body.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(Date.parse(r.body.expires_at) - Date.parse(r.body.created_at), 72 * 3600 * 1000);
    assert.ok(r.body.owner_token.length >= 24);
    const info = await f.api.get(`/api/rooms/${r.body.uuid}`);
    assert.equal(info.body.owner_token, undefined, "the owner token is never shown again");
    assert.equal(info.body.head.size, 1, "room.created is event 1");
  });

  test("trims the description and accepts exactly 500 characters", async () => {
    const ok = await f.api.post("/api/rooms", { description: `  ${"d".repeat(500)}  ` });
    assert.equal(ok.status, 201);
    assert.equal(ok.body.description, "d".repeat(500));
    const tooLong = await f.api.post("/api/rooms", { description: "d".repeat(501) });
    assert.equal(tooLong.status, 400);
    assert.equal(tooLong.body.code, "validation_error");
    assert.match(tooLong.body.detail, /^description: /);
  });

  test("rejects wrong types with the field named", async () => {
    for (const [body, field] of [
      [{ description: 5 }, "description"],
      [{ is_public: "yes" }, "is_public"],
      [{ protocol_mode: "gold" }, "protocol_mode"],
      [{ mode: "chaos" }, "mode"],
    ] as const) {
      const r = await f.api.post("/api/rooms", body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, "validation_error");
      assert.ok(r.body.detail.startsWith(`${field}: `), r.body.detail);
    }
  });

  test("a premium room without an arbiter configured is 503 arbiter_unavailable", async () => {
    const r = await f.api.post("/api/rooms", { protocol_mode: "premium" });
    assert.equal(r.status, 503);
    assert.equal(r.body.code, "arbiter_unavailable");
  });

  test("malformed JSON is 400 invalid_json and a non-object body is a validation error", async () => {
    const bad = await f.api.post("/api/rooms", "{not json");
    assert.equal(bad.status, 400);
    assert.equal(bad.body.code, "invalid_json");
    const arr = await f.api.post("/api/rooms", "[1,2]");
    assert.equal(arr.status, 400);
    assert.equal(arr.body.code, "validation_error");
  });

  test("bodies over 64 KiB are 413 payload_too_large; 64 KiB exactly is read", async () => {
    const pad = (n: number) => JSON.stringify({ description: "x", pad: "p".repeat(n) });
    const base = pad(0).length;
    const exact = await f.api.post("/api/rooms", pad(64 * 1024 - base));
    assert.equal(exact.status, 201);
    const over = await f.api.post("/api/rooms", pad(64 * 1024 - base + 1));
    assert.equal(over.status, 413);
    assert.equal(over.body.code, "payload_too_large");
  });
});

describe("GET /api/rooms/{id}", () => {
  test("accepts an upper-case id and normalises it", async () => {
    const room = await f.api.room({ description: "case" });
    const r = await f.api.get(`/api/rooms/${room.uuid.toUpperCase()}`);
    assert.equal(r.status, 200);
    assert.equal(r.body.uuid, room.uuid);
  });

  test("a malformed id is 400 invalid_uuid; an unknown one is 404 room_not_found", async () => {
    const bad = await f.api.get("/api/rooms/not-a-uuid");
    assert.equal(bad.status, 400);
    assert.equal(bad.body.code, "invalid_uuid");
    const unknown = await f.api.get("/api/rooms/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23");
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.code, "room_not_found");
    assert.equal(typeof unknown.body.detail, "string");
  });

  test("reports counts, status and the log head", async () => {
    const room = await f.api.room({ description: "counts" });
    await f.api.say(room.uuid, "ann", "one");
    await f.api.say(room.uuid, "bob", "two");
    await f.api.say(room.uuid, "ann", "three");
    const r = await f.api.get(`/api/rooms/${room.uuid}`);
    assert.equal(r.body.message_count, 3);
    assert.equal(r.body.agent_count, 2);
    assert.equal(r.body.status, "open");
    assert.equal(r.body.arbiter_active, false);
    assert.equal(r.body.last_extraction_error, null);
    assert.equal(r.body.head.size, 4);
    assert.match(r.body.head.checkpoint, new RegExp(`^localhost/room/${room.uuid}\n4\n${r.body.head.root.replace(/[+/]/g, "\\$&")}\n\n— localhost `));
  });
});

describe("GET /api/rooms (public list)", () => {
  test("lists only public rooms, searches descriptions, sorts and pages", async () => {
    const tag = `zq${Date.now()}`;
    const a = await f.api.room({ description: `${tag} alpha`, is_public: true });
    const b = await f.api.room({ description: `${tag} beta`, is_public: true });
    await f.api.room({ description: `${tag} private`, is_public: false });
    await f.api.say(b.uuid, "x", "hi");
    await f.api.say(b.uuid, "y", "hi");
    await f.api.say(a.uuid, "x", "hi");

    const all = await f.api.get(`/api/rooms?q=${tag}`);
    assert.equal(all.status, 200);
    assert.equal(all.body.total, 2);
    assert.deepEqual(new Set(all.body.rooms.map((r: { uuid: string }) => r.uuid)), new Set([a.uuid, b.uuid]));

    const byMessages = await f.api.get(`/api/rooms?q=${tag}&sort=messages`);
    assert.deepEqual(byMessages.body.rooms.map((r: { uuid: string }) => r.uuid), [b.uuid, a.uuid]);
    const byAgents = await f.api.get(`/api/rooms?q=${tag}&sort=agents`);
    assert.equal(byAgents.body.rooms[0].agent_count, 2);
    const active = await f.api.get(`/api/rooms?q=${tag}&sort=active`);
    assert.equal(active.body.rooms[0].uuid, a.uuid, "a had the last activity");
    const newest = await f.api.get(`/api/rooms?q=${tag}&sort=new`);
    assert.equal(newest.body.rooms[0].uuid, b.uuid);

    const page2 = await f.api.get(`/api/rooms?q=${tag}&sort=new&limit=1&offset=1`);
    assert.equal(page2.body.rooms.length, 1);
    assert.equal(page2.body.rooms[0].uuid, a.uuid);
    assert.equal(page2.body.total, 2);
  });

  test("search treats % and _ literally", async () => {
    const r = await f.api.get("/api/rooms?q=%25%25%25");
    assert.equal(r.status, 200);
    assert.equal(r.body.total, 0);
  });

  test("limit below 1 is 400, above 200 is clamped; bad sort is 400", async () => {
    assert.equal((await f.api.get("/api/rooms?limit=0")).status, 400);
    assert.equal((await f.api.get("/api/rooms?limit=abc")).status, 400);
    const tag = `clamp${Date.now()}`;
    for (let i = 0; i < 201; i++) await f.api.room({ description: `${tag} ${i}`, is_public: true });
    const clamped = await f.api.get(`/api/rooms?q=${tag}&limit=201`);
    assert.equal(clamped.status, 200);
    assert.equal(clamped.body.total, 201);
    assert.equal(clamped.body.rooms.length, 200, "limit=201 gives 200 of the 201 matching rooms");
    assert.equal((await f.api.get("/api/rooms?offset=-1")).status, 400);
    const sort = await f.api.get("/api/rooms?sort=loudest");
    assert.equal(sort.status, 400);
    assert.match(sort.body.detail, /^sort: /);
  });
});

describe("owner actions", () => {
  test("close makes the room read-only (409 room_closed) and reopen restores it", async () => {
    const room = await f.api.room();
    const auth = { authorization: `Bearer ${room.owner_token}` };
    const closed = await f.api.post(`/api/rooms/${room.uuid}/close`, {}, auth);
    assert.equal(closed.status, 200);
    assert.equal(closed.body.status, "closed");
    assert.equal(closed.body.receipt.seq, 2);
    // The head it answers with is the one signed for its batch, the same as the receipt's and /checkpoint's.
    assert.match(closed.body.head.checkpoint, /\/room\/.*\n2\n/);
    assert.equal(closed.body.head.checkpoint, closed.body.receipt.checkpoint);
    assert.equal((await fetch(`${f.url}/api/rooms/${room.uuid}/checkpoint`).then((r) => r.text())), closed.body.head.checkpoint);
    const post = await f.api.say(room.uuid, "a", "hello?");
    assert.equal(post.status, 409);
    assert.equal(post.body.code, "room_closed");
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}/messages`)).status, 200, "reads still work");
    const again = await f.api.post(`/api/rooms/${room.uuid}/close`, {}, auth);
    assert.equal(again.body.receipt, null, "closing twice adds no event");
    const reopened = await f.api.post(`/api/rooms/${room.uuid}/reopen`, {}, auth);
    assert.equal(reopened.body.status, "open");
    assert.equal((await f.api.say(room.uuid, "a", "back")).status, 201);
  });

  test("close without or with a wrong token is 403 not_owner and changes nothing", async () => {
    const room = await f.api.room();
    const none = await f.api.post(`/api/rooms/${room.uuid}/close`);
    assert.equal(none.status, 403);
    assert.equal(none.body.code, "not_owner");
    const wrong = await f.api.post(`/api/rooms/${room.uuid}/close`, {}, { authorization: "Bearer nope" });
    assert.equal(wrong.status, 403);
    const info = await f.api.get(`/api/rooms/${room.uuid}`);
    assert.equal(info.body.status, "open");
    assert.equal(info.body.head.size, 1);
  });

  test("delete removes the room for the owner or the admin", async () => {
    const room = await f.api.room();
    assert.equal((await f.api.del(`/api/rooms/${room.uuid}`, { authorization: "Bearer wrong" })).status, 403);
    const gone = await f.api.del(`/api/rooms/${room.uuid}`, { authorization: `Bearer ${room.owner_token}` });
    assert.equal(gone.status, 200);
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).body.code, "room_not_found");
    assert.equal((await f.api.del(`/api/rooms/${room.uuid}`, { authorization: `Bearer ${room.owner_token}` })).body.code, "room_not_found");

    const other = await f.api.room();
    const admin = await f.api.del(`/api/rooms/${other.uuid}`, { authorization: "Bearer admin-token-for-tests-0123456789" });
    assert.equal(admin.status, 200);
    assert.equal((await f.api.get(`/api/rooms/${other.uuid}`)).body.code, "room_not_found", "the admin's delete removed it");
  });

  test("owner actions on an unknown room are 404", async () => {
    const r = await f.api.post("/api/rooms/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23/close", {}, { authorization: "Bearer x" });
    assert.equal(r.status, 404);
    assert.equal(r.body.code, "room_not_found");
  });

  test("deleting a room leaves none of its rows: its log, used nonces, turns and agents", async () => {
    const plain = await f.api.room();
    const sig = testAgent(crypto.randomBytes(32)).signMessage(plain.uuid, "dora", { text: "signed" });
    assert.equal((await f.api.say(plain.uuid, "dora", "signed", { sig })).status, 201);
    const turns = (await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["a", "b"] } })).body as { uuid: string; owner_token: string };
    const tables = ["events", "messages", "signature_nonces", "turns", "turn_rooms", "room_agents"];
    const rows = async (room: string) =>
      Promise.all(tables.map(async (t) => Number((await rawSql<{ n: number }>(f.server.svc, `SELECT count(*) AS n FROM ${t} WHERE room = ?`, [room]))[0]!.n)));
    const [a, b] = [await rows(plain.uuid), await rows(turns.uuid)];
    assert.deepEqual(tables.filter((_, i) => a[i]! + b[i]! === 0), [], "every table has rows of the two rooms");
    for (const room of [plain, turns]) assert.equal((await f.api.del(`/api/rooms/${room.uuid}`, { authorization: `Bearer ${room.owner_token}` })).status, 200);
    assert.deepEqual([...(await rows(plain.uuid)), ...(await rows(turns.uuid))], Array(2 * tables.length).fill(0));
  });
});

describe("a room's stored head", () => {
  test("a frontier stored as a JSON array (rows written before the hex text) is read, appended to and written back as hex; the room verifies", async () => {
    const { uuid } = await f.api.room();
    for (const text of ["one", "two", "three"]) assert.equal((await f.api.say(uuid, "a", text)).status, 201);
    const frontier = async () => (await rawSql<{ frontier: string }>(f.server.svc, "SELECT frontier FROM rooms WHERE uuid = ?", [uuid]))[0]!.frontier;
    const hex = await frontier();
    assert.match(hex, /^(?:[0-9a-f]{64})+$/, "the nodes' hex, 64 digits each");
    // As an older release wrote it (on PostgreSQL the next write's lock statement reads it back).
    await rawSql(f.server.svc, "UPDATE rooms SET frontier = ? WHERE uuid = ?", [JSON.stringify(hex.match(/.{64}/g)), uuid]);
    for (const text of ["four", "five"]) assert.equal((await f.api.say(uuid, "a", text)).status, 201);
    assert.match(await frontier(), /^(?:[0-9a-f]{64})+$/);
    const verified = await f.api.post(`/api/rooms/${uuid}/verify`, {});
    assert.equal(verified.body.verdict, "CLEAN", JSON.stringify(verified.body.failures));
    assert.equal((await f.api.get(`/api/rooms/${uuid}`)).body.head.size, 6);
  });
});
