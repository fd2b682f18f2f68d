// Group commit (lib/services/events.ts queuedWrite): writes queued in one turn share a transaction,
// and one that fails rolls back only itself. On PostgreSQL the batch first runs without savepoints
// (lib/store/pg.ts): a write that fails after writing makes the whole batch run again with them,
// one that fails on a check before writing costs nothing. Runs on both backends.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ParleyError } from "../../lib/errors";
import { queuedWrite } from "../../lib/services/events";
import { appendMessage } from "../../lib/services/messages";
import { requireOpenRoom } from "../../lib/services/access";
import { pinnedKey } from "../../lib/services/signatures";
import { startApi, TEST_BACKEND, type TestApi } from "../helpers/server";
import { parseCheckpoint, verifyCheckpoint } from "../../lib/log/checkpoint";
import { nobleVerify } from "../../lib/log/ed25519";
import { hexToBytes } from "../../lib/log/bytes";

let f: TestApi;
before(async () => (f = await startApi()));
after(() => f.close());

/**
 * Counts the store's transactions that lock `room` while `fn` runs; with `firstHeld`, the first of
 * them starts once it resolves. The server's own timers (webhook claims, pruning) write now and
 * then too: they lock no room of the test's, so they are not counted.
 */
async function countingTransactions<T>(room: string, fn: () => Promise<T>, firstHeld?: Promise<void>): Promise<{ value: T; transactions: number }> {
  const store = f.server.svc.store;
  const original = store.write.bind(store);
  let transactions = 0;
  store.write = ((...args: Parameters<typeof original>) => {
    if (!args[0].includes(room)) return original(...args);
    transactions++;
    if (firstHeld && transactions === 1) return firstHeld.then(() => original(...args));
    return original(...args);
  }) as typeof store.write;
  try {
    return { value: await fn(), transactions };
  } finally {
    store.write = original;
  }
}

/**
 * A post queued as the routes queue it. `fail`: "before" refuses it before it writes anything;
 * "held" after its rows were made (on PostgreSQL held back for the commit's one statement: a
 * message, and a new agent's row in a room this server created); "after" once it has also sent a
 * statement that writes (any: here one that marks the room's alerts webhooks, of which it has none).
 */
const post = (room: string, agent: string, text: string, fail?: "before" | "held" | "after") =>
  queuedWrite(f.server.svc, room, async (tx) => {
    if (fail === "before") throw new ParleyError("validation_error", "refused before writing");
    const current = await requireOpenRoom(f.server.svc, room, tx);
    const { message } = await appendMessage(f.server.svc, tx, current, agent, { text });
    if (fail === "held") throw new ParleyError("validation_error", "refused after its rows were held");
    if (fail === "after") {
      await tx.markExpiryAlerted(room, current.expiresAt);
      throw new ParleyError("validation_error", "refused after writing");
    }
    return message.id;
  });

async function newRoom(): Promise<string> {
  const r = await f.api.post("/api/rooms", {});
  assert.equal(r.status, 201);
  return r.body.uuid as string;
}

const texts = async (room: string) => ((await f.api.get(`/api/rooms/${room}/messages`)).body.messages as { text: string }[]).map((m) => m.text);

