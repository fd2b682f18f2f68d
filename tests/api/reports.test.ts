// Abuse reports (SPEC 12): POST /api/rooms/{id}/report {reason, message_id?} → 202 {id}, within a
// per-client budget; listed for the operator, told to the owner's alerts webhooks and to
// PARLEY_ADMIN_WEBHOOK_URL; never part of the room's log.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { adminWebhookSecret } from "../../lib/admin/reports";
import { ManualClock, startApi, type TestApi } from "../helpers/server";
import { expectedSignature, startReceiver, type Receiver } from "../helpers/webhook-receiver";
import { waitUntil } from "../helpers/wait";

const ADMIN = "admin-token-for-report-tests-01";
const admin = { authorization: `Bearer ${ADMIN}` };
const from = (ip: string) => ({ "x-forwarded-for": ip });
let ips = 0;
/** A client of its own, so each test has a fresh report budget. */
const client = () => from(`10.9.${Math.floor(++ips / 250)}.${ips % 250}`);

let f: TestApi;
let rx: Receiver;
const clock = new ManualClock(Date.now());
before(async () => {
  rx = await startReceiver();
  f = await startApi(
    {
      PARLEY_ADMIN_TOKEN: ADMIN,
      PARLEY_RATE_REPORTS_PER_HOUR: "3",
      PARLEY_TRUST_PROXY: "1",
      PARLEY_ADMIN_WEBHOOK_URL: `${rx.url}/operator`,
      PARLEY_WEBHOOK_ALLOW_PRIVATE: "1",
      PARLEY_WEBHOOK_INTERVAL: "100ms",
    },
    { clock },
  );
});
after(async () => {
  await f.close();
  await rx.close();
});

const report = (room: string, body: unknown, headers = client()) => f.api.post(`/api/rooms/${room}/report`, body, headers);
const openReports = async () => (await f.api.get("/api/admin/reports?status=open&limit=200", admin)).body.reports as any[];

