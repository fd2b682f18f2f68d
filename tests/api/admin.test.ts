// The operator's doors (SPEC 12 "Admin"): the JSON API under /api/admin/* with the admin token, and
// the console under /admin with its session cookie, CSRF checks and the same actions; every admin
// action on a room is an event of its log (actor admin) and an audit row, a deletion's row keeps
// what the room held.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ManualClock, startApi, withApi, type TestApi } from "../helpers/server";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver";
import { waitUntil } from "../helpers/wait";

const ADMIN = "admin-token-for-admin-tests-0123";
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const admin = bearer(ADMIN);

let f: TestApi;
let rx: Receiver;
const clock = new ManualClock(Date.now());
before(async () => {
  rx = await startReceiver();
  f = await startApi(
    {
      PARLEY_ADMIN_TOKEN: ADMIN,
      PARLEY_WEBHOOK_ALLOW_PRIVATE: "1",
      PARLEY_WEBHOOK_INTERVAL: "100ms",
      PARLEY_WEBHOOK_MAX_ATTEMPTS: "1",
      PARLEY_WEBHOOK_DISABLE_AFTER: "1",
      // The monitors' findings stay put while the test looks at them.
      PARLEY_SWEEP_INTERVAL: "1h",
      PARLEY_TURN_SWEEP_INTERVAL: "1h",
    },
    { clock },
  );
});
after(async () => {
  await f.close();
  await rx.close();
});

/** The room's log, as its export gives it. */
const eventsOf = async (room: string) => (await f.api.get(`/api/rooms/${room}/export`)).body.events as { seq: number; type: string; actor: string; payload: any }[];
const lastEvent = async (room: string) => (await eventsOf(room)).at(-1)!;

describe("the admin token", () => {
  test("every /api/admin route needs it: none, an owner token or a wrong one is 403 forbidden", async () => {
    const room = await f.api.room();
    const routes: [string, string][] = [
      ["GET", "/api/admin/summary"], ["GET", "/api/admin/rooms"], ["GET", `/api/admin/rooms/${room.uuid}`], ["GET", "/api/admin/reports"],
      ["GET", "/api/admin/alerts"], ["GET", "/api/admin/audit"], ["POST", `/api/admin/rooms/${room.uuid}/close`], ["POST", `/api/admin/rooms/${room.uuid}/hide`],
      ["POST", `/api/admin/rooms/${room.uuid}/delete`], ["DELETE", `/api/admin/rooms/${room.uuid}`], ["POST", "/api/admin/reports/00000000-0000-4000-8000-000000000000/resolve"],
    ];
    for (const [method, path] of routes) {
      for (const headers of [{}, bearer(room.owner_token), bearer(`${ADMIN}x`)]) {
        const r = method === "GET" ? await f.api.get(path, headers) : method === "DELETE" ? await f.api.del(path, headers) : await f.api.post(path, {}, headers);
        assert.equal(r.status, 403, `${method} ${path} ${JSON.stringify(headers)}`);
        assert.equal(r.body.code, "forbidden");
      }
    }
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).body.status, "open", "nothing happened to the room");
    assert.equal((await f.api.get("/api/admin/rooms", admin)).status, 200);
  });

  test("?token= is never read: a token in a URL is 400 bad_request, even beside a good Bearer token", async () => {
    for (const path of [`/api/admin/rooms?token=${ADMIN}`, `/api/admin/summary?token=${ADMIN}`]) {
      for (const headers of [{}, admin]) {
        const r = await f.api.get(path, headers);
        assert.equal(r.status, 400, path);
        assert.equal(r.body.code, "bad_request");
        assert.match(r.body.detail, /never read from a URL/);
      }
    }
    const page = await fetch(`${f.url}/admin?token=${ADMIN}`, { redirect: "manual" });
    assert.equal(page.status, 400);
    assert.equal(page.headers.getSetCookie().length, 0, "no session from a URL");
  });

  test("without PARLEY_ADMIN_TOKEN the admin API and console are off", async () => {
    await withApi({}, async (off) => {
      const r = await off.api.get("/api/admin/rooms", admin);
      assert.equal(r.status, 403);
      assert.match(r.body.detail, /PARLEY_ADMIN_TOKEN/);
      const page = await fetch(`${off.url}/admin`);
      assert.equal(page.status, 404);
      assert.match(await page.text(), /admin console is off/);
    });
  });
});

