// The latency histogram behind /metrics: which bucket a duration lands in, and the Prometheus text
// (cumulative buckets, +Inf, _sum and _count, escaped labels, bounded route labels).
import { test } from "node:test";
import assert from "node:assert/strict";
import { bucketIndex, LATENCY_BUCKETS, LatencyHistogram, RequestMetrics } from "../../lib/services/metrics";
import { histogramQuantile, uncorrectWrk } from "../bench/load";

test("the buckets run ten a decade from 0.1 ms to 100 s, strictly ascending", () => {
  assert.equal(LATENCY_BUCKETS.length, 61);
  assert.equal(LATENCY_BUCKETS[0], 0.0001);
  assert.equal(LATENCY_BUCKETS.at(-1), 100);
  assert.deepEqual(LATENCY_BUCKETS.slice(30, 40), [0.1, 0.125, 0.16, 0.2, 0.25, 0.315, 0.4, 0.5, 0.63, 0.8]);
  for (let i = 1; i < LATENCY_BUCKETS.length; i++) {
    const ratio = LATENCY_BUCKETS[i]! / LATENCY_BUCKETS[i - 1]!;
    assert.ok(ratio > 1.2 && ratio < 1.3, `step ${i}: ${ratio}`);
  }
});

test("a duration lands in the first bucket whose bound is at least it (le), past the last in +Inf", () => {
  const at = (s: number) => LATENCY_BUCKETS[bucketIndex(s)] ?? Infinity;
  assert.equal(at(0), 0.0001);
  assert.equal(at(0.00005), 0.0001);
  assert.equal(at(0.0001), 0.0001); // on a bound: that bucket
  assert.equal(at(0.000101), 0.000125);
  assert.equal(at(0.044), 0.05);
  assert.equal(at(0.05), 0.05);
  assert.equal(at(0.147), 0.16);
  assert.equal(at(0.268), 0.315);
  assert.equal(at(30), 31.5);
  assert.equal(at(100), 100);
  assert.equal(bucketIndex(100.5), LATENCY_BUCKETS.length);
  assert.equal(bucketIndex(Infinity), LATENCY_BUCKETS.length);
});

test("the text: cumulative buckets per series, +Inf equal to _count, and _sum", () => {
  const h = new LatencyHistogram("t_seconds", "A test histogram", [0.001, 0.01, 0.1]);
  for (const s of [0.0005, 0.001, 0.005, 0.05, 0.5]) h.observe({ route: "/a" }, s);
  h.observe({ route: "/b" }, 0.02);
  assert.equal(
    h.text(),
    [
      "# HELP t_seconds A test histogram",
      "# TYPE t_seconds histogram",
      't_seconds_bucket{route="/a",le="0.001"} 2',
      't_seconds_bucket{route="/a",le="0.01"} 3',
      't_seconds_bucket{route="/a",le="0.1"} 4',
      't_seconds_bucket{route="/a",le="+Inf"} 5',
      `t_seconds_sum{route="/a"} ${0.0005 + 0.001 + 0.005 + 0.05 + 0.5}`,
      't_seconds_count{route="/a"} 5',
      't_seconds_bucket{route="/b",le="0.001"} 0',
      't_seconds_bucket{route="/b",le="0.01"} 0',
      't_seconds_bucket{route="/b",le="0.1"} 1',
      't_seconds_bucket{route="/b",le="+Inf"} 1',
      't_seconds_sum{route="/b"} 0.02',
      't_seconds_count{route="/b"} 1',
      "",
    ].join("\n"),
  );
});

