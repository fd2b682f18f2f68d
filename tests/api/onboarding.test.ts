import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startApi, withApi, type TestApi } from "../helpers/server";

let f: TestApi;
let room: { uuid: string };

before(async () => {
  f = await startApi();
  room = await f.api.room({ description: "Agree on a release date" });
});
after(() => f.close());

test("a room URL asked for as markdown gives the room's instructions", async () => {
  for (const [query, accept] of [
    ["?format=md", "text/html"],
    ["?format=markdown", ""],
    ["?format=txt", ""],
    ["", "text/markdown"],
    ["", "application/json"],
  ]) {
    const res = await fetch(`${f.url}/${room.uuid}${query}`, { headers: accept ? { accept } : {} });
    assert.equal(res.status, 200, `${query} ${accept}`);
    assert.match(res.headers.get("content-type")!, /^text\/markdown/);
    const text = await res.text();
    assert.match(text, new RegExp(`^# Parley room ${room.uuid}`));
    assert.match(text, /Agree on a release date/);
    assert.ok(text.includes(`${f.url}/api/rooms/${room.uuid}/messages?since=`), "the loop uses this room's API");
    assert.match(text, /room_full/);
    assert.match(text, /wait=25/);
  }
});

test("a markdown request for an unknown room is a markdown 404", async () => {
  const res = await fetch(`${f.url}/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23?format=md`);
  assert.equal(res.status, 404);
  assert.match(await res.text(), /room_not_found/);
});

test("an agent that knows only the URL can join with curl-like requests", async () => {
  const md = await (await fetch(`${f.url}/${room.uuid}?format=md`)).text();
  const postUrl = /curl -s -X POST '([^']+)'/.exec(md)![1]!;
  const post = await fetch(postUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ agent_id: "curl-agent", text: "joined" }) });
  assert.equal(post.status, 201);
  const readUrl = /curl -s '([^']+\?since=0)'/.exec(md)![1]!;
  const read = await (await fetch(readUrl)).json();
  assert.equal(read.messages.at(-1).text, "joined");
});

test("/agents.md, /llms.txt, /openapi.json and /health", async () => {
  const agents = await fetch(`${f.url}/agents.md`);
  assert.match(agents.headers.get("content-type")!, /^text\/markdown/);
  assert.match(await agents.text(), /POST .*\/api\/rooms/);
  const llms = await (await fetch(`${f.url}/llms.txt`)).text();
  assert.match(llms, /^# Parley/);
  assert.ok(llms.includes(`${f.url}/agents.md`));
  const openapi = await f.api.get("/openapi.json");
  assert.equal(openapi.body.openapi, "3.0.3");
  const post = openapi.body.paths["/api/rooms/{id}/messages"].post;
  assert.ok(post.requestBody.content["application/json"].schema.properties.text, "request schema comes from zod");
  assert.equal(post.requestBody.content["application/json"].schema.properties.text.maxLength, 10000);
  assert.ok(openapi.body.paths["/api/rooms"].get.parameters.some((p: { name: string }) => p.name === "sort"));
  const health = await f.api.get("/health");
  assert.deepEqual(health.body, { status: "ok" });
});

test("unknown API paths and /.well-known are JSON 404s; API responses carry security headers", async () => {
  for (const path of ["/api/nothing", "/api/rooms/x/y/z", "/.well-known/oauth-authorization-server", "/mcp/whatever"]) {
    const r = await f.api.get(path);
    assert.equal(r.status, 404, path);
    assert.equal(r.body.code, "not_found");
  }
  const r = await f.api.get("/health");
  assert.equal(r.headers.get("x-content-type-options"), "nosniff");
  assert.equal(r.headers.get("referrer-policy"), "no-referrer");
  assert.match(r.headers.get("content-security-policy")!, /frame-ancestors 'none'/);
});

test("/metrics answers loopback clients in Prometheus text, and nobody behind a proxy without the admin token", async () => {
  const res = await fetch(`${f.url}/metrics`);
  assert.equal(res.status, 200);
  const text = await res.text();
  assert.match(text, /^# HELP parley_rooms /m);
  assert.match(text, /^parley_events \d+$/m);
  await withApi({ PARLEY_TRUST_PROXY: "1", PARLEY_ADMIN_TOKEN: "admin-token-0123456789abcdef" }, async (proxied) => {
    assert.equal((await fetch(`${proxied.url}/metrics`)).status, 403);
    const admin = await fetch(`${proxied.url}/metrics`, { headers: { authorization: "Bearer admin-token-0123456789abcdef" } });
    assert.equal(admin.status, 200);
  });
});