describe("rooms", () => {
  test("the list has private rooms too, and searches, filters and sorts", async () => {
    const tag = `adminlist${Date.now()}`;
    const pub = await f.api.room({ description: `${tag} public`, is_public: true });
    const priv = await f.api.room({ description: `${tag} private` });
    for (let i = 0; i < 3; i++) await f.api.say(priv.uuid, "ann", `m${i}`);
    const list = await f.api.get(`/api/admin/rooms?q=${tag}`, admin);
    assert.equal(list.status, 200);
    assert.equal(list.body.total, 2);
    assert.deepEqual(new Set(list.body.rooms.map((r: any) => r.uuid)), new Set([pub.uuid, priv.uuid]));
    const bySize = await f.api.get(`/api/admin/rooms?q=${tag}&sort=messages`, admin);
    assert.deepEqual(bySize.body.rooms.map((r: any) => [r.uuid, r.message_count, r.is_public]), [[priv.uuid, 3, false], [pub.uuid, 0, true]]);
    assert.deepEqual((await f.api.get(`/api/admin/rooms?q=${tag}&visibility=private`, admin)).body.rooms.map((r: any) => r.uuid), [priv.uuid]);
    assert.deepEqual((await f.api.get(`/api/admin/rooms?q=${priv.uuid.slice(0, 13)}`, admin)).body.rooms.map((r: any) => r.uuid), [priv.uuid], "by the start of its id");
    const bad = await f.api.get("/api/admin/rooms?sort=mood", admin);
    assert.equal(bad.status, 400);
    assert.match(bad.body.detail, /^sort: /);
  });

  test("close and reopen are room.closed / room.reopened events with actor admin; the owner cannot reopen what the operator closed", async () => {
    const room = await f.api.room();
    await f.api.say(room.uuid, "ann", "hello");
    const closed = await f.api.post(`/api/admin/rooms/${room.uuid}/close`, { reason: "spam" }, admin);
    assert.equal(closed.status, 200);
    assert.equal(closed.body.status, "closed");
    const closing = await lastEvent(room.uuid);
    assert.deepEqual([closing.type, closing.actor, closing.payload], ["room.closed", "admin", { reason: "spam" }]);
    assert.equal((await f.api.say(room.uuid, "ann", "still here?")).body.code, "room_closed");
    const owner = await f.api.post(`/api/rooms/${room.uuid}/reopen`, {}, bearer(room.owner_token));
    assert.equal(owner.status, 403);
    assert.equal(owner.body.code, "forbidden");
    assert.match(owner.body.detail, /only the operator can reopen it/);
    const reopened = await f.api.post(`/api/admin/rooms/${room.uuid}/reopen`, {}, admin);
    assert.equal(reopened.body.status, "open");
    const last = await lastEvent(room.uuid);
    assert.deepEqual([last.type, last.actor, last.payload], ["room.reopened", "admin", {}]);
    // The owner's own close and reopen work as before.
    assert.equal((await f.api.post(`/api/rooms/${room.uuid}/close`, {}, bearer(room.owner_token))).body.status, "closed");
    assert.equal((await f.api.post(`/api/rooms/${room.uuid}/reopen`, {}, bearer(room.owner_token))).body.status, "open");
    assert.equal((await lastEvent(room.uuid)).actor, "owner");
    const again = await f.api.post(`/api/admin/rooms/${room.uuid}/reopen`, {}, admin);
    assert.equal(again.body.receipt, null, "reopening an open room is a no-op");
  });

  test("hide and unhide take a public room off the list and back, as room.hidden / room.unhidden events", async () => {
    const tag = `hideme${Date.now()}`;
    const room = await f.api.room({ description: tag, is_public: true });
    const listed = async () => (await f.api.get(`/api/rooms?q=${tag}`)).body.rooms.length;
    assert.equal(await listed(), 1);
    const hidden = await f.api.post(`/api/admin/rooms/${room.uuid}/hide`, { reason: "off-topic" }, admin);
    assert.equal(hidden.status, 200);
    assert.equal(hidden.body.hidden, true);
    assert.equal(await listed(), 0, "off the public list");
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).status, 200, "its URL still works");
    assert.equal((await f.api.say(room.uuid, "ann", "hi")).status, 201, "and it takes posts");
    let last = (await eventsOf(room.uuid)).find((e) => e.type === "room.hidden")!;
    assert.deepEqual([last.actor, last.payload], ["admin", { reason: "off-topic" }]);
    assert.equal((await f.api.get(`/api/admin/rooms?q=${tag}&visibility=hidden`, admin)).body.total, 1);
    await f.api.post(`/api/admin/rooms/${room.uuid}/unhide`, {}, admin);
    assert.equal(await listed(), 1);
    last = await lastEvent(room.uuid);
    assert.deepEqual([last.type, last.actor], ["room.unhidden", "admin"]);
  });

  test("a room with admin events verifies CLEAN: admin is a service actor and its events fit the catalogue", async () => {
    const room = await f.api.room({ is_public: true });
    await f.api.say(room.uuid, "ann", "one");
    for (const action of ["hide", "close", "reopen", "unhide"]) assert.equal((await f.api.post(`/api/admin/rooms/${room.uuid}/${action}`, { reason: `because ${action}` }, admin)).status, 200);
    const verdict = await f.api.post(`/api/rooms/${room.uuid}/verify`, {});
    assert.equal(verdict.body.verdict, "CLEAN", JSON.stringify(verdict.body.failures));
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).body.agent_count, 1, "admin is not an agent of the room");
  });

  test("agents cannot take the name admin", async () => {
    const room = await f.api.room();
    for (const name of ["admin", "ADMIN", "аdmin"]) {
      const r = await f.api.say(room.uuid, name, "I am the operator");
      assert.equal(r.status, 400, name);
      assert.equal(r.body.code, "validation_error");
    }
  });

  test("delete removes the room and leaves an audit row with its counts and reason; its open reports are resolved", async () => {
    const room = await f.api.room({ description: "to be deleted" });
    await f.api.say(room.uuid, "ann", "a");
    await f.api.say(room.uuid, "bob", "b");
    const report = await f.api.post(`/api/rooms/${room.uuid}/report`, { reason: "abusive" });
    assert.equal(report.status, 202);
    const r = await f.api.post(`/api/admin/rooms/${room.uuid}/delete`, { reason: "abuse" }, admin);
    assert.deepEqual([r.status, r.body], [200, { deleted: room.uuid }]);
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).body.code, "room_not_found");
    const audit = (await f.api.get("/api/admin/audit", admin)).body.audit as any[];
    const row = audit.find((a) => a.room === room.uuid && a.action === "delete");
    assert.ok(row, "an audit row for the deletion");
    assert.equal(row.reason, "abuse");
    assert.equal(row.via, "api");
    assert.equal(row.ip, "127.0.0.1");
    assert.deepEqual([row.detail.messages, row.detail.events, row.detail.agents, row.detail.description, row.detail.reports_resolved], [2, 3, 2, "to be deleted", 1]);
    const rep = (await f.api.get("/api/admin/reports?status=resolved", admin)).body.reports.find((x: any) => x.id === report.body.id);
    assert.equal(rep.status, "resolved");
    assert.match(rep.resolution, /deleted: abuse/);
    assert.equal((await f.api.post(`/api/admin/rooms/${room.uuid}/delete`, {}, admin)).body.code, "room_not_found");
  });

  test("DELETE /api/rooms/{id} with the admin token is the operator's deletion (audited); with the owner token it is not", async () => {
    const a = await f.api.room();
    const b = await f.api.room();
    assert.equal((await f.api.del(`/api/rooms/${a.uuid}`, admin)).status, 200);
    assert.equal((await f.api.del(`/api/rooms/${b.uuid}`, bearer(b.owner_token))).status, 200);
    const audit = (await f.api.get("/api/admin/audit", admin)).body.audit as any[];
    assert.equal(audit.filter((x) => x.room === a.uuid && x.action === "delete").length, 1);
    assert.equal(audit.filter((x) => x.room === b.uuid).length, 0);
  });

  test("a room id that is not a UUID is 400 invalid_uuid, an unknown one 404 room_not_found", async () => {
    assert.equal((await f.api.post("/api/admin/rooms/nope/close", {}, admin)).body.code, "invalid_uuid");
    assert.equal((await f.api.get("/api/admin/rooms/00000000-0000-4000-8000-000000000000", admin)).body.code, "room_not_found");
  });
});