test("label values are escaped (backslash, quote, newline)", () => {
  const h = new LatencyHistogram("t_seconds", "x", [1]);
  h.observe({ route: 'a\\b"c\nd' }, 0.5);
  assert.match(h.text(), /t_seconds_count\{route="a\\\\b\\"c\\nd"\} 1/);
});

test("request metrics: one series per method and route pattern, unmatched paths in one series, held requests apart, answers by status class", () => {
  const m = new RequestMetrics();
  m.record("GET", "/api/rooms/:id/messages", 200, 0.0004);
  m.record("GET", "/api/rooms/:id/messages", 200, 0.0021);
  m.record("GET", "/api/rooms/:id/messages", 404, 0.0003);
  m.record("POST", "/api/rooms/:id/messages", 201, 0.03);
  m.record("GET", "*", 404, 0.0002);
  m.record("GET", "/*", 404, 0.0002);
  m.record("GET", "/api/rooms/:id/messages", 200, 12, true);
  const text = m.text();
  const count = (name: string, labels: string) => Number(new RegExp(`^${name}\\{${labels.replace(/[{}()*/?]/g, "\\$&")}\\} (\\S+)$`, "m").exec(text)?.[1]);
  assert.equal(count("parley_http_request_duration_seconds_count", 'method="GET",route="/api/rooms/:id/messages"'), 3);
  assert.equal(count("parley_http_request_duration_seconds_count", 'method="POST",route="/api/rooms/:id/messages"'), 1);
  assert.equal(count("parley_http_request_duration_seconds_count", 'method="GET",route="unmatched"'), 2);
  assert.equal(count("parley_http_held_request_duration_seconds_count", 'method="GET",route="/api/rooms/:id/messages"'), 1);
  assert.equal(count("parley_http_held_request_duration_seconds_bucket", 'method="GET",route="/api/rooms/:id/messages",le="12.5"'), 1);
  assert.equal(count("parley_http_request_duration_seconds_bucket", 'method="GET",route="/api/rooms/:id/messages",le="0.0005"'), 2);
  assert.equal(count("parley_http_request_duration_seconds_bucket", 'method="GET",route="/api/rooms/:id/messages",le="0.002"'), 2);
  assert.equal(count("parley_http_request_duration_seconds_bucket", 'method="GET",route="/api/rooms/:id/messages",le="0.0025"'), 3);
  assert.equal(count("parley_http_responses_total", 'method="GET",route="/api/rooms/:id/messages",status="2xx"'), 3);
  assert.equal(count("parley_http_responses_total", 'method="GET",route="/api/rooms/:id/messages",status="4xx"'), 1);
  assert.equal(count("parley_http_responses_total", 'method="GET",route="unmatched",status="4xx"'), 2);
  assert.match(text, /^# TYPE parley_http_request_duration_seconds histogram$/m);
  assert.match(text, /^# TYPE parley_http_responses_total counter$/m);
  // No series for a raw path.
  assert.doesNotMatch(text, /route="\/api\/rooms\/[0-9a-f]/);
});

// The bench reads the server's histogram back (tests/bench/load.ts) and undoes wrk's own
// correction of its latency histogram: both are arithmetic, checked here without a server.

test("a quantile read from cumulative buckets interpolates inside the bucket it falls in", () => {
  const buckets: [number, number][] = [[0.001, 10], [0.002, 30], [0.004, 40], [Infinity, 40]];
  assert.equal(histogramQuantile(0.25, buckets), 0.001); // 10 of 40: the top of the first bucket
  assert.equal(histogramQuantile(0.5, buckets), 0.0015); // 20 of 40: halfway through the second
  assert.equal(histogramQuantile(1, buckets), 0.004);
  assert.ok(Number.isNaN(histogramQuantile(0.5, [[0.001, 0], [Infinity, 0]])));
  // Past the last finite bound, the last bound is all a histogram knows.
  assert.equal(histogramQuantile(0.99, [[0.001, 1], [Infinity, 100]]), 0.001);
});

/** wrk 4's stats_correct: for each value n ≥ 2e, `count(n)` more samples at n − e, n − 2e, … while above e. */
function wrkCorrect(raw: Map<number, number>, e: number): Map<number, number> {
  const data = new Map(raw);
  const max = Math.max(...raw.keys());
  for (let n = 2 * e; n <= max; n++) {
    const count = data.get(n) ?? 0;
    for (let m = n - e; count && m > e; m -= e) data.set(m, (data.get(m) ?? 0) + count);
  }
  return data;
}

test("undoing wrk's coordinated-omission correction gives back the latencies it recorded", () => {
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (const e of [1, 7, 50, 333]) {
    const raw = new Map<number, number>();
    for (let i = 0; i < 2000; i++) {
      // Mostly fast, a tail of slow ones (the stalls the correction multiplies).
      const v = random() < 0.97 ? 1 + Math.floor(random() * e * 2) : Math.floor(e * (2 + random() * 30));
      raw.set(v, (raw.get(v) ?? 0) + 1);
    }
    const corrected = wrkCorrect(raw, e);
    const total = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    assert.ok(total(corrected) > total(raw), `e=${e}: the correction adds samples`);
    assert.deepEqual([...uncorrectWrk(corrected, e)].sort((a, b) => a[0] - b[0]), [...raw].sort((a, b) => a[0] - b[0]), `e=${e}`);
  }
});
