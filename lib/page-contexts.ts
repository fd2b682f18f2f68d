// Next.js and React render a page inside AsyncLocalStorage. On Node 20 the first run() of any
// instance turns on async hooks for every promise of the process, and they stay on while an
// instance is enabled: the API, in the same process, then pays for them on every await (measured:
// about 45 % fewer requests a second on a route that does nothing, once one page had rendered;
// docs/BENCHMARKS.md, ninth round). The instances created after install() are tracked, and turned
// off once no page is being answered; the next page's run() turns its instances on again. Node 22's
// AsyncContextFrame carries the context without hooks and makes this unnecessary.
import type http from "node:http";
import asyncHooks from "node:async_hooks";

type Storage = InstanceType<typeof asyncHooks.AsyncLocalStorage>;
const instances = new Set<Storage>();
let answering = 0;

/**
 * Makes every AsyncLocalStorage created from now on a tracked one. Call it before loading Next.js:
 * it and React create theirs with `new (require("async_hooks").AsyncLocalStorage)()`.
 */
export function install(): void {
  const Base = asyncHooks.AsyncLocalStorage;
  if ((Base as { tracked?: boolean }).tracked) return;
  class Tracked<T> extends Base<T> {
    static readonly tracked = true;
    constructor() {
      super();
      instances.add(this);
    }
  }
  (asyncHooks as { AsyncLocalStorage: typeof Base }).AsyncLocalStorage = Tracked;
}

/** A page is being answered on `res`: the contexts stay on until it and every other page are done. */
export function answeringPage(res: http.ServerResponse): void {
  answering++;
  res.once("close", () => {
    answering--;
    // After what the response's end still runs in this turn of the loop.
    if (answering === 0) setImmediate(() => answering === 0 && quiet());
  });
}

/** Turns the tracked contexts off (and with the last enabled one, the process's async hooks). */
function quiet(): void {
  for (const storage of instances) storage.disable();
}

/** How many tracked contexts are on now (for the tests). */
export function contextsOn(): number {
  let on = 0;
  for (const storage of instances) if ((storage as { enabled?: boolean }).enabled) on++;
  return on;
}
