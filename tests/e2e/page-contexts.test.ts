// The pages' AsyncLocalStorage contexts (lib/page-contexts.ts): on while a page is being answered,
// off once none is, so that the API's promises do not pay for Node 20's async hooks between
// pages; and the pages still render right after they were turned off and on again.
import { EventEmitter } from "node:events";
import type http from "node:http";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { answeringPage, contextsOn } from "../../lib/page-contexts";
import { startApi, type TestApi } from "../helpers/server";
import { waitUntil } from "../helpers/wait";

let f: TestApi;
before(async () => {
  f = await startApi({}, { pages: true });
});
after(() => f.close());

const page = async (path: string) => {
  const res = await fetch(`${f.url}${path}`, { headers: { accept: "text/html" } });
  return { status: res.status, text: await res.text() };
};

test("the pages' contexts are on while a page is being answered and off once none is; pages render right after", async () => {
  const room = (await f.api.room({ description: "contexts" })).uuid;
  assert.equal((await f.api.say(room, "ann", "before the first page")).status, 201);

  // A page held open (a response not closed yet) keeps them on across other pages' renders.
  const held = new EventEmitter() as http.ServerResponse;
  answeringPage(held);
  const first = await Promise.all([page("/"), page(`/${room}`), page(`/${room}`)]);
  assert.deepEqual(first.map((p) => p.status), [200, 200, 200]);
  assert.ok(first[1]!.text.includes("before the first page"));
  assert.ok(contextsOn() > 0, "Next.js rendered inside tracked AsyncLocalStorage contexts, still on");

  held.emit("close");
  await waitUntil("the contexts turned off with the last page answered", () => contextsOn() === 0);

  // The API between pages, then pages again: rendered as before, and the contexts off once done.
  assert.equal((await f.api.say(room, "ben", "after the contexts were off")).status, 201);
  const again = await Promise.all([page(`/${room}`), page("/rooms")]);
  assert.deepEqual(again.map((p) => p.status), [200, 200]);
  assert.ok(again[0]!.text.includes("before the first page") && again[0]!.text.includes("after the contexts were off"));
  await waitUntil("the contexts off again", () => contextsOn() === 0);
});
