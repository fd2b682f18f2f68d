// Three instances on one PostgreSQL behave as one service: every rule that holds on one process
// (seq without gaps, the cap, one winner per claim, one timeout, rate limits, wake-ups) holds across
// them, and a killed instance or a restarted database loses no acknowledged write.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import pg from "pg";
import { listeners, startCluster, stopAll, type Instance } from "../helpers/cluster";
import { startNginx } from "../helpers/nginx";
import { startEmbeddedPostgres, testDatabase, type EmbeddedPg } from "../helpers/pg";
import { client } from "../helpers/server";
import { openSse } from "../helpers/sse";
import { waitUntil } from "../helpers/wait";

type Api = Instance["api"];

/** Runs `jobs` with at most `width` at a time. */
async function pool<T>(width: number, jobs: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]!();
      }
    }),
  );
  return out;
}

/**
 * A watcher that comes back after its stream ends, with Last-Event-ID, as EventSource does; the
 * message seqs it received, in order.
 */
function watcher(url: string) {
  const seqs: number[] = [];
  let stopped = false;
  let current: Awaited<ReturnType<typeof openSse>> | undefined;
  const drain = () => {
    for (const e of current?.events.splice(0) ?? []) if (e.event === "message.posted") seqs.push(Number(e.id));
  };
  const timer = setInterval(drain, 20);
  const loop = (async () => {
    while (!stopped) {
      try {
        current = await openSse(url, seqs.length ? { "last-event-id": String(Math.max(...seqs)) } : {});
        if (current.res.status === 200) await current.ended;
        drain();
      } catch {
        /* the instance cannot answer right now: try again */
      }
      if (!stopped) await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return {
    seqs,
    async stop() {
      stopped = true;
      await current?.close();
      await loop;
      clearInterval(timer);
      drain();
    },
  };
}

const eventsOf = async (api: Api, room: string) => (await api.get(`/api/rooms/${room}/export`)).body.events as { seq: number; type: string; payload: Record<string, unknown> }[];
const verdictOn = async (api: Api, room: string) => (await api.post(`/api/rooms/${room}/verify`, {})).body.verdict as string;

describe("three instances on one database", () => {
  let cluster: Instance[];
  let A: Instance, B: Instance, C: Instance;
  before(async () => {
    cluster = await startCluster(await testDatabase(), 3, { PARLEY_ROOM_MESSAGE_CAP: "2000", PARLEY_TURN_SWEEP_INTERVAL: "200ms", PARLEY_SWEEP_INTERVAL: "300ms" });
    [A, B, C] = cluster as [Instance, Instance, Instance];
  });
  after(() => stopAll(cluster));

  test("a watcher on A receives every one of 1,000 posts made on C, none missing or duplicated, across a forced reconnect", async () => {
    const { uuid: room } = await A.api.room();
    let sse = await openSse(`${A.url}/api/rooms/${room}/events`);
    const seen: number[] = [];
    const collect = () => {
      for (const e of sse.events.splice(0)) if (e.event === "message.posted") seen.push(Number(e.id));
    };
    const posts = Array.from({ length: 1000 }, (_, i) => () => C.api.say(room, `agent-${i % 7}`, `message ${i}`));
    const acked: number[] = [];
    await pool(16, posts.slice(0, 500).map((p) => async () => acked.push((await p()).body.id as number)));
    // Forced reconnect: the watcher leaves and comes back with Last-Event-ID, as EventSource does.
    await waitUntil("the first half on the watcher", () => (collect(), seen.length === 500), 30_000);
    await sse.close();
    sse = await openSse(`${A.url}/api/rooms/${room}/events`, { "last-event-id": String(Math.max(...seen)) });
    await pool(16, posts.slice(500).map((p) => async () => acked.push((await p()).body.id as number)));
    await waitUntil("all 1,000 on the watcher", () => (collect(), seen.length >= 1000), 30_000);
    await sse.close();
    collect();
    assert.equal(acked.length, 1000);
    assert.equal(new Set(seen).size, seen.length, "no event delivered twice");
    assert.deepEqual([...seen].sort((a, b) => a - b), [...acked].sort((a, b) => a - b), "exactly the acknowledged posts");
    const events = await eventsOf(B.api, room);
    assert.deepEqual(events.map((e) => e.seq), Array.from({ length: 1001 }, (_, i) => i + 1), "seq without gaps");
  });

  test("a room's agents are counted once each whichever instance they post on (A, which created the room, knows its agents until B adds one)", async () => {
    const { uuid: room } = await A.api.room();
    const count = async (api: Api) => (await api.get(`/api/rooms/${room}`)).body.agent_count as number;
    assert.equal((await A.api.say(room, "ann", "one")).status, 201);
    assert.equal((await B.api.say(room, "bob", "two")).status, 201);
    // A knew ann alone; bob joined on B: A counts cy as the third and bob not again.
    await Promise.all([A.api.say(room, "cy", "three"), A.api.say(room, "bob", "four"), A.api.say(room, "ann", "five")]);
    await A.api.say(room, "bob", "six");
    await C.api.say(room, "cy", "seven");
    assert.equal(await count(A.api), 3);
    for (const api of [B.api, C.api]) await waitUntil("the count on every instance", async () => (await count(api)) === 3);
    assert.equal(await count(A.api), 3, "and it stays");
    const ids = (await A.api.get(`/api/rooms/${room}/messages`)).body.messages.map((m: { agent_id: string }) => m.agent_id);
    assert.equal(ids.length, 7);
  });

  test("a long-poll on B is woken by a post on C", async () => {
    const { uuid: room } = await A.api.room();
    const head = (await B.api.get(`/api/rooms/${room}`)).body.head.size as number;
    const parkedBefore = await listeners(B);
    const poll = B.api.get(`/api/rooms/${room}/messages?since=${head}&wait=25`);
    await waitUntil("the long-poll parked on B", async () => (await listeners(B)) > parkedBefore);
    const posted = await C.api.say(room, "carol", "wake up");
    const answer = await poll;
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body.messages.map((m: { id: number }) => m.id), [posted.body.id], "woken with the post, not by its timeout");
  });

  test("a room deleted on C is gone on A at once: its stream on A ends and A answers room_not_found", async () => {
    const room = await A.api.room();
    // A has read (and keeps) the room's row, and follows it live.
    assert.equal((await A.api.get(`/api/rooms/${room.uuid}/messages?since=0`)).status, 200);
    const stream = await openSse(`${A.url}/api/rooms/${room.uuid}/events?since=0`);
    await stream.waitFor(1);
    const gone = await C.api.del(`/api/rooms/${room.uuid}`, { authorization: `Bearer ${room.owner_token}` });
    assert.equal(gone.status, 200);
    // The deletion's NOTIFY reaches A with the commit; A keeps the row of a quiet room for 30 s
    // otherwise, longer than this waits.
    await waitUntil("A answering room_not_found", async () => (await A.api.get(`/api/rooms/${room.uuid}/messages?since=0`)).status === 404, 5_000);
    assert.equal((await A.api.get(`/api/rooms/${room.uuid}`)).body.code, "room_not_found");
    await stream.ended;
  });

  test("60 concurrent posts over the three into a room at cap - 20: exactly 20 stored, contiguous, CLEAN everywhere", async () => {
    const capped = await startCluster(await testDatabase(), 3, { PARLEY_ROOM_MESSAGE_CAP: "30" });
    try {
      const { uuid: room } = await capped[0]!.api.room();
      for (let i = 0; i < 10; i++) assert.equal((await capped[i % 3]!.api.say(room, "seed", `seed ${i}`)).status, 201);
      const results = await Promise.all(Array.from({ length: 60 }, (_, i) => capped[i % 3]!.api.say(room, `racer-${i}`, `race ${i}`)));
      assert.equal(results.filter((r) => r.status === 201).length, 20);
      assert.ok(results.filter((r) => r.status !== 201).every((r) => r.status === 429 && r.body.code === "room_full"));
      const events = await eventsOf(capped[1]!.api, room);
      assert.equal(events.filter((e) => e.type === "message.posted").length, 30);
      assert.deepEqual(events.map((e) => e.seq), Array.from({ length: events.length }, (_, i) => i + 1));
      for (const i of capped) assert.equal(await verdictOn(i.api, room), "CLEAN");
    } finally {
      await stopAll(capped);
    }
  });

  test("20 concurrent claims of one task over the three: exactly one winner", async () => {
    const { uuid: room } = await A.api.room();
    const task = (await A.api.post(`/api/rooms/${room}/tasks`, { agent_id: "boss", title: "one job" })).body.task;
    for (let i = 0; i < 20; i++) await cluster[i % 3]!.api.post(`/api/rooms/${room}/agents`, { agent_id: `w${i}`, capabilities: [] });
    const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => cluster[i % 3]!.api.post(`/api/rooms/${room}/tasks/${task.id}/claim`, { agent_id: `w${i}` })));
    const winners = claims.filter((r) => r.status === 200);
    assert.equal(winners.length, 1, JSON.stringify(claims.map((r) => r.body.code ?? r.status)));
    assert.ok(claims.filter((r) => r.status !== 200).every((r) => r.status === 409 && ["lease_conflict", "invalid_transition"].includes(r.body.code)));
    const claimed = (await eventsOf(C.api, room)).filter((e) => e.type === "task.claimed");
    assert.equal(claimed.length, 1);
    assert.equal((await B.api.get(`/api/rooms/${room}/tasks/${task.id}`)).body.claimant, winners[0]!.body.task.claimant);
  });

  test("20 concurrent claims of one turn over the three: one claim event, one lease token", async () => {
    const { uuid: room } = await A.api.room({ mode: "turns", turns: { participants: ["ann", "ben"] } });
    const turn = (await B.api.get(`/api/rooms/${room}/turns/current`)).body.current;
    const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => cluster[i % 3]!.api.post(`/api/rooms/${room}/turns/${turn.id}/claim`, { agent_id: "ann" })));
    assert.ok(claims.every((r) => r.status === 200), JSON.stringify(claims.map((r) => r.body.code ?? r.status)));
    assert.equal(new Set(claims.map((r) => r.body.lease_token)).size, 1, "a live re-claim returns the same token");
    assert.equal((await eventsOf(A.api, room)).filter((e) => e.type === "turn.claimed").length, 1);
  });

  test("with three timers running, one turn timeout gives exactly one turn.skipped", async () => {
    const { uuid: room } = await A.api.room({ mode: "turns", turns: { participants: ["ann", "ben"], turn_timeout_s: 10 } });
    const first = (await A.api.get(`/api/rooms/${room}/turns/current`)).body.current;
    await waitUntil("the timeout", async () => (await C.api.get(`/api/rooms/${room}/turns/current`)).body.current?.id !== first.id, 20_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // every timer has had its tries
    const events = await eventsOf(B.api, room);
    assert.equal(events.filter((e) => e.type === "turn.skipped").length, 1);
    assert.equal(events.filter((e) => e.type === "turn.opened").length, 2, "one next turn");
    assert.equal(await verdictOn(C.api, room), "CLEAN");
  });

  test("rate limits hold across the three: the budget of one client, not three", async () => {
    // One client, named by the proxy header every instance trusts (the start-up /health probes come from another).
    const limited = await startCluster(await testDatabase(), 3, { PARLEY_RATE_REQUESTS_PER_MINUTE: "30", PARLEY_TRUST_PROXY: "1" });
    try {
      const { uuid: room } = await limited[0]!.api.room();
      const t0 = Date.now();
      const me = { "x-forwarded-for": "10.9.9.9" };
      const answers = await pool(3, Array.from({ length: 60 }, (_, i) => () => limited[i % 3]!.api.get(`/api/rooms/${room}`, me)));
      const refillAllowance = Math.floor(((Date.now() - t0) / 60_000) * 30) + 1;
      const ok = answers.filter((r) => r.status === 200).length;
      assert.ok(ok >= 30 && ok <= 30 + refillAllowance, `${ok} of 60 answered within a budget of 30 (+${refillAllowance} refilled)`);
      assert.ok(answers.filter((r) => r.status !== 200).every((r) => r.status === 429 && r.body.code === "rate_limited"));
    } finally {
      await stopAll(limited);
    }
  });

  test("the loop guard counts a streak made over two instances: each judges by the room's last event, not by what it saw itself", async () => {
    const guarded = await startCluster(await testDatabase(), 2, { PARLEY_LOOP_GUARD_STREAK: "3", PARLEY_LOOP_GUARD_PAIR: "0" });
    try {
      const [a, b] = guarded as [Instance, Instance];
      const { uuid: room } = await a.api.room();
      const say = (on: Instance, agent: string) => on.api.say(room, agent, `${agent} on ${on.name} ${Math.random()}`);
      assert.equal((await say(a, "ann")).status, 201);
      assert.equal((await say(a, "ann")).status, 201);
      assert.equal((await say(b, "ann")).status, 201, "the third in a row, on the other instance");
      const refused = await say(a, "ann");
      assert.equal(refused.status, 429, "A knows of B's post");
      assert.equal(refused.body.code, "loop_guard");
      assert.equal((await say(b, "bob")).status, 201);
      assert.equal((await say(a, "ann")).status, 201, "and of B's answer");
    } finally {
      await stopAll(guarded);
    }
  });

  test("through nginx in front of the three: posts and a watcher spread over the upstreams", async (t) => {
    const lb = await startNginx(cluster.map((i) => i.port));
    if (!lb) return t.skip("nginx is not installed (.ci/run installs it)");
    try {
      const api = client(lb.url);
      const { uuid: room } = await api.room();
      const sse = await openSse(`${lb.url}/api/rooms/${room}/events`);
      const posted = await pool(6, Array.from({ length: 60 }, (_, i) => () => api.say(room, "nginx", `through the balancer ${i}`)));
      assert.ok(posted.every((r) => r.status === 201));
      await waitUntil("every post on the watcher", () => sse.events.filter((e) => e.event === "message.posted").length === 60, 20_000);
      await sse.close();
      assert.equal(await verdictOn(api, room), "CLEAN");
    } finally {
      await lb.stop();
    }
  });
});

