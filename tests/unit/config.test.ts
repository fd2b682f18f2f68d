import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../../lib/config";

test("defaults: port 3000, ./data, 1,000 messages, 72 h idle, 30 days max", () => {
  const c = loadConfig({});
  assert.equal(c.port, 3000);
  assert.ok(c.dataDir.endsWith("/data"));
  assert.equal(c.roomMessageCap, 1000);
  assert.equal(c.roomIdleTtlMs, 72 * 3_600_000);
  assert.equal(c.roomMaxTtlMs, 30 * 86_400_000);
  assert.equal(c.keyName, "localhost");
  assert.equal(c.arbiterConfigured, false);
});

test("durations accept units and plain seconds", () => {
  assert.equal(loadConfig({ PARLEY_ROOM_IDLE_TTL: "90s" }).roomIdleTtlMs, 90_000);
  assert.equal(loadConfig({ PARLEY_ROOM_IDLE_TTL: "120" }).roomIdleTtlMs, 120_000);
  assert.equal(loadConfig({ PARLEY_ROOM_MAX_TTL: "2d", PARLEY_ROOM_IDLE_TTL: "1h" }).roomMaxTtlMs, 2 * 86_400_000);
});

test("the public URL sets the checkpoint key name", () => {
  const c = loadConfig({ PARLEY_PUBLIC_URL: "https://parley.example/" });
  assert.equal(c.publicUrl, "https://parley.example");
  assert.equal(c.keyName, "parley.example");
});

test("a malformed value stops start-up with a sentence naming it", () => {
  for (const [name, value] of [
    ["PORT", "eighty"],
    ["PARLEY_ROOM_MESSAGE_CAP", "-5"],
    ["PARLEY_ROOM_IDLE_TTL", "soon"],
    ["PARLEY_PUBLIC_URL", "not a url"],
    ["PARLEY_ADMIN_TOKEN", "short"],
    ["PARLEY_TRUST_PROXY", "yes"],
  ]) {
    assert.throws(() => loadConfig({ [name]: value }), (err: Error) => err instanceof ConfigError && err.message.includes(name), name);
  }
  assert.throws(() => loadConfig({ PARLEY_ROOM_IDLE_TTL: "10d", PARLEY_ROOM_MAX_TTL: "1d" }), /PARLEY_ROOM_MAX_TTL/);
});