describe("reports", () => {
  test("listed open, resolved once, with an audit row; unknown ids are 404", async () => {
    const room = await f.api.room();
    const { body } = await f.api.post(`/api/rooms/${room.uuid}/report`, { reason: "  spam links  " });
    const open = await f.api.get("/api/admin/reports?status=open", admin);
    const mine = open.body.reports.find((r: any) => r.id === body.id);
    assert.deepEqual([mine.room, mine.reason, mine.status, mine.message_id], [room.uuid, "spam links", "open", null]);
    assert.match(mine.reporter, /^[0-9a-f]{16}$/, "a keyed hash, never the address");
    const detail = await f.api.get(`/api/admin/rooms/${room.uuid}`, admin);
    assert.deepEqual(detail.body.reports.map((r: any) => r.id), [body.id]);
    const resolved = await f.api.post(`/api/admin/reports/${body.id}/resolve`, { resolution: "warned the owner" }, admin);
    assert.equal(resolved.status, 200);
    assert.deepEqual([resolved.body.status, resolved.body.resolution], ["resolved", "warned the owner"]);
    const twice = await f.api.post(`/api/admin/reports/${body.id}/resolve`, {}, admin);
    assert.deepEqual([twice.status, twice.body.code], [409, "invalid_transition"]);
    assert.equal((await f.api.post("/api/admin/reports/00000000-0000-4000-8000-000000000000/resolve", {}, admin)).body.code, "not_found");
    assert.equal((await f.api.post("/api/admin/reports/not-an-id/resolve", {}, admin)).body.code, "not_found");
    const audit = (await f.api.get("/api/admin/audit", admin)).body.audit as any[];
    assert.equal(audit.filter((a) => a.report_id === body.id && a.action === "resolve_report").length, 1);
  });
});

