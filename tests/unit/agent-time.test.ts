// The agent time rule (sig.ts, legacy ts_iso) and the legacy memory_root rule, and why together
// they make the legacy signed string (text ‖ ts_iso ‖ room ‖ memory_root) split one way only.
import { test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { isAgentTime, isLegacyMemoryRoot, legacySignedString, parseAgentTime } from "../../lib/log/event";

test("accepted: ISO 8601 UTC with Z or +00:00, with or without a fraction of 1-9 digits", () => {
  const cases: [string, string][] = [
    ["2026-12-01T10:00:00Z", "2026-12-01T10:00:00.000Z"],
    ["2026-12-01T10:00:00.123Z", "2026-12-01T10:00:00.123Z"],
    ["2026-12-01T10:00:00.5Z", "2026-12-01T10:00:00.500Z"],
    ["2026-12-01T10:00:00.123456789Z", "2026-12-01T10:00:00.123Z"],
    ["2026-12-01T10:00:00+00:00", "2026-12-01T10:00:00.000Z"],
    ["2026-12-01T10:00:00.123456+00:00", "2026-12-01T10:00:00.123Z"], // Python's isoformat()
    ["2028-02-29T23:59:59Z", "2028-02-29T23:59:59.000Z"],
  ];
  for (const [s, iso] of cases) assert.equal(parseAgentTime(s), Date.parse(iso), s);
});

test("refused: every other form, including ones Date.parse takes", () => {
  for (const s of [
    "Tue, 01 Dec 2026 10:00:00 GMT", // RFC 2822
    "Tue Dec 01 2026 10:00:00 GMT+0000 (Coordinated Universal Time)",
    "1796119200000",
    "2026-12-01",
    "2026-12-01T10:00Z",
    "2026-12-01T10:00:00", // no zone: local time
    "2026-12-01 10:00:00Z",
    "2026-12-01t10:00:00z",
    "2026-12-01T10:00:00+01:00",
    "2026-12-01T10:00:00-00:00",
    "2026-12-01T10:00:00+0000",
    "2026-12-01T10:00:00.Z",
    "2026-12-01T10:00:00.1234567890Z",
    "2026-02-29T10:00:00Z",
    "2026-13-01T10:00:00Z",
    "2026-12-01T24:00:00Z",
    "2026-12-01T10:60:00Z",
    "2026-12-01T10:00:60Z",
    "+02026-12-01T10:00:00Z",
    " 2026-12-01T10:00:00Z",
    "2026-12-01T10:00:00Z\n",
    "not a time",
    "",
  ]) {
    assert.equal(isAgentTime(s), false, JSON.stringify(s));
  }
  assert.equal(isAgentTime(5 as never), false);
});

test("legacy memory_root: empty or a hash-like token, never a '-'", () => {
  for (const ok of ["", "ab".repeat(32), "mr", "sha256:q83vASNFZ4k=", "a/b+c_d.e"]) assert.ok(isLegacyMemoryRoot(ok), ok);
  for (const bad of ["mr-1", "a b", "x".repeat(257), "2026-12-01T10:00:00Z3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23", "é"]) assert.equal(isLegacyMemoryRoot(bad), false, bad);
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Every way to read `signed` as text ‖ ts_iso ‖ room ‖ memory_root that the server would accept. */
function readings(signed: string): string[] {
  const out: string[] = [];
  for (let end = signed.length; end >= 36; end--) {
    const memoryRoot = signed.slice(end);
    const room = signed.slice(end - 36, end);
    if (!isLegacyMemoryRoot(memoryRoot) || !UUID.test(room)) continue;
    for (let start = 0; start < end - 36; start++) {
      const ts = signed.slice(start, end - 36);
      if (isAgentTime(ts)) out.push(JSON.stringify([signed.slice(0, start), ts, room, memoryRoot]));
    }
  }
  return out;
}

test("with both rules, a legacy signed string has exactly one reading (no other room, no shifted fields)", () => {
  const rooms = Array.from({ length: 3 }, () => crypto.randomUUID());
  const times = ["2026-12-01T10:00:00Z", "2026-12-01T10:00:00.123Z", "2026-12-01T10:00:00.123456+00:00"];
  const roots = ["", "ab".repeat(32), "tag"];
  let checked = 0;
  for (const room of rooms) {
    for (const ts of times) {
      for (const memoryRoot of roots) {
        // Texts that carry other rooms' ids, times and fragments of both: the attack material.
        for (const text of ["hi", `${times[0]}${rooms[1]}`, `x${ts}${rooms[2]}${ts}`, `${rooms[0]}${roots[1]}`, `a${ts.slice(3)}`, `${ts}`]) {
          const signed = legacySignedString(text, ts, room, memoryRoot);
          assert.deepEqual(readings(signed), [JSON.stringify([text, ts, room, memoryRoot])], signed);
          checked++;
        }
      }
    }
  }
  assert.equal(checked, 3 * 3 * 3 * 6);
  // Without the memory_root rule, the shift works: the same bytes read as a message of another room.
  const [a, b] = [rooms[0]!, rooms[1]!];
  const ts = times[0]!;
  assert.equal(legacySignedString(`see ${ts}${b}`, ts, a), legacySignedString("see ", ts, b, `${ts}${a}`));
});
