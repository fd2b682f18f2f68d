import { test } from "node:test";
import assert from "node:assert/strict";
import v8 from "node:v8";
import { MemoryBuckets } from "../../lib/store/memory-limits";
import { holdExport, RateLimiter } from "../../lib/services/rate-limit";
import type { Services } from "../../lib/services/context";
import { ParleyError } from "../../lib/errors";

test("exports and verifications bound the heap's growth from the first one held to the last one released", (t) => {
  const set: string[] = [];
  t.mock.method(v8, "setFlagsFromString", (flag: string) => void set.push(flag));
  const svc = { config: { maxConcurrentExports: 2 }, limiter: new RateLimiter(new MemoryBuckets(), () => 0) } as unknown as Services;
  const a = holdExport(svc);
  assert.deepEqual(set, ["--heap-growing-percent=100"]);
  const b = holdExport(svc);
  // Over the cap: refused, and the bound is neither set again nor lifted.
  assert.throws(() => holdExport(svc), (err: unknown) => err instanceof ParleyError && err.code === "rate_limited");
  a();
  a(); // released twice: counts once
  assert.deepEqual(set, ["--heap-growing-percent=100"]);
  assert.equal(svc.limiter.held("exports"), 1);
  b();
  assert.deepEqual(set, ["--heap-growing-percent=100", "--heap-growing-percent=0"]);
  assert.equal(svc.limiter.held("exports"), 0);
  holdExport(svc)();
  assert.deepEqual(set.slice(2), ["--heap-growing-percent=100", "--heap-growing-percent=0"]);
});
