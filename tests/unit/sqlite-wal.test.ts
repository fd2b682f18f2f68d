/**
 * The SQLite store's WAL stays bounded under a steady write load: its checkpointer thread backfills
 * the WAL and restarts it between two write transactions (lib/store/sqlite.ts, startCheckpointer),
 * and it leaves a small WAL alone (copying it would make the next commit restart it, with an fsync),
 * while the write connection's own checkpoint only starts at about 200 MB. The WAL file never
 * shrinks, so its size after the load is the most it held; without the restarts it would hold
 * everything written here.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { openSqliteStore } from "../../lib/store/sqlite";
import type { Store } from "../../lib/store/repository";
import { roomRow } from "../helpers/db";

const MB = 1024 * 1024;
/** A room row carrying about 256 KB (its description): 100 MB of WAL in 400 writes. */
const bigRoom = () => roomRow({ description: crypto.randomBytes(128 * 1024).toString("hex") });

/** Writes `megabytes` of rows at about 40 MB/s (a heavy load, which the checkpointer keeps up with). */
async function writeLoad(store: Store, megabytes: number): Promise<string[]> {
  const uuids: string[] = [];
  for (let i = 0; i < megabytes * 4; i++) {
    const room = bigRoom();
    await store.write([room.uuid], (tx) => tx.insertRoom(room));
    uuids.push(room.uuid);
    await sleep(6);
  }
  return uuids;
}

function withStore(fn: (store: Store, wal: () => number, dir: string) => Promise<void>) {
  return async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-wal-"));
    const store = openSqliteStore(dir);
    try {
      await fn(store, () => fs.statSync(path.join(dir, "parley.db-wal")).size, dir);
    } finally {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };
}

test("100 MB written at a steady rate leave a WAL of well under half that", withStore(async (store, wal) => {
  const uuids = await writeLoad(store, 100);
  assert.ok(wal() < 48 * MB, `the WAL grew to ${(wal() / MB).toFixed(0)} MB`);
  const rows = await store.getRooms([uuids[0]!, uuids.at(-1)!]);
  assert.equal(rows.length, 2, "the first and the last row written are both there");
}));

test("a snapshot held through the load keeps what it saw; once it ends the WAL is restarted again", withStore(async (store, wal) => {
  const before = bigRoom();
  await store.write([before.uuid], (tx) => tx.insertRoom(before));
  let during: string[] = [];
  const seen = await store.snapshot(async (reader) => {
    const first = await reader.getRoom(before.uuid); // the snapshot begins with its first read
    during = await writeLoad(store, 40);
    return [first, await reader.getRoom(during[0]!), await reader.getRoom(during.at(-1)!)].map((row) => row?.uuid);
  });
  assert.deepEqual(seen, [before.uuid, undefined, undefined], "the snapshot sees the row written before it, and none written after it began");
  assert.equal((await store.getRooms(during)).length, during.length, "every row written while the snapshot was held is there");
  // Kept from restarting while the snapshot was held, the WAL holds at least what was written then.
  const held = wal();
  assert.ok(held >= 40 * MB, `the WAL held ${(held / MB).toFixed(0)} MB`);
  await writeLoad(store, 60);
  assert.ok(wal() < held + 40 * MB, `restarted once the snapshot ended, the WAL grew from ${(held / MB).toFixed(0)} to ${(wal() / MB).toFixed(0)} MB`);
}));

/** The WAL's last frame and the frames checkpoints have copied, from the wal-index header of the -shm file (https://www.sqlite.org/walformat.html). */
function walIndex(dir: string): { frames: number; copied: number } {
  const header = Buffer.alloc(100);
  const fd = fs.openSync(path.join(dir, "parley.db-shm"), "r");
  try {
    fs.readSync(fd, header, 0, 100, 0);
  } finally {
    fs.closeSync(fd);
  }
  const read = (at: number) => (os.endianness() === "LE" ? header.readUInt32LE(at) : header.readUInt32BE(at));
  return { frames: read(16), copied: read(96) };
}

test("a small WAL is left alone (copied to its end, the next write would restart it and fsync on the main thread); past 1,000 pages it is copied", withStore(async (store, _wal, dir) => {
  for (let i = 0; i < 5; i++) {
    const room = roomRow();
    await store.write([room.uuid], (tx) => tx.insertRoom(room));
    await sleep(150); // the checkpointer looks every 100 ms
  }
  const small = walIndex(dir);
  assert.ok(small.frames > 0, "the writes are in the WAL");
  assert.equal(small.copied, 0, `none of its ${small.frames} frames were copied`);
  // Past 1,000 pages (4 MB of room rows), the next look copies them.
  for (let i = 0; i < 20; i++) {
    const room = bigRoom();
    await store.write([room.uuid], (tx) => tx.insertRoom(room));
  }
  const deadline = Date.now() + 5_000;
  while (walIndex(dir).copied === 0 && Date.now() < deadline) await sleep(50);
  const big = walIndex(dir);
  assert.ok(big.frames >= 1_000 && big.copied > 0, `${big.copied} of ${big.frames} frames copied`);
}));

test("the checkpointer thread does not keep a process alive: one that opens the store and never closes it exits", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-wal-exit-"));
  try {
    const store = pathToFileURL(path.resolve(import.meta.dirname, "../../lib/store/sqlite.ts")).href;
    const script = `import(${JSON.stringify(store)}).then(async ({ openSqliteStore }) => { await openSqliteStore(${JSON.stringify(dir)}).getRoom("none"); console.log("opened"); });`;
    const r = spawnSync(process.execPath, ["--import", "tsx", "-e", script], { encoding: "utf8", timeout: 30_000 });
    assert.equal(r.stdout.trim(), "opened", r.stderr);
    assert.deepEqual([r.signal, r.status], [null, 0], "it exited by itself, not killed at the time limit");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