describe("alerts and the summary", () => {
  test("the monitors' findings: a stalled turn, a task lease that ran out, a webhook disabled by dead deliveries", async () => {
    const turns = await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["ann", "bob"], turn_timeout_s: 10 } });
    assert.equal(turns.status, 201);
    const board = await f.api.room();
    await f.api.post(`/api/rooms/${board.uuid}/agents`, { agent_id: "w", capabilities: [] });
    const task = await f.api.post(`/api/rooms/${board.uuid}/tasks`, { agent_id: "boss", title: "Write the report" });
    const claimed = await f.api.post(`/api/rooms/${board.uuid}/tasks/${task.body.task.id}/claim`, { agent_id: "w", lease_s: 30 });
    assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
    const hooked = await f.api.room();
    rx.on("/dead", 500);
    assert.equal((await f.api.post(`/api/rooms/${hooked.uuid}/webhooks`, { url: `${rx.url}/dead` })).status, 201);
    await f.api.say(hooked.uuid, "ann", "this delivery dies");
    clock.advance(31_000);
    const found = async () => (await f.api.get("/api/admin/alerts", admin)).body;
    await waitUntil("the webhook disabled", async () => (await found()).alerts.some((a: any) => a.kind === "webhook_disabled" && a.room === hooked.uuid), 10_000);
    const { alerts, not_gathered } = await found();
    const kinds = (room: string) => alerts.filter((a: any) => a.room === room).map((a: any) => a.kind);
    assert.deepEqual(kinds(turns.body.uuid), ["stalled_turn"]);
    assert.deepEqual(kinds(board.uuid), ["expired_task_lease"]);
    assert.deepEqual(kinds(hooked.uuid), ["webhook_disabled"]);
    assert.ok(not_gathered.length >= 3, "what could not be gathered is said");
    const summary = await f.api.get("/api/admin/summary", admin);
    assert.equal(summary.status, 200);
    assert.ok(summary.body.rooms.total >= 3);
    assert.equal(typeof summary.body.open_reports, "number");
    assert.equal(summary.body.backend, f.server.svc.store.dialect);
  });
});