describe("group commit", () => {
  test("a write that fails after writing rolls back alone; the others commit, in order, with a verifiable history", async () => {
    const room = await newRoom();
    const { value, transactions } = await countingTransactions(room, () =>
      Promise.allSettled([post(room, "a", "first"), post(room, "b", "undone", "after"), post(room, "c", "third")]),
    );
    assert.equal(value[0].status, "fulfilled", String((value[0] as PromiseRejectedResult).reason?.stack));
    assert.equal(value[1].status, "rejected");
    assert.match(String((value[1] as PromiseRejectedResult).reason.detail), /after writing/);
    assert.equal(value[2].status, "fulfilled");
    assert.deepEqual(await texts(room), ["first", "third"]);
    // PostgreSQL ran the batch again with savepoints; SQLite's savepoints cost nothing and are always on.
    assert.equal(transactions, TEST_BACKEND === "postgres" ? 2 : 1);
    const seqs = value.filter((v) => v.status === "fulfilled").map((v) => (v as PromiseFulfilledResult<number>).value);
    assert.deepEqual(seqs, [2, 3]);
    const verified = await f.api.post(`/api/rooms/${room}/verify`, {});
    assert.equal(verified.status, 200);
    assert.equal(verified.body.verdict, "CLEAN");
  });

  test("a batch whose first write into a room fails after writing: the room's pending head goes with it, the next write starts it again", async () => {
    const room = await newRoom();
    const value = await Promise.allSettled([post(room, "a", "undone", "after"), post(room, "b", "kept"), post(room, "c", "also kept")]);
    assert.deepEqual(value.map((v) => v.status), ["rejected", "fulfilled", "fulfilled"]);
    assert.deepEqual(value.slice(1).map((v) => (v as PromiseFulfilledResult<number>).value), [2, 3]);
    assert.deepEqual(await texts(room), ["kept", "also kept"]);
    assert.equal((await f.api.get(`/api/rooms/${room}`)).body.head.size, 3);
    assert.equal((await f.api.post(`/api/rooms/${room}/verify`, {})).body.verdict, "CLEAN");
  });

  test("a batch over several rooms: each room's checkpoint (asked of the signer's thread ahead: on SQLite for all but the last room) verifies at the room's last size", async () => {
    const rooms = [await newRoom(), await newRoom(), await newRoom(), await newRoom()];
    const key = (await f.api.get("/api/server-key")).body;
    const serverKey = { keyName: key.key_name as string, pubkey: hexToBytes(key.pubkey_hex as string) };
    await post(rooms[0]!, "warm", "up");
    const signed = (room: string, agent: string, text: string, fail?: "after") =>
      queuedWrite(f.server.svc, room, async (tx) => {
        const current = await requireOpenRoom(f.server.svc, room, tx);
        const { appended } = await appendMessage(f.server.svc, tx, current, agent, { text });
        if (fail) {
          await tx.markExpiryAlerted(room, current.expiresAt);
          throw new ParleyError("validation_error", "refused after writing");
        }
        return appended.receipt;
      });
    const [a, b, c, d] = rooms as [string, string, string, string];
    const askedBefore = f.server.svc.key.signerCounts().asked;
    // Room a's last write comes early, b's later: both signed ahead; d (a failing write, which on
    // PostgreSQL runs the whole batch again with fresh heads) and c last.
    const outcomes = await Promise.allSettled([signed(a, "ann", "a1"), signed(b, "bo", "b1"), signed(a, "cy", "a2"), signed(b, "di", "b2"), signed(d, "ed", "d1", "after"), signed(c, "fi", "c1")]);
    assert.deepEqual(outcomes.map((o) => o.status), ["fulfilled", "fulfilled", "fulfilled", "fulfilled", "rejected", "fulfilled"]);
    const receipts = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));
    // A room's log opens with its creation; room a also holds the warm-up post.
    const lastSize = { [a]: 4, [b]: 3, [c]: 2 } as Record<string, number>;
    for (const [i, room] of [a, b, a, b, c].entries()) {
      const receipt = receipts[i]!;
      const checked = verifyCheckpoint(receipt.checkpoint, serverKey, nobleVerify);
      assert.equal(checked.ok, true, `${room}: ${checked.reason}`);
      assert.equal(checked.parsed!.origin, `localhost/room/${room}`);
      assert.equal(checked.parsed!.size, lastSize[room], "the batch's last size of the room");
      const head = (await f.api.get(`/api/rooms/${room}`)).body.head;
      assert.equal(head.size, lastSize[room]);
      assert.equal(head.checkpoint, receipt.checkpoint);
      assert.equal(Buffer.from(parseCheckpoint(head.checkpoint)!.root).toString("base64"), head.root);
      assert.equal((await f.api.post(`/api/rooms/${room}/verify`, {})).body.verdict, "CLEAN");
    }
    assert.equal((await f.api.get(`/api/rooms/${d}`)).body.head.size, 1);
    // Rooms a and b were signed ahead (d's write failed; c's came last: on SQLite signed on the
    // spot), and on PostgreSQL, whose batch then waits for the thread, a, b and c again in the
    // batch's second run.
    assert.equal(f.server.svc.key.signerCounts().asked - askedBefore, TEST_BACKEND === "postgres" ? 5 : 2);
  });

  test("at most two batches commit at once: writes that arrive meanwhile, in other turns and other rooms, wait and go in one batch", async () => {
    const rooms = await Promise.all(Array.from({ length: 12 }, () => newRoom()));
    const store = f.server.svc.store;
    const original = store.write.bind(store);
    let open = 0;
    let most = 0;
    let transactions = 0;
    // Every transaction held open until the last post has arrived, as a slow database would: posts
    // keep arriving meanwhile (a fixed hold raced the turns on a busy machine).
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    // Only the test's rooms' transactions: the server's own timers' (webhook claims) lock none.
    store.write = (async (...args: Parameters<typeof original>) => {
      if (!args[0].some((room) => rooms.includes(room))) return original(...args);
      transactions++;
      most = Math.max(most, ++open);
      try {
        await held;
        return await original(...args);
      } finally {
        open--;
      }
    }) as typeof store.write;
    const posted: Promise<number>[] = [];
    try {
      // One post a turn, each into a room of its own: without the cap, one transaction each.
      for (const [i, room] of rooms.entries()) {
        posted.push(post(room, `agent-${i}`, `post ${i}`));
        await new Promise((resolve) => setImmediate(resolve));
      }
      release();
      const seqs = await Promise.all(posted);
      assert.deepEqual(seqs, rooms.map(() => 2), "every post committed, each its room's first message");
    } finally {
      store.write = original;
    }
    assert.equal(most, 2, "two batches committed side by side, never more");
    assert.equal(transactions, 3, "the ten posts that waited went in one batch, after the two held");
    for (const [i, room] of rooms.entries()) assert.deepEqual(await texts(room), [`post ${i}`]);
    assert.equal((await f.api.post(`/api/rooms/${rooms[11]}/verify`, {})).body.verdict, "CLEAN");
  });

  test("a write refused before it wrote costs the batch nothing", async () => {
    const room = await newRoom();
    const { value, transactions } = await countingTransactions(room, () =>
      Promise.allSettled([post(room, "a", "one"), post(room, "b", "never", "before"), post(room, "c", "two")]),
    );
    assert.deepEqual(value.map((v) => v.status), ["fulfilled", "rejected", "fulfilled"]);
    assert.equal(transactions, 1);
    assert.deepEqual(await texts(room), ["one", "two"]);
  });

  test("writes to a room whose batch is still committing wait and share the next batch, in order", async () => {
    const room = await newRoom();
    // PostgreSQL's commit takes round trips, which may end within five turns of the event loop on a
    // fast day: the first transaction is held until the five later writes have arrived.
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const { value: ids, transactions } = await countingTransactions(room, async () => {
      const all = [post(room, "ann", "first")];
      // One more write on each of the next five turns of the event loop.
      for (let i = 0; i < 5; i++) {
        await new Promise((resolve) => setImmediate(resolve));
        all.push(post(room, "ann", `later ${i}`));
      }
      release();
      return Promise.all(all);
    }, TEST_BACKEND === "postgres" ? held : undefined);
    assert.deepEqual(ids, ids.map((_, i) => ids[0]! + i), "contiguous ids, in the order written");
    assert.deepEqual(await texts(room), ["first", "later 0", "later 1", "later 2", "later 3", "later 4"]);
    // On PostgreSQL the five wait for the first batch's commit and go in one batch. SQLite commits
    // within its turn, so each later write finds the room free and commits alone.
    assert.equal(transactions, TEST_BACKEND === "postgres" ? 2 : 6);
  });

  test("a write that fails after its rows were held back leaves no trace, without running the batch again", async () => {
    const room = await newRoom();
    await post(room, "ann", "known");
    const agents = async () => (await f.api.get(`/api/rooms/${room}`)).body.agent_count as number;
    // Bob is new to the room: on PostgreSQL his row is held back too (this server created the room
    // and knows all its agents), and goes with his failed write.
    const { value, transactions } = await countingTransactions(room, () =>
      Promise.allSettled([post(room, "ann", "one"), post(room, "bob", "undone", "held"), post(room, "ann", "two"), post(room, "ann", "again", "held")]),
    );
    assert.deepEqual(value.map((v) => v.status), ["fulfilled", "rejected", "fulfilled", "rejected"]);
    assert.deepEqual(value.filter((v) => v.status === "fulfilled").map((v) => (v as PromiseFulfilledResult<number>).value), [3, 4]);
    assert.equal(transactions, 1);
    assert.deepEqual(await texts(room), ["known", "one", "two"]);
    assert.equal(await agents(), 1);
    // Bob is still new: his next post counts him (and writes his row), one later does not again.
    await post(room, "bob", "here");
    assert.equal(await agents(), 2);
    await Promise.all([post(room, "bob", "more"), post(room, "cy", "first"), post(room, "cy", "second")]);
    assert.equal(await agents(), 3);
    assert.equal((await f.api.post(`/api/rooms/${room}/verify`, {})).body.verdict, "CLEAN");
  });

  test("what one write of a batch changes, the next write of the batch sees: its message, a pinned key, a webhook, the room row", async () => {
    const [room, other] = [await newRoom(), await newRoom()];
    const svc = f.server.svc;
    const key = "ab".repeat(32);
    const [first, , seen, calls] = await Promise.all([
      queuedWrite(svc, room, async (tx) => {
        const current = await requireOpenRoom(svc, room, tx);
        const { message } = await appendMessage(svc, tx, current, "ann", { text: "first" });
        await tx.pinAgentKey(room, "ann", key);
        await tx.insertWebhook({
          id: crypto.randomUUID(), room, kind: "events", url: "https://example.com/hook", events: null, format: "json", mentioning: null,
          roomUrl: `http://localhost/${room}`, secretHash: "x", createdAt: tx.now, consecutiveDead: 0, disabledAt: null, disabledReason: null, expiryAlertedFor: null,
        });
        return message.id;
      }),
      queuedWrite(svc, other, (tx) => tx.updateArbiterState(other, { arbiterCalls: 7 })),
      queuedWrite(svc, room, async (tx) => ({
        message: await tx.hasMessage(room, 2),
        key: await pinnedKey(tx, room, "ann"),
        webhooks: (await tx.listWebhooks(room)).length,
      })),
      queuedWrite(svc, other, async (tx) => (await tx.getRoom(other))?.arbiterCalls),
    ]);
    assert.equal(first, 2);
    assert.deepEqual(seen, { message: true, key, webhooks: 1 });
    assert.equal(calls, 7);
  });

  test("a nonce used before, in an earlier batch or earlier in the same batch, is refused alone", async () => {
    const room = await newRoom();
    const svc = f.server.svc;
    const use = (nonce: string) =>
      queuedWrite(svc, room, async (tx) => {
        const current = await requireOpenRoom(svc, room, tx);
        if (!(await tx.useNonce(room, "cd".repeat(32), nonce, current.headSize + 1))) throw new ParleyError("replayed_signature", `nonce ${nonce} was used`);
        return (await appendMessage(svc, tx, current, "ann", { text: nonce })).message.id;
      });
    await use("n1");
    const { value, transactions } = await countingTransactions(room, () => Promise.allSettled([use("n2"), use("n1"), use("n2"), use("n3")]));
    assert.deepEqual(value.map((v) => v.status), ["fulfilled", "rejected", "rejected", "fulfilled"]);
    assert.deepEqual(value.filter((v) => v.status === "rejected").map((v) => (v as PromiseRejectedResult).reason.code), ["replayed_signature", "replayed_signature"]);
    assert.deepEqual(await texts(room), ["n1", "n2", "n3"]);
    // PostgreSQL writes a batch's nonces with its commit: the one used in an earlier batch is found
    // there, and the batch runs again with savepoints. Within the batch, the second n2 is found at once.
    assert.equal(transactions, TEST_BACKEND === "postgres" ? 2 : 1);
    const twice = await countingTransactions(room, () => Promise.allSettled([use("n4"), use("n4")]));
    assert.deepEqual(twice.value.map((v) => v.status), ["fulfilled", "rejected"]);
    assert.equal(twice.transactions, 1);
  });

  test("a turns room's state saved by one write of a batch is what the next reads; a failed write's save is gone", async () => {
    const created = await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["a", "b"] } });
    assert.equal(created.status, 201);
    const room = created.body.uuid as string;
    const svc = f.server.svc;
    const before = (await svc.store.getTurnsRoom(room))!;
    const save = (round: number, fail?: boolean) =>
      queuedWrite(svc, room, async (tx) => {
        const current = (await tx.getTurnsRoom(room))!;
        await tx.saveTurnsRoom(room, { ...current, round });
        if (fail) throw new ParleyError("validation_error", "refused after saving");
        return (await tx.getTurnsRoom(room))!.round;
      });
    const read = () => queuedWrite(svc, room, async (tx) => (await tx.getTurnsRoom(room))!.round);
    const value = await Promise.allSettled([save(before.round + 5), read(), save(99, true), read()]);
    assert.deepEqual(value.map((v) => (v.status === "fulfilled" ? v.value : "rejected")), [before.round + 5, before.round + 5, "rejected", before.round + 5]);
    assert.equal((await svc.store.getTurnsRoom(room))!.round, before.round + 5);
  });

  test("an agent's first post rolled back leaves it unknown: its next post counts it, and later ones do not again", async () => {
    const room = (await f.api.room()).uuid;
    const agents = async () => (await f.api.get(`/api/rooms/${room}`)).body.agent_count as number;
    const first = await Promise.allSettled([post(room, "ann", "kept"), post(room, "bob", "rolled back", "after")]);
    assert.deepEqual(first.map((r) => r.status), ["fulfilled", "rejected"]);
    assert.equal(await agents(), 1);
    for (let i = 0; i < 3; i++) await Promise.all([post(room, "bob", `bob ${i}`), post(room, "ann", `ann ${i}`)]);
    assert.equal(await agents(), 2);
    await post(room, "cy", "new");
    assert.equal(await agents(), 3);
  });
});
