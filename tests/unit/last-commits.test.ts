// The events a long-poll is woken with (lib/realtime/last-commits.ts): kept for waited-on rooms
// only, given only when they cover the reader's cursor, dropped when the head moves past them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { LastCommits } from "../../lib/realtime/last-commits";
import { Notifier, ROOM_GONE } from "../../lib/realtime/notifier";
import type { EventRow } from "../../lib/store/types";

const rows = (room: string, from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => ({ room, seq: from + i }) as EventRow);
const seqs = (r: readonly EventRow[] | undefined) => r?.map((row) => row.seq);

test("a waited-on room's last commit answers the cursors it covers, and only those", () => {
  const notifier = new Notifier();
  const last = new LastCommits(notifier);
  const stop = notifier.subscribe("a", () => {});
  last.committed(new Map([["a", { rows: rows("a", 11, 13) }], ["quiet", { rows: rows("quiet", 1, 2) }]]));
  assert.deepEqual(seqs(last.after("a", 10)), [11, 12, 13], "from the commit's base");
  assert.deepEqual(seqs(last.after("a", 12)), [13], "from inside it");
  assert.equal(last.after("a", 9), undefined, "a cursor before the commit: the store has event 10");
  assert.equal(last.after("a", 13), undefined, "at the head: nothing to give");
  assert.equal(last.after("quiet", 0), undefined, "nobody waited on it: not kept");
  // Its own wake-up (the commit's head) keeps it; a later head (another instance's) drops it.
  notifier.publish("a", 13);
  assert.deepEqual(seqs(last.after("a", 10)), [11, 12, 13]);
  notifier.publish("a", 14);
  assert.equal(last.after("a", 10), undefined);
  last.committed(new Map([["a", { rows: rows("a", 15, 15) }]]));
  notifier.publish("a", ROOM_GONE);
  assert.equal(last.after("a", 14), undefined, "a deleted room gives nothing");
  // A commit when nobody waits any more drops the older one.
  last.committed(new Map([["a", { rows: rows("a", 16, 16) }]]));
  stop();
  last.committed(new Map([["a", { rows: rows("a", 17, 17) }]]));
  assert.equal(last.after("a", 15), undefined);
  assert.equal(last.after("a", 16), undefined);
});
