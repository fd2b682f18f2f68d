/**
 * The attacks of SPEC 4.6 on a real SQLite file, and a demo room to run them on. Used by
 * `parley tamper-demo` and by the tests, so both exercise exactly the same attacks.
 */
import { eventFromRow } from "../lib/store/rows";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { loadConfig } from "../lib/config";
import { bytesToBase64, bytesToHex } from "../lib/log/bytes";
import { signCheckpoint } from "../lib/log/checkpoint";
import { eventLeafHash, signAgentWrite, ZERO_HASH_HEX } from "../lib/log/event";
import { frontierAppend, frontierRoot, frontierToText, type Frontier } from "../lib/log/merkle";
import { createServices } from "../lib/services";
import type { Services } from "../lib/services/context";
import { postMessage } from "../lib/services/messages";
import { createRoom } from "../lib/services/rooms";
import { loadOrCreateServerKey, serverKeyFromSeed } from "../lib/services/server-key";
import { openSqliteStore } from "../lib/store/sqlite";
import type { EventRow } from "../lib/store/types";

export interface DemoRoom {
  svc: Services;
  dbFile: string;
  room: string;
  /** Seq of alice's signed message, the one the attacks edit. */
  signedSeq: number;
  /** A checkpoint an agent kept from its last receipt. */
  keptCheckpoint: string;
  close(): Promise<void>;
}

const caller = { ip: "demo", origin: "http://localhost" };
const NO_LIMITS = { PARLEY_RATE_ROOMS_PER_HOUR: "0", PARLEY_RATE_POSTS_PER_MINUTE: "0", PARLEY_RATE_AGENT_POSTS_PER_MINUTE: "0", PARLEY_RATE_REQUESTS_PER_MINUTE: "0" };

/** A room in a fresh temporary database: a signed agent, unsigned agents, and a kept receipt. */
export async function buildDemoRoom(): Promise<DemoRoom> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-demo-"));
  const config = loadConfig({ ...NO_LIMITS, PARLEY_DATA_DIR: dataDir });
  const store = openSqliteStore(dataDir);
  const svc = createServices(config, store, loadOrCreateServerKey(config.keyFile, config.keyName));
  const room = (await createRoom(svc, caller, { description: "Tamper demo: agree on a delivery date", is_public: false, protocol_mode: "standard", mode: "open" })).uuid;
  const alice = serverKeyFromSeed(crypto.randomBytes(32), "alice"); // any Ed25519 signer will do
  const signed = (text: string) =>
    signAgentWrite(alice, { room, type: "message.posted", actor: "alice", payload: { text }, ts: new Date(svc.clock.now()).toISOString(), nonce: crypto.randomBytes(12).toString("hex") });
  const say = (agent_id: string, text: string, sig?: ReturnType<typeof signed>) => postMessage(svc, caller, room, { agent_id, text, sig });
  await say("bob", "We need the parts by Friday.");
  const aliceMsg = await say("alice", "I can deliver on 1 December.", signed("I can deliver on 1 December."));
  await say("bob", "Agreed: 1 December.");
  const kept = await say("alice", "Confirmed, 1 December.", signed("Confirmed, 1 December."));
  await say("carol", "Noted.");
  await say("bob", "Thanks both.");
  return {
    svc,
    dbFile: path.join(dataDir, "parley.db"),
    room,
    signedSeq: aliceMsg.id,
    keptCheckpoint: kept.receipt.checkpoint,
    close: () => store.close(),
  };
}

type Db = Database.Database;
const open = (demo: DemoRoom): Db => new Database(demo.dbFile);

function editText(db: Db, room: string, seq: number, text: string): void {
  db.prepare("UPDATE events SET payload = json_set(payload, '$.text', ?) WHERE room = ? AND seq = ?").run(text, room, seq);
  db.prepare("UPDATE messages SET text = ? WHERE room = ? AND seq = ?").run(text, room, seq);
}

/**
 * What an attacker holding the server key does after changing the log: recompute every leaf hash
 * and prev link, re-sign every checkpoint and move the head, so the log is consistent in itself.
 */
