// Which answers the API frame puts off to the end of the loop's poll phase (api/app.ts,
// endAfterReads in api/http.ts): a GET that does not wait, and nothing else. A long-poll's answer
// comes from a commit and a write's from its group commit; putting those off would delay delivery.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type http from "node:http";
import { startApi, type TestApi } from "../helpers/server";

let f: TestApi;
before(async () => (f = await startApi()));
after(() => f.close());

/** For each request of `send`: its method and path, and whether its response's end was put off. */
async function putOff(send: () => Promise<unknown>): Promise<Map<string, boolean>> {
  const seen = new Map<string, boolean>();
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) =>
    res.once("finish", () => seen.set(`${req.method} ${req.url}`, Object.hasOwn(res, "end")));
  f.server.server.on("request", onRequest);
  try {
    await send();
  } finally {
    f.server.server.off("request", onRequest);
  }
  return seen;
}

test("a GET that does not wait is answered at the end of the poll phase; a long-poll and a post are not", async () => {
  const room = (await f.api.room()).uuid as string;
  const path = `/api/rooms/${room}/messages`;
  const seen = await putOff(async () => {
    const quick = await f.api.get(`${path}?since=0`);
    assert.equal(quick.status, 200);
    const waiting = f.api.get(`${path}?since=1&wait=5`);
    const posted = await f.api.post(path, { agent_id: "a", text: "wakes the long-poll" });
    assert.equal(posted.status, 201);
    const woken = await waiting;
    assert.deepEqual([woken.status, woken.body.messages.map((m: { text: string }) => m.text)], [200, ["wakes the long-poll"]]);
  });
  assert.deepEqual(Object.fromEntries(seen), {
    [`GET ${path}?since=0`]: true,
    [`GET ${path}?since=1&wait=5`]: false,
    [`POST ${path}`]: false,
  });
});
