// Webhooks on several instances of one PostgreSQL: whichever instance appends, each event reaches
// a webhook once; workers claiming at the same moment (FOR UPDATE SKIP LOCKED with a lease) never
// send a delivery twice.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { startCluster, stopAll, type Instance } from "../helpers/cluster";
import { testDatabase } from "../helpers/pg";
import { client, startTestServer } from "../helpers/server";
import { waitUntil } from "../helpers/wait";
import { expectedSignature, startReceiver, type Receiver } from "../helpers/webhook-receiver";
import { deliverDue } from "../../lib/webhooks/worker";
import type { RunningServer } from "../../server";

const WEBHOOKS = { PARLEY_WEBHOOK_ALLOW_PRIVATE: "1", PARLEY_WEBHOOK_INTERVAL: "50ms", PARLEY_WEBHOOK_RETRY_BASE: "20ms", PARLEY_RATE_WEBHOOKS_PER_HOUR: "0" };

let rx: Receiver;
before(async () => (rx = await startReceiver()));
after(() => rx.close());

describe("two instances, one database", () => {
  let cluster: Instance[];
  before(async () => (cluster = await startCluster(await testDatabase(), 2, WEBHOOKS)));
  after(() => stopAll(cluster));

  test("posts on both instances reach the webhook once each, in spite of a first attempt that fails", async () => {
    const [A, B] = cluster as [Instance, Instance];
    rx.on("/cluster", (_req, n) => (n === 1 ? 500 : 200));
    const { uuid } = await A.api.room();
    const w = (await B.api.post(`/api/rooms/${uuid}/webhooks`, { url: `${rx.url}/cluster` })).body;
    const seqs: number[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await (i % 2 ? A : B).api.say(uuid, "a", `m${i}`);
      assert.equal(r.status, 201);
      seqs.push(r.body.id);
    }
    await waitUntil("30 delivered", async () => (await A.api.get(`/api/rooms/${uuid}/webhooks/${w.id}`, { authorization: `Bearer ${w.secret}` })).body.counts.delivered === 30, 20_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const got = rx.at("/cluster");
    assert.equal(got.length, 31, "30 deliveries and one retry");
    const ok = got.slice(1);
    assert.deepEqual(new Set(got.map((d) => d.body.event.seq)), new Set(seqs));
    assert.equal(new Set(ok.map((d) => d.headers["x-parley-delivery"])).size, 30);
    assert.ok(got.every((d) => d.headers["x-parley-signature"] === expectedSignature(w.secret, d.raw)), "both instances sign with the same derived secret");
  });
});

describe("workers claiming at once", () => {
  let a: RunningServer, b: RunningServer;
  before(async () => {
    const env = { ...WEBHOOKS, PARLEY_DATABASE_URL: await testDatabase(), PARLEY_KEY: crypto.randomBytes(32).toString("hex"), PARLEY_WEBHOOK_INTERVAL: "1h" };
    a = await startTestServer(env);
    b = await startTestServer(env);
  });
  after(async () => {
    await a.close();
    await b.close();
  });

  test("four runs on two instances at the same moment send each of 60 deliveries once", async () => {
    const api = client(a.url);
    const { uuid } = await api.room();
    const w = (await api.post(`/api/rooms/${uuid}/webhooks`, { url: `${rx.url}/race` })).body;
    for (let i = 0; i < 60; i++) assert.equal((await api.say(uuid, "a", `r${i}`)).status, 201);
    const attempted = await Promise.all([deliverDue(a.svc), deliverDue(b.svc), deliverDue(a.svc), deliverDue(b.svc)]);
    assert.equal(attempted.reduce((x, y) => x + y, 0), 60, `claims per run: ${attempted.join(", ")}`);
    const got = rx.at("/race");
    assert.equal(got.length, 60);
    assert.equal(new Set(got.map((d) => d.headers["x-parley-delivery"])).size, 60);
    const view = (await client(b.url).get(`/api/rooms/${uuid}/webhooks/${w.id}`, { authorization: `Bearer ${w.secret}` })).body;
    assert.deepEqual(view.counts, { pending: 0, retrying: 0, delivered: 60, dead: 0 });
  });
});
