import { test } from "node:test";
import assert from "node:assert/strict";
import { expiresAt, isExpired, roomStatusAfter } from "../../lib/domain/room";
import { wantsMarkdown } from "../../lib/instructions/negotiate";
import { MemoryBuckets } from "../../lib/store/memory-limits";
import { RateLimiter } from "../../lib/services/rate-limit";
import { Notifier } from "../../lib/realtime/notifier";
import { parseRoomId } from "../../lib/services/access";
import { ParleyError } from "../../lib/errors";

test("expiry is idle TTL after the last activity, capped at max TTL after creation", () => {
  const life = { idleTtlMs: 100, maxTtlMs: 1000 };
  assert.equal(expiresAt(0, 0, life), 100);
  assert.equal(expiresAt(0, 500, life), 600);
  assert.equal(expiresAt(0, 950, life), 1000);
  assert.equal(isExpired({ status: "open", expiresAt: "2026-01-01T00:00:00.000Z" }, "2026-01-01T00:00:00.000Z"), true);
  assert.equal(isExpired({ status: "open", expiresAt: "2026-01-01T00:00:00.001Z" }, "2026-01-01T00:00:00.000Z"), false);
  assert.equal(isExpired({ status: "expired", expiresAt: "2999-01-01T00:00:00.000Z" }, "2026-01-01T00:00:00.000Z"), true);
});

test("room status follows room.closed and room.reopened only", () => {
  assert.equal(roomStatusAfter("open", "room.closed"), "closed");
  assert.equal(roomStatusAfter("closed", "room.reopened"), "open");
  assert.equal(roomStatusAfter("closed", "message.posted"), "closed");
});

test("content negotiation of room URLs (SPEC 7)", () => {
  assert.equal(wantsMarkdown("md", "text/html"), true);
  assert.equal(wantsMarkdown("MARKDOWN", null), true);
  assert.equal(wantsMarkdown("txt", undefined), true);
  assert.equal(wantsMarkdown("html", "text/markdown"), true, "an unknown format falls through to Accept");
  assert.equal(wantsMarkdown(null, "text/html,application/xhtml+xml"), false);
  assert.equal(wantsMarkdown(null, "text/html, text/markdown"), false, "text/html wins");
  assert.equal(wantsMarkdown(null, "text/markdown"), true);
  assert.equal(wantsMarkdown(null, "application/json"), true);
  assert.equal(wantsMarkdown(null, "*/*"), false);
  assert.equal(wantsMarkdown(null, ""), false);
});

test("room ids: upper case normalised, anything else invalid_uuid", () => {
  assert.equal(parseRoomId("3B2F6C1E-8A4D-4F7B-9C21-5D0E8F6A1B23"), "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23");
  for (const bad of ["", "3b2f6c1e8a4d4f7b9c215d0e8f6a1b23", "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b2", "../etc/passwd", "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b2g"]) {
    assert.throws(() => parseRoomId(bad), (e: ParleyError) => e.code === "invalid_uuid", bad);
  }
});

test("a token bucket refills over time and says when to retry", async () => {
  let now = 0;
  const limiter = new RateLimiter(new MemoryBuckets(), () => now);
  await limiter.take("k", 2, 60_000, "things");
  await limiter.take("k", 2, 60_000, "things");
  await assert.rejects(limiter.take("k", 2, 60_000, "things"), (e: ParleyError) => e.code === "rate_limited" && e.extra.retryAfter === 30);
  now += 30_000;
  await limiter.take("k", 2, 60_000, "things");
  await limiter.take("other", 0, 60_000, "things"); // 0 turns a limit off
  for (let i = 0; i < 100; i++) await limiter.take("off", 0, 60_000, "things");
});

test("the notifier wakes waiters past their cursor and cleans up", async () => {
  const n = new Notifier();
  let head = 5;
  const headNow = async () => head;
  const waiting = n.waitFor("r", 5, headNow, 5000);
  assert.equal(n.streamCount, 1);
  n.publish("r", 5); // not past the cursor
  head = 6;
  n.publish("r", 6);
  assert.equal(await waiting, true);
  assert.equal(n.streamCount, 0);
  assert.equal(await n.waitFor("r", 5, headNow, 5000), true, "already past: resolves at once");
  assert.equal(await n.waitFor("r", 6, headNow, 10), false, "times out");
  assert.equal(await n.waitFor("r", 6, headNow, 0), false, "wait 0 answers at once");
  assert.equal(await n.waitFor("r", 5, headNow, 0), true, "wait 0 past the cursor");
  const abort = new AbortController();
  const aborted = n.waitFor("r", 6, headNow, 5000, abort.signal);
  abort.abort();
  assert.equal(await aborted, false);
  assert.equal(n.streamCount, 0);
});