// ---------- the console over HTTP (the browser test drives it in Chromium) ----------

/** A console request as a browser on this origin would send it. */
async function consolePost(path: string, form: Record<string, string>, opts: { cookie?: string; origin?: string | null } = {}) {
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" };
  if (opts.origin !== null) headers.origin = opts.origin ?? f.url;
  if (opts.cookie) headers.cookie = opts.cookie;
  return fetch(f.url + path, { method: "POST", headers, body: new URLSearchParams(form).toString(), redirect: "manual" });
}

/** Set-Cookie's attributes, by name (lower case). */
function cookieFlags(setCookie: string): { value: string; attrs: Record<string, string | true> } {
  const [pair, ...attrs] = setCookie.split(";").map((s) => s.trim());
  return {
    value: pair!.slice(pair!.indexOf("=") + 1),
    attrs: Object.fromEntries(attrs.map((a) => {
      const [k, v] = a.split("=");
      return [k!.toLowerCase(), v ?? true];
    })),
  };
}

async function login(): Promise<string> {
  const res = await consolePost("/admin/login", { token: ADMIN });
  assert.equal(res.status, 303);
  const set = res.headers.getSetCookie()[0]!;
  return set.split(";")[0]!;
}

const formTokenOf = async (cookie: string, path = "/admin/rooms") => {
  const html = await (await fetch(f.url + path, { headers: { cookie } })).text();
  return /name="form_token" value="([^"]+)"/.exec(html)![1]!;
};