test("with three sweepers running, an expired room is swept once: one tombstone, nothing left, 410 everywhere", async () => {
  const url = await testDatabase();
  const cluster = await startCluster(url, 3, { PARLEY_ROOM_IDLE_TTL: "2s", PARLEY_ROOM_MAX_TTL: "1h", PARLEY_SWEEP_INTERVAL: "200ms" });
  try {
    const { uuid: room } = await cluster[0]!.api.room();
    assert.equal((await cluster[1]!.api.say(room, "ann", "soon gone")).status, 201);
    await waitUntil("the sweep", async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        return (await c.query("SELECT 1 FROM rooms WHERE uuid = $1 AND status = 'expired'", [room])).rowCount === 1;
      } finally {
        await c.end();
      }
    }, 20_000);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      assert.equal((await c.query("SELECT count(*)::int AS n FROM rooms WHERE uuid = $1", [room])).rows[0].n, 1, "one tombstone");
      assert.equal((await c.query("SELECT count(*)::int AS n FROM events WHERE room = $1", [room])).rows[0].n, 0, "no events left");
      assert.equal((await c.query("SELECT count(*)::int AS n FROM messages WHERE room = $1", [room])).rows[0].n, 0, "no messages left");
    } finally {
      await c.end();
    }
    for (const i of cluster) assert.equal((await i.api.get(`/api/rooms/${room}`)).body.code, "room_expired");
  } finally {
    await stopAll(cluster);
  }
});

