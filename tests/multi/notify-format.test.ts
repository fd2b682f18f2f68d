// The wake-ups instances send each other over PostgreSQL's NOTIFY, heard by a real LISTEN
// connection: announcements of other instances wake their rooms' readers, an instance's own are
// skipped, an older release's bare array of heads (a rolling deploy) is heard, and anything else
// on the channel wakes nothing and breaks nothing after it.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import pg from "pg";
import { listenForCommits, type CommitListener } from "../../lib/realtime/pg-listen";
import { Notifier } from "../../lib/realtime/notifier";
import { NOTIFY_CHANNEL } from "../../lib/store/pg";
import { testDatabase } from "../helpers/pg";
import { waitUntil } from "../helpers/wait";

let sender: pg.Client;
let listener: CommitListener;
const heard: [string, number][] = [];

before(async () => {
  const url = await testDatabase();
  const notifier = new Notifier();
  notifier.subscribeAll((room, seq) => heard.push([room, seq]));
  listener = await listenForCommits(url, "self-origin", notifier, async () => undefined, () => {});
  sender = new pg.Client({ connectionString: url });
  await sender.connect();
});
after(async () => {
  await sender.end();
  await listener.close();
});

const announce = (payload: string) => sender.query("SELECT pg_notify($1, $2)", [NOTIFY_CHANNEL, payload]);

test("each form of payload on the channel, in order: only other instances' heads are published", async () => {
  assert.equal(listener.connected, true);
  await announce(JSON.stringify({ from: "self-origin", heads: [["own-room", 3]] }));
  await announce("not json");
  await announce(JSON.stringify({ heads: [["no-origin", 1]] }));
  await announce(JSON.stringify({ from: "other", heads: [["bad-seq", "7"]] }));
  await announce(JSON.stringify([["old-release", 5], ["old-release-2", 9]]));
  await announce(JSON.stringify({ from: "other", heads: [["new-release", 12]] }));
  // NOTIFYs of one session arrive in the order sent: the last one heard means every one was read.
  await waitUntil("the last announcement heard", () => heard.some(([room]) => room === "new-release"), 5_000);
  assert.deepEqual(heard, [
    ["old-release", 5],
    ["old-release-2", 9],
    ["new-release", 12],
  ]);
});