describe("the console", () => {
  test("login sets a signed session cookie: HttpOnly, SameSite=Strict, Path=/admin, expiring, without the token", async () => {
    const res = await consolePost("/admin/login", { token: ADMIN });
    assert.equal(res.status, 303);
    assert.equal(res.headers.get("location"), "/admin");
    const [set] = res.headers.getSetCookie();
    const { value, attrs } = cookieFlags(set!);
    assert.equal(attrs.httponly, true);
    assert.equal(attrs.samesite, "Strict");
    assert.equal(attrs.path, "/admin");
    assert.equal(attrs["max-age"], String(12 * 3600));
    assert.equal(attrs.secure, undefined, "plain http: no Secure");
    assert.ok(!value.includes(ADMIN) && !decodeURIComponent(value).includes(ADMIN), "the cookie never holds the token");
    assert.match(value, /^v1\.[\w-]{24}\.\d+\.[\w-]{43}$/);
    const page = await fetch(`${f.url}/admin`, { headers: { cookie: set!.split(";")[0]! } });
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(html, /<h1>Overview<\/h1>/);
    const csp = page.headers.get("content-security-policy")!;
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /style-src 'sha256-/);
    assert.doesNotMatch(csp, /script-src|unsafe-inline/);
    assert.doesNotMatch(html, /<script/i);
    assert.equal(page.headers.get("cache-control"), "no-store");
  });

  test("behind https (a trusted proxy says so) the cookie is Secure", async () => {
    await withApi({ PARLEY_ADMIN_TOKEN: ADMIN, PARLEY_TRUST_PROXY: "1" }, async (proxied) => {
      const res = await fetch(`${proxied.url}/admin/login`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: `https://${new URL(proxied.url).host}`, "x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.9" },
        body: `token=${ADMIN}`,
        redirect: "manual",
      });
      assert.equal(res.status, 303);
      assert.equal(cookieFlags(res.headers.getSetCookie()[0]!).attrs.secure, true);
    });
  });

  test("a wrong token, or a login form from another origin, gets no session", async () => {
    const wrong = await consolePost("/admin/login", { token: "not-the-admin-token" });
    assert.equal(wrong.status, 403);
    assert.equal(wrong.headers.getSetCookie().length, 0);
    assert.match(await wrong.text(), /not the admin token of this server/);
    const foreign = await consolePost("/admin/login", { token: ADMIN }, { origin: "https://evil.example" });
    assert.equal(foreign.status, 403);
    assert.equal(foreign.headers.getSetCookie().length, 0);
  });

  test("pages need a session: without one, or with a forged or tampered cookie, they send to the login form", async () => {
    const cookie = await login();
    const [name, value] = cookie.split("=") as [string, string];
    const tampered = `${name}=${value.replace(/\.(\d+)\./, (_m, exp: string) => `.${Number(exp) + 1000}.`)}`;
    for (const c of [undefined, "parley_admin=v1.forged", tampered]) {
      const res = await fetch(`${f.url}/admin/rooms`, { headers: c ? { cookie: c } : {}, redirect: "manual" });
      assert.equal(res.status, 303, String(c));
      assert.equal(res.headers.get("location"), "/admin");
    }
    assert.equal((await fetch(`${f.url}/admin/rooms`, { headers: { cookie } })).status, 200);
  });

  test("a console POST is refused without the Origin of this server, without the form token, or with another session's", async () => {
    const room = await f.api.room();
    const cookie = await login();
    const token = await formTokenOf(cookie);
    const other = await formTokenOf(await login());
    assert.notEqual(token, other, "each session has its own form token");
    const path = `/admin/rooms/${room.uuid}/close`;
    const refusals: [string, Response][] = [
      ["a foreign Origin", await consolePost(path, { form_token: token }, { cookie, origin: "https://evil.example" })],
      ["no Origin", await consolePost(path, { form_token: token }, { cookie, origin: null })],
      ['Origin "null"', await consolePost(path, { form_token: token }, { cookie, origin: "null" })],
      ["no form token", await consolePost(path, {}, { cookie })],
      ["another session's form token", await consolePost(path, { form_token: other }, { cookie })],
      ["no session", await consolePost(path, { form_token: token })],
    ];
    for (const [what, res] of refusals) assert.equal(res.status, 403, what);
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).body.status, "open", "nothing was done");
    const done = await consolePost(path, { form_token: token, reason: "from the console" }, { cookie });
    assert.equal(done.status, 303);
    assert.equal(done.headers.get("location"), `/admin/rooms/${room.uuid}?done=close`);
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).body.status, "closed");
    const last = await lastEvent(room.uuid);
    assert.deepEqual([last.type, last.actor, last.payload], ["room.closed", "admin", { reason: "from the console" }]);
    const row = ((await f.api.get("/api/admin/audit", admin)).body.audit as any[]).find((a) => a.room === room.uuid);
    assert.equal(row.via, "console");
  });

  test("deleting from the console takes the confirmation box", async () => {
    const room = await f.api.room();
    const cookie = await login();
    const token = await formTokenOf(cookie);
    const unconfirmed = await consolePost(`/admin/rooms/${room.uuid}/delete`, { form_token: token }, { cookie });
    assert.equal(unconfirmed.status, 400);
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).status, 200);
    const done = await consolePost(`/admin/rooms/${room.uuid}/delete`, { form_token: token, confirm: "yes", reason: "test" }, { cookie });
    assert.equal(done.status, 303);
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).status, 404);
  });

  test("logout is a checked POST that clears the cookie; a session ends by itself after 12 h", async () => {
    const cookie = await login();
    const token = await formTokenOf(cookie, "/admin");
    assert.equal((await consolePost("/admin/logout", { form_token: token }, { cookie, origin: "https://evil.example" })).status, 403);
    const out = await consolePost("/admin/logout", { form_token: token }, { cookie });
    assert.equal(out.status, 303);
    const { value, attrs } = cookieFlags(out.headers.getSetCookie()[0]!);
    assert.deepEqual([value, attrs["max-age"], attrs.path], ["", "0", "/admin"]);
    clock.advance(12 * 3_600_000 + 1_000);
    const expired = await fetch(`${f.url}/admin/rooms`, { headers: { cookie }, redirect: "manual" });
    assert.equal(expired.status, 303, "the expired session is no session");
  });
});
