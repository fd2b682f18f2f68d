/**
 * The SQLite writer keeps the room rows it has read or written (lib/store/sqlite.ts, knownRooms):
 * a kept row must never outlive a change to it, whoever made it. Each case fails if one of the
 * ways a row is forgotten is missing.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { openSqliteStore } from "../../lib/store/sqlite";
import type { RoomRow } from "../../lib/store/types";
import { roomRow } from "../helpers/db";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-writer-rows-"));
const store = openSqliteStore(dir);
after(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const uuid = "0b5e1c0e-5d1e-4c55-9a43-3f1f2c7a9d10";
const room = roomRow({ uuid, description: "kept rows" });
const read = () => store.write([uuid], async (tx) => (await tx.getRoom(uuid))!);
/** Moves the head as a batch of appends does (the statement whose columns the writer keeps). */
const moveHead = (tx: Parameters<Parameters<typeof store.write>[1]>[0], r: RoomRow, headSize: number) =>
  tx.updateRoomsAfterAppend([[uuid, { ...r, headSize, messageCount: headSize }]]);

test("a head update is kept with exactly its columns; any other statement on the row makes it read again", async () => {
  await store.write([uuid], (tx) => tx.insertRoom(room));
  await store.write([uuid], async (tx) => moveHead(tx, (await tx.getRoom(uuid))!, 1));
  assert.equal((await read()).headSize, 1);
  // A column the head update does not write, changed in memory only: not what the database holds.
  await store.write([uuid], async (tx) => moveHead(tx, { ...(await tx.getRoom(uuid))!, description: "only in memory" }, 2));
  const kept = await read();
  assert.deepEqual([kept.headSize, kept.messageCount, kept.description], [2, 2, "kept rows"]);
  // Another statement of this writer (the arbiter's usage) changes the row.
  await store.write([uuid], async (tx) => {
    await tx.getRoom(uuid);
    await tx.updateArbiterState(uuid, { arbiterCalls: 7 });
    assert.equal((await tx.getRoom(uuid))!.arbiterCalls, 7, "seen inside the same transaction");
  });
  assert.equal((await read()).arbiterCalls, 7);
});

test("a row given out is a copy: changing it changes nothing kept", async () => {
  await store.write([uuid], async (tx) => {
    (await tx.getRoom(uuid))!.status = "closed";
  });
  assert.equal((await read()).status, "open");
});

test("a transaction or savepoint that rolls back leaves no row of its own behind", async () => {
  const before = (await read()).headSize;
  await assert.rejects(
    store.write([uuid], async (tx) => {
      await moveHead(tx, (await tx.getRoom(uuid))!, 99);
      assert.equal((await tx.getRoom(uuid))!.headSize, 99);
      throw new Error("rolled back");
    }),
    /rolled back/,
  );
  assert.equal((await read()).headSize, before);
  await store.write([uuid], async (tx) => {
    await assert.rejects(
      tx.savepoint(async () => {
        await tx.updateArbiterState(uuid, { arbiterCalls: 50 });
        assert.equal((await tx.getRoom(uuid))!.arbiterCalls, 50);
        throw new Error("rolled back");
      }),
      /rolled back/,
    );
    assert.equal((await tx.getRoom(uuid))!.arbiterCalls, 7);
  });
});

test("a commit made by another connection to the file (another process) is seen by the next write", async () => {
  assert.equal((await read()).status, "open");
  const other = new Database(path.join(dir, "parley.db"));
  try {
    other.prepare("UPDATE rooms SET status = 'closed', description = 'changed elsewhere' WHERE uuid = ?").run(uuid);
  } finally {
    other.close();
  }
  const seen = await read();
  assert.deepEqual([seen.status, seen.description], ["closed", "changed elsewhere"]);
});

test("a deleted room's row goes with it (its tombstone is read afresh)", async () => {
  await read();
  await store.write([uuid], (tx) => tx.deleteRoomData(uuid, true));
  const tomb = await read();
  assert.deepEqual([tomb.status, tomb.description, tomb.frontier], ["expired", "", ""]);
});