describe("failures", () => {
  test("an instance killed with SIGKILL mid-load loses no acknowledged write, and the others keep serving", async () => {
    const cluster = await startCluster(await testDatabase(), 3);
    try {
      const [A, B, C] = cluster as [Instance, Instance, Instance];
      const { uuid: room } = await A.api.room();
      const acked: number[] = [];
      let killed = false;
      const load = pool(8, Array.from({ length: 300 }, (_, i) => async () => {
        const target = [A, B, C][i % 3]!;
        if (target === B && killed) return;
        try {
          const r = await target.api.say(room, `agent-${i % 5}`, `load ${i}`);
          if (r.status === 201) acked.push(r.body.id);
        } catch {
          /* B died under this request: not acknowledged */
        }
        if (i === 120) {
          killed = true;
          await B.kill();
        }
      }));
      await load;
      assert.ok(killed && acked.length >= 200, `${acked.length} acknowledged`);
      const after = await A.api.say(room, "after", "still here");
      assert.equal(after.status, 201, "the others keep serving");
      const stored = new Set((await eventsOf(C.api, room)).filter((e) => e.type === "message.posted").map((e) => e.seq));
      assert.deepEqual(acked.filter((id) => !stored.has(id)), [], "every acknowledged post is stored");
      assert.equal(await verdictOn(A.api, room), "CLEAN");
    } finally {
      await stopAll(cluster);
    }
  });

  test("PostgreSQL restarted mid-load: 503 with a sentence during the outage, then the instances reconnect by themselves and a watcher misses nothing", async () => {
    let db: EmbeddedPg | undefined = await startEmbeddedPostgres();
    const cluster = await startCluster(db.url, 2, { PARLEY_DB_POOL_SIZE: "4" });
    try {
      const [A, B] = cluster as [Instance, Instance];
      const { uuid: room } = await A.api.room();
      const watch = watcher(`${A.url}/api/rooms/${room}/events`);
      const acked: number[] = [];
      for (let i = 0; i < 20; i++) acked.push((await B.api.say(room, "before", `before ${i}`)).body.id);
      await db.pause();
      const during = await Promise.all([B.api.say(room, "during", "in the outage"), A.api.get(`/api/rooms/${room}`), B.api.get("/health")]);
      for (const r of during) {
        assert.equal(r.status, 503, JSON.stringify(r.body));
        assert.equal(r.body.code, "database_unavailable");
        assert.match(r.body.detail, /database/);
      }
      await db.resume();
      await waitUntil("the instances back", async () => (await B.api.say(room, "after", "after 0")).status === 201, 30_000);
      for (let i = 1; i < 20; i++) {
        const r = await B.api.say(room, "after", `after ${i}`);
        assert.equal(r.status, 201);
        acked.push(r.body.id);
      }
      await waitUntil("the watcher has every acknowledged post", () => acked.every((id) => watch.seqs.includes(id)), 30_000);
      await watch.stop();
      assert.equal(new Set(watch.seqs).size, watch.seqs.length, "nothing twice");
      for (const i of cluster) assert.doesNotMatch(i.stderr(), /\n\s+at .*\(/, `${i.name} printed no stack`);
    } finally {
      await stopAll(cluster);
      await db?.stop();
      db = undefined;
    }
  });

  test("three instances starting at once on an empty database migrate it once", async () => {
    const url = await testDatabase();
    const cluster = await startCluster(url, 3);
    try {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        const applied = await c.query("SELECT hash FROM drizzle.__drizzle_migrations");
        const distinct = new Set(applied.rows.map((r: { hash: string }) => r.hash));
        assert.equal(applied.rowCount, distinct.size, "no migration applied twice");
        assert.ok(distinct.size >= 1);
      } finally {
        await c.end();
      }
      for (const i of cluster) assert.equal((await i.api.get("/health")).body.status, "ok");
    } finally {
      await stopAll(cluster);
    }
  });
});
