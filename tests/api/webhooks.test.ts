// Webhooks and owner alerts (SPEC 12) against a real server and a real receiver on loopback
// (PARLEY_WEBHOOK_ALLOW_PRIVATE=1 lets deliveries reach it): signed deliveries, filters, honest
// delivery states through retries to dead and a disabled webhook, the outbox surviving SIGKILL,
// every endpoint's errors, and nothing of a webhook in the room's log.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import { startInstance } from "../helpers/cluster";
import { rawSql } from "../helpers/db";
import { testDatabase } from "../helpers/pg";
import { ManualClock, NO_LIMITS, startApi, tempDir, TEST_BACKEND, type TestApi } from "../helpers/server";
import { waitUntil } from "../helpers/wait";
import { expectedSignature, startReceiver, type Receiver } from "../helpers/webhook-receiver";
import { sweepNearExpiry } from "../../lib/webhooks/worker";

const WEBHOOK_ENV = {
  PARLEY_WEBHOOK_ALLOW_PRIVATE: "1",
  PARLEY_WEBHOOK_INTERVAL: "50ms",
  PARLEY_WEBHOOK_RETRY_BASE: "20ms",
  PARLEY_WEBHOOK_MAX_ATTEMPTS: "3",
  PARLEY_WEBHOOK_DISABLE_AFTER: "2",
  PARLEY_RATE_WEBHOOKS_PER_HOUR: "0",
  PARLEY_ROOM_MESSAGE_CAP: "10",
};

let f: TestApi;
let rx: Receiver;
before(async () => {
  rx = await startReceiver();
  f = await startApi(WEBHOOK_ENV);
});
after(async () => {
  await f.close();
  await rx.close();
});

const hooks = (room: string) => `/api/rooms/${room}/webhooks`;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Registers a webhook for `path` on the receiver; asserts 201 and returns the answer (with the secret). */
async function register(room: string, path: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const r = await f.api.post(hooks(room), { url: `${rx.url}${path}`, ...extra }, headers);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body as { id: string; url: string; events: string[] | null; format: string; kind: string; secret: string };
}
const webhook = async (room: string, id: string, secret: string) => {
  const r = await f.api.get(`${hooks(room)}/${id}`, bearer(secret));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
};
const arrived = (path: string, n: number) => waitUntil(`${n} deliveries at ${path}`, () => rx.at(path).length >= n, 10_000);
/** Lets the worker run a few more times, so that a delivery that should not come would have. */
async function settle(room: string, id: string, secret: string): Promise<void> {
  await waitUntil("no delivery pending", async () => {
    const w = await webhook(room, id, secret);
    return w.counts.pending === 0 && w.counts.retrying === 0;
  }, 10_000);
  await new Promise((resolve) => setTimeout(resolve, 200));
}

