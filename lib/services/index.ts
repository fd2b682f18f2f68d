import crypto from "node:crypto";
import os from "node:os";
import { checkpointHost, type Config } from "../config";
import { utf8 } from "../log/bytes";
import { Caches, RoomRows } from "./cache";
import { FrameCache } from "../realtime/feed";
import { LastCommits } from "../realtime/last-commits";
import { Notifier } from "../realtime/notifier";
import type { Store } from "../store/types";
import { systemClock, type Clock, type Services } from "./context";
import { RateLimiter } from "./rate-limit";
import type { ServerKey } from "./server-key";

export function createServices(config: Config, store: Store, key: ServerKey, clock: Clock = systemClock): Services {
  const svc = {
    config,
    store,
    key,
    clock,
    notifier: new Notifier(),
    limiter: new RateLimiter(store.limits, () => clock.now()),
    originHost: checkpointHost(config),
    caches: new Caches(),
    roomRows: new RoomRows(store),
    leaseSecret: Buffer.from(key.sign(utf8("parley turn lease tokens v1"))),
    instanceId: `${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString("hex")}`,
    appendHooks: [],
  } as Omit<Services, "frames" | "lastCommits"> as Services;
  svc.frames = new FrameCache(svc);
  svc.lastCommits = new LastCommits(svc.notifier);
  // Readers of a room wake when a commit moved its head (this instance's; other instances' arrive
  // through LISTEN, lib/realtime/pg-listen.ts).
  svc.notifier.subscribeAll((room, seq) => svc.roomRows.headMoved(room, seq));
  svc.notifier.subscribeMissed(() => svc.roomRows.forgetAll());
  store.onCommit((heads) => {
    for (const [room, seq] of heads) svc.notifier.publish(room, seq);
  });
  return svc;
}

/** The general per-client request budget (everything but room creation and posts, which have their own). */
export function limitRequest(svc: Services, ip: string): Promise<void> {
  return svc.limiter.take(`req:${ip}`, svc.config.rate.requestsPerMinute, 60_000, "requests from your address");
}
