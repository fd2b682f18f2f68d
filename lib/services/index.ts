import { checkpointHost, type Config } from "../config";
import { FrameCache } from "../realtime/feed";
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
    limiter: new RateLimiter(() => clock.now()),
    originHost: checkpointHost(config),
  } as Omit<Services, "frames"> as Services;
  svc.frames = new FrameCache(svc);
  return svc;
}

/** The general per-client request budget (everything but room creation and posts, which have their own). */
export function limitRequest(svc: Services, ip: string): void {
  svc.limiter.take(`req:${ip}`, svc.config.rate.requestsPerMinute, 60_000, "requests from your address");
}
