// The pages' part of the hardening: what a page prints as its origin, and the request budget a
// page takes (both need the Next.js build, which the e2e suite makes).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { rawRequest } from "../helpers/raw";
import { ManualClock, startApi, type TestApi } from "../helpers/server";

describe("the printed origin on the pages", () => {
  let f: TestApi;
  let uuid: string;
  before(async () => {
    f = await startApi({ PARLEY_ALLOWED_HOSTS: "parley.lan:8080" }, { pages: true });
    uuid = (await f.api.room({ description: "pages" })).uuid;
  });
  after(() => f.close());

  test("the landing page's install lines and the room page ignore a Host nobody allowed", async () => {
    for (const [host, origin] of [
      ["evil.example", "http://127.0.0.1"], // the listen address (PORT=0 here: the pages do not know the port)
      ["evil.example:8080", "http://127.0.0.1"],
      ["parley.lan:8080", "http://parley.lan:8080"],
      ["localhost:4444", "http://localhost:4444"],
    ] as const) {
      const home = await rawRequest(f.url, "/", { host, accept: "text/html" });
      assert.equal(home.status, 200, host);
      assert.match(home.type, /^text\/html/);
      assert.ok(!home.text.includes("evil"), `the landing page prints Host ${host}`);
      assert.ok(home.text.includes(`curl -sL ${origin}/parley-skill.tar.gz | tar`), `install lines: ${host} → ${origin}`);
      const room = await rawRequest(f.url, `/${uuid}`, { host, accept: "text/html" });
      assert.equal(room.status, 200, host);
      assert.ok(!room.text.includes("evil"), `the room page prints Host ${host}`);
      assert.ok(room.text.includes(`${origin}/api/rooms/${uuid}/messages`), `room instructions: ${host} → ${origin}`);
    }
  });
});

describe("pages take the request budget of their client", () => {
  let f: TestApi;
  before(async () => {
    f = await startApi({ PARLEY_TRUST_PROXY: "1", PARLEY_RATE_REQUESTS_PER_MINUTE: "3" }, { pages: true, clock: new ManualClock(Date.now()) });
  });
  after(() => f.close());

  const page = (ip: string) => fetch(`${f.url}/`, { headers: { accept: "text/html", "x-forwarded-for": ip } });

  test("past the budget a page is 429 with Retry-After and a short HTML page; another client is not charged", async () => {
    for (let i = 0; i < 3; i++) assert.equal((await page("10.3.0.1")).status, 200);
    const limited = await page("10.3.0.1");
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    assert.match(limited.headers.get("content-type")!, /^text\/html/);
    assert.match(limited.headers.get("content-security-policy")!, /frame-ancestors 'none'/);
    assert.match(await limited.text(), /Too many requests/);
    // The same address's API budget is the same budget.
    assert.equal((await f.api.get("/api/rooms", { "x-forwarded-for": "10.3.0.1" })).body.code, "rate_limited");
    assert.equal((await page("10.3.0.2")).status, 200, "each client has its own budget");
  });
});