describe("POST /api/rooms/{id}/report", () => {
  test("202 with the report's id; the operator sees it and the room's log does not change", async () => {
    const room = await f.api.room();
    const size = (await f.api.get(`/api/rooms/${room.uuid}`)).body.head.size;
    const r = await report(room.uuid, { reason: "It posts links to malware." });
    assert.equal(r.status, 202);
    assert.match(r.body.id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(Object.keys(r.body), ["id"]);
    const listed = (await openReports()).find((x) => x.id === r.body.id);
    assert.deepEqual([listed.room, listed.reason, listed.message_id, listed.status], [room.uuid, "It posts links to malware.", null, "open"]);
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).body.head.size, size, "a report is not a log event");
  });

  test("reason: 1 to 500 characters after trimming; 0, whitespace only and 501 are validation errors", async () => {
    const room = await f.api.room();
    for (const reason of ["x", "r".repeat(500), `  ${"t".repeat(500)}  `]) {
      assert.equal((await report(room.uuid, { reason })).status, 202, `${reason.length} characters`);
    }
    for (const body of [{ reason: "" }, { reason: "   \n " }, { reason: "r".repeat(501) }, {}, { reason: 5 }]) {
      const r = await report(room.uuid, body);
      assert.equal(r.status, 400, JSON.stringify(body).slice(0, 60));
      assert.equal(r.body.code, "validation_error");
      assert.match(r.body.detail, /^reason: /);
    }
  });

  test("message_id must name a message of this room", async () => {
    const room = await f.api.room();
    const other = await f.api.room();
    const msg = (await f.api.say(room.uuid, "ann", "something nasty")).body.id as number;
    const theirs = (await f.api.say(other.uuid, "bob", "x")).body.id as number;
    await f.api.say(other.uuid, "bob", "y");
    const ok = await report(room.uuid, { reason: "this message", message_id: msg });
    assert.equal(ok.status, 202);
    assert.equal((await openReports()).find((x) => x.id === ok.body.id).message_id, msg);
    for (const [message_id, why] of [[1, "seq 1 is room.created, not a message"], [msg + 5, "past the head"], [theirs + 1, "a message of another room"]] as const) {
      const r = await report(room.uuid, { reason: "nope", message_id });
      assert.equal(r.status, 400, why);
      assert.equal(r.body.code, "validation_error");
      assert.equal(r.body.detail, `message_id: no message with id ${message_id} in this room.`);
    }
    for (const message_id of [0, -1, 1.5, "2"]) {
      const r = await report(room.uuid, { reason: "nope", message_id });
      assert.equal(r.status, 400, String(message_id));
      assert.match(r.body.detail, /^message_id: /);
    }
  });

  test("an unknown room is 404 room_not_found, a malformed id 400 invalid_uuid; a closed room can be reported", async () => {
    const unknown = await report("00000000-0000-4000-8000-000000000000", { reason: "where?" });
    assert.deepEqual([unknown.status, unknown.body.code], [404, "room_not_found"]);
    const bad = await report("not-a-room", { reason: "where?" });
    assert.deepEqual([bad.status, bad.body.code], [400, "invalid_uuid"]);
    const room = await f.api.room();
    await f.api.post(`/api/rooms/${room.uuid}/close`, {}, { authorization: `Bearer ${room.owner_token}` });
    assert.equal((await report(room.uuid, { reason: "closed but abusive" })).status, 202);
  });

  test("each client may file 3 an hour (PARLEY_RATE_REPORTS_PER_HOUR): the 4th is 429 rate_limited with Retry-After and files nothing", async () => {
    const room = await f.api.room();
    const me = client();
    for (let i = 0; i < 3; i++) assert.equal((await report(room.uuid, { reason: `report ${i}` }, me)).status, 202);
    const before = (await openReports()).filter((x) => x.room === room.uuid).length;
    const limited = await report(room.uuid, { reason: "one too many" }, me);
    assert.equal(limited.status, 429);
    assert.equal(limited.body.code, "rate_limited");
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    assert.equal((await openReports()).filter((x) => x.room === room.uuid).length, before, "nothing filed");
    assert.equal((await report(room.uuid, { reason: "another client" })).status, 202, "another client has its own budget");
    // Filed at one (manual) time, so in no particular order: count them by reporter.
    const byReporter = new Map<string, number>();
    for (const x of (await openReports()).filter((r) => r.room === room.uuid)) byReporter.set(x.reporter, (byReporter.get(x.reporter) ?? 0) + 1);
    assert.deepEqual([...byReporter.values()].sort(), [1, 3], "one client's reports share a reporter hash, another client's differs");
    clock.advance(3_600_000);
    assert.equal((await report(room.uuid, { reason: "an hour later" }, me)).status, 202, "the budget refills");
  });

  test("the owner's alerts webhook and the operator's webhook hear of it", async () => {
    const room = await f.api.room({ description: "reported room" });
    const hook = await f.api.post(`/api/rooms/${room.uuid}/webhooks`, { url: `${rx.url}/owner`, kind: "alerts" }, { authorization: `Bearer ${room.owner_token}` });
    assert.equal(hook.status, 201);
    const msg = (await f.api.say(room.uuid, "ann", "bad")).body.id as number;
    const r = await report(room.uuid, { reason: "Harassment in message 2.", message_id: msg });
    await waitUntil("both webhooks", async () => rx.at("/owner").length >= 1 && rx.at("/operator").some((d) => d.body.report?.id === r.body.id), 10_000);
    const owner = rx.at("/owner")[0]!;
    assert.equal(owner.headers["x-parley-event"], "alert.abuse_report");
    assert.equal(owner.body.alert.kind, "abuse_report");
    assert.match(owner.body.alert.summary, /reported message \d+ of this room to the operator of this server: Harassment in message 2\./);
    assert.equal(owner.body.alert.detail.report_id, r.body.id);
    const op = rx.at("/operator").find((d) => d.body.report?.id === r.body.id)!;
    assert.equal(op.headers["x-parley-event"], "report.created");
    assert.equal(op.headers["x-parley-delivery"], r.body.id);
    assert.equal(op.headers["x-parley-signature"], expectedSignature(adminWebhookSecret(f.server.svc), op.raw));
    assert.deepEqual([op.body.report.reason, op.body.report.message_id, op.body.room.uuid, op.body.room.description], ["Harassment in message 2.", msg, room.uuid, "reported room"]);
  });

  test("the route is in /openapi.json", async () => {
    const spec = (await f.api.get("/openapi.json")).body;
    assert.ok(spec.paths["/api/rooms/{id}/report"]?.post, "documented");
  });
});
