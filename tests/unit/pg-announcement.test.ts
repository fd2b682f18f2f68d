// The NOTIFY payloads of the PostgreSQL store: an instance skips its own by their first bytes
// (ownAnnouncements), and hears every other instance's.
import { test } from "node:test";
import assert from "node:assert/strict";
import { announcement, ownAnnouncements } from "../../lib/store/pg";
import { parseAnnouncement } from "../../lib/realtime/pg-listen";

test("an instance's own payloads begin with ownAnnouncements(origin); another origin's, even one it begins, do not", () => {
  const origin = "6c1d0a9e-3f1b-4b8e-9a51-0d2c7e4f8a10";
  const heads: [string, number][] = [["room-a", 3], ["room-b", 12]];
  const own = announcement(origin, heads);
  assert.ok(own.startsWith(ownAnnouncements(origin)));
  assert.deepEqual(parseAnnouncement(own), { from: origin, heads });
  for (const other of [`${origin}0`, origin.slice(0, -1), "other"]) {
    const theirs = announcement(other, heads);
    assert.ok(!theirs.startsWith(ownAnnouncements(origin)), other);
    assert.deepEqual(parseAnnouncement(theirs), { from: other, heads });
  }
});
