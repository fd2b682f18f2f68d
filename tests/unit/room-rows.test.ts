/**
 * The room rows kept in memory (lib/services/cache.ts RoomRows): how long a row is trusted, what
 * drops it, and its bound. A fake store counts the reads.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { RoomRows } from "../../lib/services/cache";
import { Notifier } from "../../lib/realtime/notifier";
import type { RoomRow } from "../../lib/store/types";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A store whose rooms all exist but those in `missing`; it records each room read and each statement. */
function fakeStore(protocolMode: (uuid: string) => string = () => "standard") {
  const statements: string[][] = [];
  const heads = new Map<string, number>();
  const missing = new Set<string>();
  let failNext = false;
  return {
    /** Every room read, in order (the statements' rooms). */
    get reads() {
      return statements.flat();
    },
    statements,
    heads,
    missing,
    failNextRead: () => (failNext = true),
    async getRooms(uuids: readonly string[]): Promise<RoomRow[]> {
      statements.push([...uuids]);
      await sleep(1);
      if (failNext) {
        failNext = false;
        throw new Error("the database went away");
      }
      return uuids.filter((uuid) => !missing.has(uuid)).map((uuid) => ({ uuid, protocolMode: protocolMode(uuid), headSize: heads.get(uuid) ?? 1 }) as RoomRow);
    },
  };
}

test("a standard room's row is trusted for the steady TTL, a premium room's (whose usage changes without its head) for the short one", async () => {
  const store = fakeStore((uuid) => (uuid.startsWith("p") ? "premium" : "standard"));
  const rows = new RoomRows(store, 100, 20, 10_000);
  await rows.get("s1");
  await rows.get("p1");
  await sleep(40);
  await rows.get("s1");
  await rows.get("p1");
  assert.deepEqual(store.reads, ["s1", "p1", "p1"]);
});

test("rows read together are read again spread over the last half of the TTL, not in one burst", async () => {
  const store = fakeStore();
  // The rows' draws in turn: 0 trusts a row for the whole TTL, 0.99 for just over half of it.
  let draw = 0;
  const rows = new RoomRows(store, 100, 20, 200, () => [0, 0.99][draw++ % 2]!);
  await Promise.all(["a", "b", "c", "d"].map((uuid) => rows.get(uuid)));
  store.statements.length = 0;
  await sleep(150);
  await Promise.all(["a", "b", "c", "d"].map((uuid) => rows.get(uuid)));
  assert.deepEqual(store.reads, ["b", "d"]);
});

test("a head move drops an older row, a missed-commits signal drops every row and the read under way", async () => {
  const store = fakeStore();
  const rows = new RoomRows(store, 100, 20, 10_000);
  const notifier = new Notifier();
  notifier.subscribeAll((room, seq) => rows.headMoved(room, seq));
  notifier.subscribeMissed(() => rows.forgetAll());

  assert.equal((await rows.get("a"))?.headSize, 1);
  await rows.get("b");
  store.heads.set("a", 2);
  notifier.publish("a", 2);
  assert.equal((await rows.get("a"))?.headSize, 2);
  assert.equal((await rows.get("a"))?.headSize, 2, "kept again once read at the new head");
  assert.deepEqual(store.reads, ["a", "b", "a"]);

  // Another instance's commits, unheard: nothing kept is trusted, nor a read that began before.
  store.heads.set("b", 5);
  const during = rows.get("c");
  notifier.missed();
  await during;
  assert.equal((await rows.get("b"))?.headSize, 5);
  await rows.get("c");
  assert.deepEqual(store.reads, ["a", "b", "a", "c", "b", "c"]);
});

test("at most maxRooms rows are kept, the one kept longest going first", async () => {
  const store = fakeStore();
  const rows = new RoomRows(store, 3, 20, 10_000);
  for (const uuid of ["a", "b", "c", "d"]) await rows.get(uuid);
  store.statements.length = 0;
  for (const uuid of ["b", "c", "d"]) await rows.get(uuid);
  assert.deepEqual(store.reads, []);
  await rows.get("a");
  assert.deepEqual(store.reads, ["a"]);
});

test("the misses of one event-loop turn are read by one statement; a failed read fails its callers and keeps nothing", async () => {
  const store = fakeStore();
  store.missing.add("gone");
  const rows = new RoomRows(store, 100, 20, 10_000);
  const got = await Promise.all(["a", "b", "a", "gone", "c"].map((uuid) => rows.get(uuid)));
  assert.deepEqual(got.map((row) => row?.uuid), ["a", "b", "a", undefined, "c"]);
  assert.deepEqual(store.statements, [["a", "b", "gone", "c"]], "one statement, each room once");
  await Promise.all(["a", "b", "c"].map((uuid) => rows.get(uuid)));
  assert.equal(store.statements.length, 1, "the rows found are kept");
  await rows.get("gone");
  assert.deepEqual(store.statements[1], ["gone"], "a room not found is not kept");

  store.failNextRead();
  const failed = await Promise.allSettled(["d", "e"].map((uuid) => rows.get(uuid)));
  assert.deepEqual(failed.map((r) => r.status), ["rejected", "rejected"]);
  assert.equal((await rows.get("d"))?.uuid, "d", "read again after the failure");
  assert.deepEqual(store.statements.slice(2), [["d", "e"], ["d"]]);
});