function rebuildChain(demo: DemoRoom, db: Db): void {
  const rows = db.prepare("SELECT * FROM events WHERE room = ? ORDER BY seq").all(demo.room) as Record<string, unknown>[];
  const update = db.prepare("UPDATE events SET seq = ?, prev = ?, leaf_hash = ?, checkpoint = ? WHERE room = ? AND seq = ?");
  const updateMessage = db.prepare("UPDATE messages SET seq = ?, hash = ? WHERE room = ? AND seq = ?");
  let prev = ZERO_HASH_HEX;
  let frontier: Frontier = [];
  let checkpoint = "";
  rows.forEach((raw, i) => {
    const row = { ...raw, leafHash: raw.leaf_hash } as unknown as EventRow;
    const event = { ...eventFromRow(row), seq: i + 1, prev };
    const leaf = eventLeafHash(event);
    frontier = frontierAppend(frontier, i, leaf);
    const k = demo.svc.key;
    checkpoint = signCheckpoint({ origin: `${demo.svc.originHost}/room/${demo.room}`, size: i + 1, root: frontierRoot(frontier), keyName: k.keyName, pubkey: k.pubkey, sign: k.sign });
    update.run(i + 1, prev, bytesToHex(leaf), checkpoint, demo.room, row.seq);
    updateMessage.run(i + 1, bytesToHex(leaf), demo.room, row.seq);
    prev = bytesToHex(leaf);
  });
  const messageCount = (db.prepare("SELECT count(*) AS n FROM messages WHERE room = ?").get(demo.room) as { n: number }).n;
  db.prepare("UPDATE rooms SET head_size = ?, head_leaf = ?, head_root = ?, frontier = ?, checkpoint = ?, message_count = ? WHERE uuid = ?")
    .run(rows.length, prev, bytesToBase64(frontierRoot(frontier)), frontierToText(frontier), checkpoint, messageCount, demo.room);
}

export interface Attack {
  id: string;
  title: string;
  /** What should catch it. */
  caughtBy: string;
  /** Verify with the agent's kept checkpoint (needed for (b) and (d)). */
  withKeptCheckpoint: boolean;
  run(demo: DemoRoom): void;
}

export const ATTACKS: Attack[] = [
  {
    id: "a",
    title: "edit a message in the database",
    caughtBy: "leaf hash, prev link and checkpoint roots",
    withKeptCheckpoint: false,
    run(demo) {
      const db = open(demo);
      editText(db, demo.room, demo.signedSeq, "I can deliver on 1 March.");
      db.close();
    },
  },
  {
    id: "b",
    title: "edit it, recompute every hash and re-sign every checkpoint with the server key",
    caughtBy: "the agent's signature and the checkpoint the agent kept",
    withKeptCheckpoint: true,
    run(demo) {
      const db = open(demo);
      editText(db, demo.room, demo.signedSeq, "I can deliver on 1 March.");
      rebuildChain(demo, db);
      db.close();
    },
  },
  {
    id: "c",
    title: "delete an event in the middle",
    caughtBy: "sequence, prev link and checkpoints",
    withKeptCheckpoint: false,
    run(demo) {
      const db = open(demo);
      db.prepare("DELETE FROM events WHERE room = ? AND seq = ?").run(demo.room, 3);
      db.prepare("DELETE FROM messages WHERE room = ? AND seq = ?").run(demo.room, 3);
      db.close();
    },
  },
  {
    id: "d",
    title: "cut the tail and re-sign, so the shorter log is consistent in itself",
    caughtBy: "the checkpoint the agent kept",
    withKeptCheckpoint: true,
    run(demo) {
      const db = open(demo);
      const size = (db.prepare("SELECT head_size AS n FROM rooms WHERE uuid = ?").get(demo.room) as { n: number }).n;
      db.prepare("DELETE FROM events WHERE room = ? AND seq > ?").run(demo.room, size - 3);
      db.prepare("DELETE FROM messages WHERE room = ? AND seq > ?").run(demo.room, size - 3);
      rebuildChain(demo, db);
      db.prepare("UPDATE rooms SET agent_count = (SELECT count(DISTINCT agent_id) FROM messages WHERE room = ?) WHERE uuid = ?").run(demo.room, demo.room);
      db.close();
    },
  },
  {
    id: "e",
    title: "edit a projection only (the messages table)",
    caughtBy: "projection replay",
    withKeptCheckpoint: false,
    run(demo) {
      const db = open(demo);
      db.prepare("UPDATE messages SET text = ? WHERE room = ? AND seq = ?").run("I can deliver on 1 March.", demo.room, demo.signedSeq);
      db.close();
    },
  },
];