describe("deliveries", () => {
  test("an event is POSTed as {room, url, event}, signed with HMAC-SHA256 of the exact body under the secret", async () => {
    const room = await f.api.room({ description: "release date" });
    const w = await register(room.uuid, "/signed");
    assert.match(w.id, UUID);
    assert.match(w.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
    assert.deepEqual([w.kind, w.format, w.events, w.url], ["events", "json", null, `${rx.url}/signed`]);
    const posted = await f.api.say(room.uuid, "alice", "Friday works for me.");
    await arrived("/signed", 1);
    const [d] = rx.at("/signed");
    assert.equal(d!.headers["x-parley-signature"], expectedSignature(w.secret, d!.raw), "the receiver can check the signature with node:crypto");
    assert.equal(d!.headers["x-parley-event"], "message.posted");
    assert.match(String(d!.headers["x-parley-delivery"]), UUID);
    assert.match(String(d!.headers["x-parley-timestamp"]), /^\d{10}$/);
    assert.equal(d!.headers["content-type"], "application/json");
    assert.equal(d!.body.room, room.uuid);
    assert.equal(d!.body.url, room.url);
    assert.equal(d!.body.event.type, "message.posted");
    assert.equal(d!.body.event.seq, posted.body.id);
    assert.equal(d!.body.event.hash, posted.body.receipt.leaf_hash, "the event as the SSE stream gives it, with its leaf hash");
    assert.equal(d!.body.event.message.text, "Friday works for me.");

    // The receiver has the body before the worker records the answer: wait for that record.
    let view = await webhook(room.uuid, w.id, w.secret);
    await waitUntil("the delivery recorded as delivered", async () => (view = await webhook(room.uuid, w.id, w.secret)).deliveries[0]?.status === "delivered");
    assert.equal(view.status, "active");
    assert.deepEqual(view.counts, { pending: 0, retrying: 0, delivered: 1, dead: 0 });
    assert.equal(view.deliveries[0].id, d!.headers["x-parley-delivery"]);
    assert.deepEqual(
      [view.deliveries[0].status, view.deliveries[0].attempts, view.deliveries[0].last_status, view.deliveries[0].event, view.deliveries[0].seq, view.deliveries[0].next_attempt_at],
      ["delivered", 1, 200, "message.posted", posted.body.id, null],
    );
    assert.equal("secret" in view, false, "the secret is shown once, at registration");
  });

  test("events filters by type and family; mentioning keeps only the messages that @-mention the agent (by its key)", async () => {
    const room = await f.api.room();
    await register(room.uuid, "/tasks-only", { events: ["task.*"] });
    const m = await register(room.uuid, "/mentions", { mentioning: "Bob" });
    const created = await f.api.post(`/api/rooms/${room.uuid}/tasks`, { agent_id: "boss", title: "Write the parser" });
    assert.equal(created.status, 201);
    for (const text of ["hi @bob!", "hi bob", "@bobby there", "mail me at alice@bob", "(@BOB) again", "nobody"]) {
      assert.equal((await f.api.say(room.uuid, "alice", text)).status, 201);
    }
    await arrived("/tasks-only", 1);
    await settle(room.uuid, m.id, m.secret);
    assert.deepEqual(rx.at("/tasks-only").map((d) => d.body.event.type), ["task.created"]);
    // A worker's claimed deliveries are attempted side by side (no order is promised): in log order.
    const mentions = rx.at("/mentions").map((d) => d.body.event).sort((a, b) => a.seq - b.seq);
    assert.deepEqual(mentions.map((e) => e.message.text), ["hi @bob!", "(@BOB) again"]);
  });

  test('format "slack" sends {text}: a one-line summary and a link to the room', async () => {
    const room = await f.api.room({ description: "Budget <2027> & more" });
    const w = await register(room.uuid, "/slack", { format: "slack" });
    await f.api.say(room.uuid, "carol", "We agree on\n€40k.");
    await arrived("/slack", 1);
    const [d] = rx.at("/slack");
    assert.deepEqual(Object.keys(d!.body), ["text"]);
    assert.equal(d!.body.text, `carol: We agree on €40k. — <${room.url}|Budget &lt;2027&gt; &amp; more>`);
    assert.equal(d!.headers["x-parley-signature"], expectedSignature(w.secret, d!.raw));
  });
});

describe("delivery states", () => {
  test("a 500 is retried (same delivery id, body and signature) and the state says retrying until it is delivered", async () => {
    const room = await f.api.room();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    rx.on("/flaky", async (_req, n) => {
      if (n === 1) return 500;
      await gate; // the second attempt waits while the test reads the state
      return 200;
    });
    const w = await register(room.uuid, "/flaky");
    await f.api.say(room.uuid, "a", "retry me");
    await arrived("/flaky", 2);
    const during = (await webhook(room.uuid, w.id, w.secret)).deliveries[0];
    assert.deepEqual([during.status, during.attempts, during.last_status], ["retrying", 1, 500]);
    assert.match(during.last_error, /answered 500/);
    assert.ok(Date.parse(during.next_attempt_at) > 0, "the next attempt's time is shown");
    release();
    await waitUntil("delivered", async () => (await webhook(room.uuid, w.id, w.secret)).deliveries[0].status === "delivered", 10_000);
    const done = (await webhook(room.uuid, w.id, w.secret)).deliveries[0];
    assert.deepEqual([done.attempts, done.last_status, done.last_error, done.next_attempt_at], [2, 200, null, null]);
    const [first, second] = rx.at("/flaky");
    assert.equal(first!.headers["x-parley-delivery"], second!.headers["x-parley-delivery"]);
    assert.equal(first!.raw, second!.raw);
    assert.equal(first!.headers["x-parley-signature"], second!.headers["x-parley-signature"]);
    assert.deepEqual([first!.headers["x-parley-attempt"], second!.headers["x-parley-attempt"]], ["1", "2"]);
  });

  test("dead after the last attempt; after 2 dead in a row the webhook is disabled, says why, gets nothing more, and the owner is alerted", async () => {
    const room = await f.api.room();
    rx.on("/down", 503);
    const w = await register(room.uuid, "/down");
    const alerts = await register(room.uuid, "/owner-alerts", { kind: "alerts" }, bearer(room.owner_token));
    await f.api.say(room.uuid, "a", "one");
    await arrived("/down", 3);
    await waitUntil("dead", async () => (await webhook(room.uuid, w.id, w.secret)).counts.dead === 1, 10_000);
    let view = await webhook(room.uuid, w.id, w.secret);
    assert.deepEqual([view.deliveries[0].status, view.deliveries[0].attempts, view.deliveries[0].last_status], ["dead", 3, 503]);
    assert.deepEqual([view.status, view.consecutive_dead], ["active", 1]);
    assert.equal(rx.at("/down").length, 3, "exactly PARLEY_WEBHOOK_MAX_ATTEMPTS attempts");

    await f.api.say(room.uuid, "a", "two");
    await waitUntil("disabled", async () => (await webhook(room.uuid, w.id, w.secret)).status === "disabled", 10_000);
    view = await webhook(room.uuid, w.id, w.secret);
    assert.equal(view.consecutive_dead, 2);
    assert.match(view.disabled_reason, /Disabled after 2 dead deliveries in a row; the last: The receiver answered 503/);
    assert.ok(view.disabled_at);
    assert.equal(rx.at("/down").length, 6);

    await f.api.say(room.uuid, "a", "three");
    await arrived("/owner-alerts", 1);
    const alert = rx.at("/owner-alerts").find((d) => d.headers["x-parley-event"] === "alert.webhook_disabled");
    assert.ok(alert, "the owner heard of it");
    assert.equal(alert.body.alert.detail.webhook_id, w.id);
    assert.equal(alert.headers["x-parley-signature"], expectedSignature(alerts.secret, alert.raw));
    await settle(room.uuid, alerts.id, alerts.secret);
    view = await webhook(room.uuid, w.id, w.secret);
    assert.equal(view.counts.dead + view.counts.delivered + view.counts.pending + view.counts.retrying, 2, "a disabled webhook gets no new deliveries");
    assert.equal(rx.at("/down").length, 6);
  });
});

describe("errors", () => {
  test("registration: bad fields, limits ±1, the 11th webhook, a duplicate, unknown rooms", async () => {
    const room = await f.api.room();
    const post = (body: unknown, headers?: Record<string, string>) => f.api.post(hooks(room.uuid), body, headers);
    const expect = async (body: unknown, status: number, code: string, detail?: RegExp) => {
      const r = await post(body);
      assert.equal(r.status, status, JSON.stringify({ body, answer: r.body }));
      assert.equal(r.body.code, code);
      if (detail) assert.match(r.body.detail, detail);
    };
    await expect({}, 400, "validation_error", /^url: /);
    await expect({ url: 42 }, 400, "validation_error", /^url: /);
    await expect({ url: "" }, 400, "validation_error", /^url: /);
    await expect({ url: "not a url" }, 400, "validation_error", /absolute http\(s\) URL/);
    await expect({ url: "ftp://example.com/x" }, 400, "webhook_url_forbidden", /only http and https/);
    await expect({ url: "https://user:pw@example.com/" }, 400, "webhook_url_forbidden", /user name or password/);
    const long = (n: number) => `${rx.url}/${"a".repeat(n - rx.url.length - 1)}`;
    await expect({ url: long(2049) }, 400, "validation_error", /at most 2048/);
    await expect({ url: rx.url, events: [] }, 400, "validation_error", /^events: /);
    await expect({ url: rx.url, events: "message.posted" }, 400, "validation_error", /^events: /);
    await expect({ url: rx.url, events: ["message.sent"] }, 400, "validation_error", /^events\.0: "message\.sent" is not an event type/);
    await expect({ url: rx.url, events: ["nothing.*"] }, 400, "validation_error", /^events\.0: /);
    await expect({ url: rx.url, events: Array(51).fill("message.posted") }, 400, "validation_error", /at most 50/);
    await expect({ url: rx.url, format: "xml" }, 400, "validation_error", /^format: /);
    await expect({ url: rx.url, kind: "everything" }, 400, "validation_error", /^kind: /);
    await expect({ url: rx.url, mentioning: "" }, 400, "validation_error", /^mentioning: /);
    await expect({ url: rx.url, mentioning: "server" }, 400, "validation_error", /^mentioning: /);
    await expect({ url: rx.url, kind: "alerts", events: ["message.posted"] }, 400, "validation_error", /^events: is for kind "events"/);
    await expect({ url: rx.url, kind: "alerts" }, 403, "not_owner");
    const wrongOwner = await post({ url: rx.url, kind: "alerts" }, bearer("not-the-owner-token"));
    assert.deepEqual([wrongOwner.status, wrongOwner.body.code], [403, "not_owner"]);

    // At the limits: 2048 characters and 50 event types are accepted (2 of the 10).
    assert.equal((await post({ url: long(2048) })).status, 201);
    const fifty = await post({ url: rx.url, events: Array(50).fill("message.posted") });
    assert.equal(fifty.status, 201);
    assert.deepEqual(fifty.body.events, ["message.posted"], "repeats are kept once");
    await expect({ url: rx.url, events: ["message.posted"] }, 409, "webhook_exists", /already has a webhook with this URL/);
    assert.equal((await post({ url: `${rx.url}/m`, mentioning: "Bob" })).status, 201);
    await expect({ url: `${rx.url}/m`, mentioning: "BOB " }, 409, "webhook_exists"); // the same agent by its key
    for (let i = 4; i <= 10; i++) assert.equal((await post({ url: `${rx.url}/n${i}` })).status, 201, `webhook ${i}`);
    await expect({ url: `${rx.url}/n11` }, 409, "too_many_webhooks", /already has 10 webhooks/);
    const listed = await f.api.get(hooks(room.uuid), bearer(room.owner_token));
    assert.equal(listed.body.webhooks.length, 10);

    const unknown = await f.api.post(hooks(crypto.randomUUID()), { url: rx.url });
    assert.deepEqual([unknown.status, unknown.body.code], [404, "room_not_found"]);
    const invalid = await f.api.post(hooks("not-a-room"), { url: rx.url });
    assert.deepEqual([invalid.status, invalid.body.code], [400, "invalid_uuid"]);
    const badJson = await f.api.post(hooks(room.uuid), "{url:");
    assert.deepEqual([badJson.status, badJson.body.code], [400, "invalid_json"]);
  });

  test("reading, listing and deleting: the secret or the owner token, nothing else", async () => {
    const room = await f.api.room();
    const other = await f.api.room();
    const a = await register(room.uuid, "/ra");
    const b = await register(room.uuid, "/rb");
    const elsewhere = await register(other.uuid, "/rc");
    const get = (id: string, headers?: Record<string, string>) => f.api.get(`${hooks(room.uuid)}/${id}`, headers);
    const del = (id: string, headers?: Record<string, string>) => f.api.del(`${hooks(room.uuid)}/${id}`, headers);
    for (const [r, status, code] of [
      [await get(a.id), 403, "forbidden"],
      [await get(a.id, bearer("whsec_wrong")), 403, "forbidden"],
      [await get(a.id, bearer(b.secret)), 403, "forbidden"],
      [await get(a.id, bearer(other.owner_token)), 403, "forbidden"],
      [await get(crypto.randomUUID(), bearer(room.owner_token)), 404, "webhook_not_found"],
      [await get("1", bearer(room.owner_token)), 404, "webhook_not_found"],
      [await get(elsewhere.id, bearer(elsewhere.secret)), 404, "webhook_not_found"],
      [await f.api.get(`${hooks(crypto.randomUUID())}/${a.id}`, bearer(a.secret)), 404, "room_not_found"],
      [await f.api.get(hooks(room.uuid)), 403, "not_owner"],
      [await f.api.get(hooks(room.uuid), bearer(a.secret)), 403, "not_owner"],
      [await del(a.id, bearer(b.secret)), 403, "forbidden"],
      [await del(crypto.randomUUID(), bearer(room.owner_token)), 404, "webhook_not_found"],
    ] as const) {
      assert.equal(r.status, status, JSON.stringify(r.body));
      assert.equal(r.body.code, code);
    }
    assert.equal((await get(a.id, bearer(a.secret))).status, 200);
    assert.equal((await get(a.id, bearer(room.owner_token))).status, 200);
    const list = await f.api.get(hooks(room.uuid), bearer(room.owner_token));
    assert.deepEqual(list.body.webhooks.map((w: { id: string }) => w.id), [a.id, b.id]);
    assert.ok(list.body.webhooks.every((w: Record<string, unknown>) => !("secret" in w) && !("deliveries" in w)));

    const deleted = await del(a.id, bearer(a.secret));
    assert.deepEqual([deleted.status, deleted.body], [200, { deleted: a.id }]);
    assert.equal((await del(a.id, bearer(a.secret))).body.code, "webhook_not_found");
    assert.equal((await del(b.id, bearer(room.owner_token))).status, 200);
    assert.deepEqual((await f.api.get(hooks(room.uuid), bearer(room.owner_token))).body.webhooks, []);
  });

  test("registrations take a rate budget per client; without the switch a loopback URL is refused", async () => {
    const g = await startApi({ PARLEY_RATE_WEBHOOKS_PER_HOUR: "2" });
    try {
      const room = await g.api.room();
      const refused = await g.api.post(hooks(room.uuid), { url: `http://localhost:${rx.port}/x` });
      assert.deepEqual([refused.status, refused.body.code], [400, "webhook_url_forbidden"]);
      assert.match(refused.body.detail, /localhost resolves to .*: it is loopback/);
      const metadata = await g.api.post(hooks(room.uuid), { url: "http://169.254.169.254/latest/meta-data/" });
      assert.deepEqual([metadata.status, metadata.body.code], [400, "webhook_url_forbidden"]);
      const limited = await g.api.post(hooks(room.uuid), { url: "http://10.0.0.1/" });
      assert.deepEqual([limited.status, limited.body.code], [429, "rate_limited"]);
      assert.ok(Number(limited.headers.get("retry-after")) > 0);
    } finally {
      await g.close();
    }
  });
});

describe("privacy and lifetime", () => {
  test("a registration is not an event: its URL and secret are in no log, export or room view", async () => {
    const room = await f.api.room({ is_public: true, description: "private hooks" });
    const marker = `secret-path-${crypto.randomBytes(6).toString("hex")}`;
    const w = await register(room.uuid, `/${marker}`);
    await f.api.say(room.uuid, "a", "hello");
    await arrived(`/${marker}`, 1);
    const info = await f.api.get(`/api/rooms/${room.uuid}`);
    assert.equal(info.body.head.size, 2, "room.created and the message only");
    const everything = [
      JSON.stringify(info.body),
      JSON.stringify((await f.api.get(`/api/rooms/${room.uuid}/export`)).body),
      JSON.stringify((await f.api.get(`/api/rooms/${room.uuid}/messages?since=0`)).body),
      JSON.stringify((await f.api.get("/api/rooms?q=private")).body),
      await (await fetch(`${f.url}/${room.uuid}?format=md`)).text(),
    ].join("\n");
    for (const needle of [marker, w.secret, w.id]) assert.ok(!everything.includes(needle), `${needle} leaked`);
  });

  test("deleting the room removes its webhooks and their deliveries", async () => {
    const room = await f.api.room();
    const w = await register(room.uuid, "/gone");
    await f.api.say(room.uuid, "a", "x");
    await arrived("/gone", 1);
    const count = async (table: string) => Number((await rawSql<{ n: number }>(f.server.svc, `SELECT count(*) AS n FROM ${table} WHERE room = ?`, [room.uuid]))[0]!.n);
    assert.deepEqual([await count("webhooks"), await count("webhook_deliveries")], [1, 1]);
    assert.equal((await f.api.del(`/api/rooms/${room.uuid}`, bearer(room.owner_token))).status, 200);
    assert.deepEqual([await count("webhooks"), await count("webhook_deliveries")], [0, 0]);
    const after = await f.api.get(`${hooks(room.uuid)}/${w.id}`, bearer(w.secret));
    assert.equal(after.body.code, "room_not_found");
  });

  test("pending deliveries survive SIGKILL: a server restarted on the same data sends each once", async () => {
    const dir = tempDir();
    const database: Record<string, string> = TEST_BACKEND === "postgres" ? { PARLEY_DATABASE_URL: await testDatabase(dir) } : {};
    const env: Record<string, string> = { ...NO_LIMITS, ...WEBHOOK_ENV, ...database, PARLEY_DATA_DIR: dir, PARLEY_KEY: crypto.randomBytes(32).toString("hex") };
    // The first server never runs its worker: every delivery stays pending in the outbox.
    const first = await startInstance("wh1", { ...env, PARLEY_WEBHOOK_INTERVAL: "1h" });
    let second: Awaited<ReturnType<typeof startInstance>> | undefined;
    try {
      const room = await first.api.room();
      const w = (await first.api.post(hooks(room.uuid), { url: `${rx.url}/restart` })).body;
      for (const text of ["one", "two", "three"]) assert.equal((await first.api.say(room.uuid, "a", text)).status, 201);
      const pending = (await first.api.get(`${hooks(room.uuid)}/${w.id}`, bearer(w.secret))).body;
      assert.deepEqual(pending.counts, { pending: 3, retrying: 0, delivered: 0, dead: 0 });
      await first.kill();
      assert.equal(rx.at("/restart").length, 0);

      second = await startInstance("wh2", env);
      await arrived("/restart", 3);
      await waitUntil("all delivered", async () => (await second!.api.get(`${hooks(room.uuid)}/${w.id}`, bearer(w.secret))).body.counts.delivered === 3, 10_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const got = rx.at("/restart");
      assert.deepEqual(got.map((d) => d.body.event.message.text).sort(), ["one", "three", "two"]);
      assert.equal(new Set(got.map((d) => d.headers["x-parley-delivery"])).size, 3, "each delivery once");
      assert.ok(got.every((d) => d.headers["x-parley-signature"] === expectedSignature(w.secret, d.raw)), "the restarted server signs with the same secret");
    } finally {
      await first.stop();
      await second?.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("owner alerts", () => {
  test('a turns room that blocks sends a "slack" alert to the owner; an events webhook does not get alerts', async () => {
    const created = await f.api.post("/api/rooms", { mode: "turns", description: "Pricing talk", turns: { participants: ["a", "b"], max_rounds: 3 } });
    assert.equal(created.status, 201);
    const room = created.body as { uuid: string; owner_token: string; url: string };
    const alerts = await register(room.uuid, "/alerts-slack", { kind: "alerts", format: "slack" }, bearer(room.owner_token));
    assert.deepEqual([alerts.kind, alerts.format, alerts.events], ["alerts", "slack", null]);
    const events = await register(room.uuid, "/turn-events", { events: ["room.*"] });
    const turn = (await f.api.get(`/api/rooms/${room.uuid}/turns/current`)).body.current;
    assert.equal(turn.agent_id, "a");
    const claim = await f.api.post(`/api/rooms/${room.uuid}/turns/${turn.id}/claim`, { agent_id: "a" });
    assert.equal(claim.status, 200, JSON.stringify(claim.body));
    const reply = await f.api.post(`/api/rooms/${room.uuid}/turns/${turn.id}/reply`, { agent_id: "a", lease_token: claim.body.lease_token, text: "We need a human decision on the budget.", result: "blocked" });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));

    await arrived("/alerts-slack", 1);
    const [alert] = rx.at("/alerts-slack");
    assert.equal(alert!.headers["x-parley-event"], "alert.turns_blocked");
    assert.deepEqual(Object.keys(alert!.body), ["text"]);
    assert.match(alert!.body.text, /^:rotating_light: The turns room is blocked: We need a human decision on the budget\. Resume it .* — <[^|]+\|Pricing talk>$/);
    assert.ok(alert!.body.text.includes(`<${room.url}|`));
    assert.equal(alert!.headers["x-parley-signature"], expectedSignature(alerts.secret, alert!.raw));
    await arrived("/turn-events", 1);
    await settle(room.uuid, events.id, events.secret);
    assert.deepEqual(rx.at("/turn-events").map((d) => d.headers["x-parley-event"]), ["room.blocked"], "the event itself, no alert");
  });

  test("a submitted task tells the owner it awaits review", async () => {
    const room = await f.api.room();
    await register(room.uuid, "/review", { kind: "alerts" }, bearer(room.owner_token));
    const task = (await f.api.post(`/api/rooms/${room.uuid}/tasks`, { agent_id: "boss", title: "Write the parser", reviewer: "rev" })).body.task;
    assert.equal((await f.api.post(`/api/rooms/${room.uuid}/agents`, { agent_id: "worker", capabilities: [] })).status, 200);
    const claim = await f.api.post(`/api/rooms/${room.uuid}/tasks/${task.id}/claim`, { agent_id: "worker" });
    assert.equal(claim.status, 200, JSON.stringify(claim.body));
    const submit = await f.api.post(`/api/rooms/${room.uuid}/tasks/${task.id}/submit`, { agent_id: "worker", lease_token: claim.body.lease_token, status: "completed", summary: "done" });
    assert.equal(submit.status, 200, JSON.stringify(submit.body));
    await arrived("/review", 1);
    const [d] = rx.at("/review");
    assert.equal(d!.headers["x-parley-event"], "alert.task_awaiting_review");
    assert.equal(d!.body.alert.detail.task_id, task.id);
    assert.equal(d!.body.alert.seq, submit.body.receipt.seq, "the alert names the event that raised it");
    assert.match(d!.body.alert.summary, new RegExp(`Task ${task.id} was submitted by worker and awaits review`));
  });

  test("near the message cap (90 %) the owner is told once, as JSON {room, url, alert}", async () => {
    const room = await f.api.room();
    await register(room.uuid, "/cap", { kind: "alerts" }, bearer(room.owner_token));
    for (let i = 1; i <= 10; i++) assert.equal((await f.api.say(room.uuid, "a", `m${i}`)).status, 201);
    await arrived("/cap", 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const got = rx.at("/cap");
    assert.equal(got.length, 1);
    assert.equal(got[0]!.headers["x-parley-event"], "alert.near_message_cap");
    assert.equal(got[0]!.body.room, room.uuid);
    assert.equal(got[0]!.body.url, room.url);
    assert.deepEqual([got[0]!.body.alert.kind, got[0]!.body.alert.detail], ["near_message_cap", { messages: 9, cap: 10 }]);
    assert.match(got[0]!.body.alert.summary, /holds 9 of its 10 messages/);
  });

  test("a room about to expire tells its alerts webhooks once per expiry (the sweep)", async () => {
    const clock = new ManualClock();
    const g = await startApi({ ...WEBHOOK_ENV, PARLEY_ROOM_IDLE_TTL: "72h" }, { clock });
    try {
      const room = await g.api.room();
      const r = await g.api.post(hooks(room.uuid), { url: `${rx.url}/expiry`, kind: "alerts" }, bearer(room.owner_token));
      assert.equal(r.status, 201);
      assert.equal(await sweepNearExpiry(g.server.svc), 0, "72 h away: nothing yet");
      clock.advance(71.5 * 3_600_000);
      assert.equal(await sweepNearExpiry(g.server.svc), 1);
      assert.equal(await sweepNearExpiry(g.server.svc), 0, "once per expiry");
      await arrived("/expiry", 1);
      const [d] = rx.at("/expiry");
      assert.equal(d!.headers["x-parley-event"], "alert.near_expiry");
      assert.match(d!.body.alert.summary, /expires in about 30 min/);
      // Activity moves the expiry on; nearing the new one is told again.
      assert.equal((await g.api.say(room.uuid, "a", "still here")).status, 201);
      assert.equal(await sweepNearExpiry(g.server.svc), 0);
      clock.advance(71.5 * 3_600_000);
      assert.equal(await sweepNearExpiry(g.server.svc), 1);
      await arrived("/expiry", 2);
    } finally {
      await g.close();
    }
  });
});
