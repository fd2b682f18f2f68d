// mentionsOf skips the NFKC normalisation of a text with no `@` in it (the verifier recomputes the
// mentions of every message): the two characters NFKC turns into `@` must still count as one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mentionsOf } from "../../lib/domain/message";

test("a text without @ mentions no one; ＠ (U+FF20) and ﹫ (U+FE6B) still mention", () => {
  assert.deepEqual(mentionsOf("benchmark message 1 with a little text in it"), []);
  assert.deepEqual(mentionsOf("ask ＢＯＢ"), []);
  assert.deepEqual(mentionsOf("ask \uFF20bob now"), ["bob"]);
  assert.deepEqual(mentionsOf("ask \uFE6Bcarol, then @dave"), ["carol", "dave"]);
  // Every code point NFKC turns into something with an `@` is one of the two.
  const makers: number[] = [];
  for (let c = 0; c < 0x110000; c++) {
    if (c === 0x40 || (c >= 0xd800 && c <= 0xdfff)) continue;
    if (String.fromCodePoint(c).normalize("NFKC").includes("@")) makers.push(c);
  }
  assert.deepEqual(makers, [0xfe6b, 0xff20]);
});

test("a text that is not a string throws (the verifier's replay of an untrusted bundle stops there)", () => {
  for (const text of [5, { not: "text" }, null]) assert.throws(() => mentionsOf(text as unknown as string), TypeError);
});
