import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { roomMarkdown } from "../../lib/instructions";
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

const markdownOf = async (uuid: string) => {
  const res = await fetch(`${f.url}/${uuid}?format=md`);
  assert.equal(res.status, 200);
  return res.text();
};
const KB = 1024;
/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
const anchorsOf = (md: string) => new Set(md.split("\n").filter((l) => /^#{1,6} /.test(l)).map((l) => slug(l.replace(/^#+ /, ""))));
/** The /agents.md sections a room's instructions link to. */
const linkedSections = (md: string) => [...md.matchAll(/\/agents\.md#([a-z-]+)/g)].map((m) => m[1]!);

test("an open room's instructions: the loop, mentions, limits, errors and stop rules in at most 5 KB, and links to the rest", async (t) => {
  const long = await f.api.room({ description: "A".repeat(250) + " " + "b".repeat(249) });
  for (const uuid of [room.uuid, long.uuid]) {
    const md = await markdownOf(uuid);
    const size = Buffer.byteLength(md);
    t.diagnostic(`open room markdown: ${size} bytes`);
    assert.ok(size <= 5 * KB, `${size} bytes`);
    for (const needle of ["?since=0", "wait=25", "write `@name` in your text", "mentioning=your-name", "## Limits", "## Errors", "room_full", "room_expired", "room_not_found", "room_closed", "rate_limited", "Retry-After", "**Stop**"]) {
      assert.ok(md.includes(needle), `the open room's text has ${needle}`);
    }
    for (const absent of ["## Ledger", "## Tasks", "turns room", "/claims", "/tasks", "/turns/", "lease_token"]) {
      assert.ok(!md.includes(absent), `an open room without threads or tasks says nothing of ${absent}`);
    }
    assert.deepEqual(linkedSections(md).sort(), ["ledger", "signing", "tasks", "turns"]);
    for (const anchor of linkedSections(md)) assert.ok(md.includes(`${f.url}/agents.md#${anchor}`), `an absolute link to #${anchor}`);
  }
});

test("a room's instructions carry a short section for each thing the room uses", async (t) => {
  const base = (uuid: string) => `/api/rooms/${uuid}`;
  const ledger = await f.api.room();
  assert.equal((await f.api.post(`${base(ledger.uuid)}/claims`, { opened_by: "ana", subject: "Price", value: "10" })).status, 201);
  const tasks = await f.api.room();
  assert.equal((await f.api.post(`${base(tasks.uuid)}/tasks`, { agent_id: "ana", title: "Parse" })).status, 201);
  const board = await f.api.room();
  assert.equal((await f.api.post(`${base(board.uuid)}/agents`, { agent_id: "ana", capabilities: ["python"] })).status, 200);
  const turns = await f.api.room({ mode: "turns", turns: { participants: ["ana", "ben"] } });

  const cases: [string, string, string[], string[]][] = [
    ["ledger threads", ledger.uuid, ["## Ledger", "/claims/THREAD_ID/revisions", "/handshake", "stale_context_hash"], ["## Tasks", "turns room"]],
    ["tasks", tasks.uuid, ["## Tasks", "/tasks/claim-next", "LEASE_TOKEN", "capability_mismatch"], ["## Ledger", "turns room"]],
    ["agents on the board", board.uuid, ["## Tasks", "/tasks/claim-next"], ["## Ledger"]],
    ["turns", turns.uuid, ["## This is a turns room", "`ana`, `ben`", "/turns/mine?agent_id=YOU&wait=30", "/turns/TURN_ID/claim", "not_your_turn"], ["## Ledger", "## Tasks", "mentioning=your-name"]],
  ];
  for (const [what, uuid, present, absent] of cases) {
    const md = await markdownOf(uuid);
    t.diagnostic(`room with ${what}: ${Buffer.byteLength(md)} bytes`);
    for (const needle of present) assert.ok(md.includes(needle), `a room with ${what} has ${needle}`);
    for (const needle of absent) assert.ok(!md.includes(needle), `a room with ${what} has no ${needle}`);
    assert.match(md, /## Limits[\s\S]*## Errors[\s\S]*## More/, `${what}: limits, errors and the links follow`);
  }
  const turnsMd = await markdownOf(turns.uuid);
  assert.ok(turnsMd.includes(`${f.url}/agents.md#turns`), "the turns section links to the full one");
  assert.ok(!/-X POST '[^']+\/messages'/.test(turnsMd), "a turns room does not teach posting outside a turn");

  // A premium room (an arbiter writes the ledger) gets the ledger even before any thread exists.
  const premium = roomMarkdown({ url: `${f.url}/${room.uuid}`, uuid: room.uuid, description: "", origin: f.url, messageCap: 1000, status: "open", protocolMode: "premium" });
  assert.ok(premium.includes("## Ledger") && premium.includes("An arbiter"));
  assert.ok(premium.includes(`${f.url}/agents.md#ledger`));
});

test("/agents.md has every section the rooms link to, in full", async () => {
  const md = await (await fetch(`${f.url}/agents.md`)).text();
  const anchors = anchorsOf(md);
  for (const anchor of ["ledger", "tasks", "turns", "signing"]) assert.ok(anchors.has(anchor), `/agents.md#${anchor} exists`);
  for (const [, target] of md.matchAll(/\]\(#([a-z0-9-]+)\)/g)) assert.ok(anchors.has(target!), `the in-page link #${target} has its heading`);
  const section = (heading: string) => md.slice(md.indexOf(`\n## ${heading}\n`), md.indexOf("\n## ", md.indexOf(`\n## ${heading}\n`) + 4));
  const full: Record<string, string[]> = {
    Ledger: ["/claims", "retract", "update", "disputed", "discrepancy", "/handshake", "stale_context_hash", "premium", "owner_cannot_confirm"],
    Tasks: ["/tasks/claim-next", "lease_token", "self_review", "needs_fix", "capabilities", "base_revision", "handoff", "/review", "max_failures"],
    Turns: ['"mode": "turns"', "/turns/mine", "turn_timeout_s", "absent_after", "supervisor", "consensus", "/turns/cancel", "my_turn", "claim: true", "reply_turn"],
    Signing: ["RFC 8785", "Ed25519", "nonce", "pubkey_hex", "5 minutes", "agent_key_mismatch"],
  };
  for (const [heading, needles] of Object.entries(full)) {
    const text = section(heading).replace(/\s+/g, " ");
    for (const needle of needles) assert.ok(text.includes(needle), `/agents.md#${slug(heading)} has ${needle}`);
  }
  // The rooms' links all land on one of these headings.
  for (const uuid of [room.uuid]) for (const anchor of linkedSections(await markdownOf(uuid))) assert.ok(anchors.has(anchor), anchor);
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
  // Every checkpoint the server signs is counted, by the thread that signed it. A write alone in its
  // transaction (a room's creation, a lone post) is signed on the main thread, not asked for ahead.
  const signed = (t: string, thread: string) => Number(new RegExp(`^parley_checkpoint_signatures_total\\{thread="${thread}"\\} (\\d+)$`, "m").exec(t)![1]);
  const posted = await f.api.room();
  const before = await (await fetch(`${f.url}/metrics`)).text();
  assert.equal((await f.api.post(`/api/rooms/${posted.uuid}/messages`, { agent_id: "ana", text: "counted" })).status, 201);
  await f.api.room();
  const after = await (await fetch(`${f.url}/metrics`)).text();
  assert.equal(signed(after, "main") - signed(before, "main"), 2, "the post and the room's creation: one checkpoint each, on the main thread");
  assert.equal(signed(after, "signer"), signed(before, "signer"), "nothing was asked of the signer's thread");
  await withApi({ PARLEY_TRUST_PROXY: "1", PARLEY_ADMIN_TOKEN: "admin-token-0123456789abcdef" }, async (proxied) => {
    assert.equal((await fetch(`${proxied.url}/metrics`)).status, 403);
    const admin = await fetch(`${proxied.url}/metrics`, { headers: { authorization: "Bearer admin-token-0123456789abcdef" } });
    assert.equal(admin.status, 200);
  });
});
