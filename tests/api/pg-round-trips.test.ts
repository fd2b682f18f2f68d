// Round trips to PostgreSQL per write (lib/store/pg.ts): the pool's connections pipeline, so a post's
// transaction sends BEGIN with its lock statement and its rows with COMMIT — two round trips, not
// four. Counted on the wire: the server talks to PostgreSQL through a proxy that holds every answer
// back 25 ms, so statements sent without waiting reach PostgreSQL before any answer comes back.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startApi, TEST_BACKEND, type TestApi } from "../helpers/server";
import { testDatabase } from "../helpers/pg";

const HOLD_MS = 25;

type Sent = { connection: number; from: "client" | "server"; text: string };

/** A TCP proxy to `target` that holds back what PostgreSQL answers and records all traffic, in order. */
async function delayingProxy(target: URL) {
  const traffic: Sent[] = [];
  let connections = 0;
  const server = net.createServer((inbound) => {
    const connection = ++connections;
    const outbound = net.connect(Number(target.port), target.hostname);
    inbound.on("data", (chunk) => {
      traffic.push({ connection, from: "client", text: chunk.toString("latin1") });
      outbound.write(chunk);
    });
    outbound.on("data", (chunk) =>
      setTimeout(() => {
        traffic.push({ connection, from: "server", text: chunk.toString("latin1") });
        if (!inbound.destroyed) inbound.write(chunk);
      }, HOLD_MS),
    );
    const end = () => (inbound.destroy(), outbound.destroy());
    inbound.on("error", end).on("close", end);
    outbound.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = new URL(target);
  url.port = String((server.address() as net.AddressInfo).port);
  return { url: url.toString(), traffic, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/**
 * The round trips of the last transaction that wrote held rows (flush_held): on its connection, the
 * runs of bytes sent with no answer between them, from the one holding its BEGIN to the one holding
 * its COMMIT.
 */
function lastPostRoundTrips(traffic: readonly Sent[]): string[] {
  const flush = traffic.findLastIndex((e) => e.from === "client" && e.text.includes("flush_held"));
  assert.ok(flush >= 0, "no post's rows went to PostgreSQL");
  const mine = traffic.filter((e) => e.connection === traffic[flush]!.connection);
  const at = mine.indexOf(traffic[flush]!);
  const begin = mine.findLastIndex((e, i) => i <= at && e.from === "client" && e.text.includes("BEGIN"));
  const commit = mine.findIndex((e, i) => i >= at && e.from === "client" && e.text.includes("COMMIT"));
  assert.ok(begin >= 0 && commit >= 0, "the post's BEGIN or COMMIT is missing");
  const trips: string[] = [];
  let answered = true;
  for (const e of mine.slice(begin, commit + 1)) {
    if (e.from === "server") answered = true;
    else if (answered) {
      trips.push(e.text);
      answered = false;
    } else trips[trips.length - 1] += e.text;
  }
  return trips;
}

describe("PostgreSQL round trips", { skip: TEST_BACKEND !== "postgres" && "PostgreSQL only" }, () => {
  let f: TestApi;
  let proxy: Awaited<ReturnType<typeof delayingProxy>>;
  before(async () => {
    proxy = await delayingProxy(new URL(await testDatabase()));
    f = await startApi({ PARLEY_DATABASE_URL: proxy.url });
  });
  after(async () => {
    await f?.close();
    await proxy?.close();
  });

  test("a post is two round trips: BEGIN with the lock statement, the rows with COMMIT", async () => {
    const room = (await f.api.post("/api/rooms", {})).body.uuid as string;
    // The first post also records the agent; the second is a plain append.
    for (const text of ["first", "second"]) {
      const r = await f.api.post(`/api/rooms/${room}/messages`, { agent_id: "alice", text });
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
    const trips = lastPostRoundTrips(proxy.traffic);
    assert.equal(trips.length, 2, `round trips: ${JSON.stringify(trips.map((t) => t.replace(/[^ -~]+/g, " ").slice(0, 100)))}`);
    assert.match(trips[0]!, /BEGIN[\s\S]*lock_rooms/);
    assert.match(trips[1]!, /flush_held[\s\S]*COMMIT/);
    // What it wrote is there.
    const page = await f.api.get(`/api/rooms/${room}/messages`);
    assert.deepEqual((page.body.messages as { text: string }[]).map((m) => m.text), ["first", "second"]);
  });
});
