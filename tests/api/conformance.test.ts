// SPEC 2 and 3 conformance found missing by a hostile probe: room ids that are not exactly a UUID,
// and the readable API page.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startApi, type TestApi } from "../helpers/server";

let f: TestApi;
before(async () => {
  f = await startApi();
});
after(() => f.close());

describe("a room id is a UUID and nothing else", () => {
  test("every room route answers 400 invalid_uuid for a UUID with whitespace around it", async () => {
    const room = await f.api.room();
    const spec = (await f.api.get("/openapi.json")).body as { paths: Record<string, Record<string, unknown>> };
    const roomOps = Object.entries(spec.paths)
      .filter(([path]) => path.includes("{id}"))
      .flatMap(([path, ops]) => Object.keys(ops).map((method) => ({ method, path })));
    assert.ok(roomOps.length >= 45, `the API has its room routes (${roomOps.length})`);
    let checked = 0;
    for (const padded of [`%20${room.uuid}`, `${room.uuid}%20`, `%0A${room.uuid}`, `%09${room.uuid}`, `+${room.uuid}`]) {
      for (const { method, path } of roomOps) {
        const url = path.replace("{id}", padded).replace(/\{\w+\}/g, "1");
        const res = await fetch(f.url + url, {
          method: method.toUpperCase(),
          headers: { "content-type": "application/json", authorization: `Bearer ${room.owner_token}` },
          body: method === "get" || method === "delete" ? undefined : "{}",
        });
        const body = res.headers.get("content-type")?.includes("json") ? await res.json() : { code: await res.text() };
        // A body that fails its schema may be reported first; any other answer must be invalid_uuid.
        if (body.code === "validation_error") continue;
        assert.equal(body.code, "invalid_uuid", `${method.toUpperCase()} ${url}: ${JSON.stringify(body)}`);
        assert.equal(res.status, 400);
        checked++;
      }
    }
    assert.ok(checked >= 5 * 20, `most routes were checked without a body problem in the way (${checked})`);
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).body.head.size, 1, "the room is untouched (room.created only)");
  });

  test("upper case is still accepted and normalised", async () => {
    const room = await f.api.room();
    const r = await f.api.get(`/api/rooms/${room.uuid.toUpperCase()}`);
    assert.equal(r.status, 200);
    assert.equal(r.body.uuid, room.uuid);
  });
});

describe("/docs, the readable API page", () => {
  test("lists every operation of /openapi.json, with no script and a strict CSP", async () => {
    const res = await fetch(`${f.url}/docs`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type")!, /^text\/html/);
    const csp = res.headers.get("content-security-policy")!;
    assert.match(csp, /default-src 'none'/);
    assert.doesNotMatch(csp, /script-src|unsafe-inline|https?:/);
    const html = await res.text();
    assert.doesNotMatch(html, /<script|<link|src=/i, "nothing loaded from anywhere");
    const spec = (await f.api.get("/openapi.json")).body as { paths: Record<string, Record<string, unknown>> };
    let ops = 0;
    for (const [path, methods] of Object.entries(spec.paths)) {
      for (const method of Object.keys(methods)) {
        assert.ok(html.includes(`id="${method}-${path}"`), `${method} ${path} is on the page`);
        ops++;
      }
    }
    assert.ok(ops >= 50);
    assert.match(html, /<code>text<\/code><\/td><td><code>string<\/code><\/td><td>yes<\/td><td>1\.\.10000 characters/, "the message text's limits are shown");
    assert.match(html, /room_not_found/, "the error codes are listed");
  });

  test("the style is allowed by its hash, so the page renders styled under its CSP", async () => {
    const res = await fetch(`${f.url}/docs`);
    const html = await res.text();
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)![1]!;
    const { createHash } = await import("node:crypto");
    const hash = createHash("sha256").update(style).digest("base64");
    assert.ok(res.headers.get("content-security-policy")!.includes(`'sha256-${hash}'`));
  });
});
