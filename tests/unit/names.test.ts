import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { agentKey, agentNameProblem, lookalikeTable, looksReserved, sameAgent, skeleton } from "../../lib/domain/names";
import { agentId } from "../../lib/schemas/common";
import { decideRevision, emptyLedger, applyLedgerEvent, sealOf, type Thread } from "../../lib/domain/ledger";
import { turnsConfigProblems, speakingOrder } from "../../lib/domain/turns";

describe("agentKey: NFKC, trimmed, case-folded", () => {
  const same: [string, string][] = [
    ["Alice", "alice"],
    ["ALICE", "alice"],
    [" alice ", "alice"],
    ["\uff21\uff4c\uff49\uff43\uff45", "alice"], // full-width
    ["Stra\u00dfe", "strasse"], // ß folds to ss
    ["STRASSE", "strasse"],
    ["\u03a3\u039f\u03a6\u039f\u03a3", "σοφοσ"], // final and medial sigma fold together
    ["σοφος", "σοφοσ"],
    ["\u01c5", "d\u017e"], // titlecase ǅ: NFKC gives Dž
    ["\u01c4", "d\u017e"],
    ["Jos\u0065\u0301", "josé"], // decomposed é composes
    ["\u212a", "k"], // Kelvin sign
  ];
  for (const [name, key] of same) {
    test(`${JSON.stringify(name)} → ${JSON.stringify(key)}`, () => {
      assert.equal(agentKey(name), key);
      assert.equal(agentKey(agentKey(name)), agentKey(name), "idempotent");
    });
  }
  test("different names stay different; look-alikes of ordinary names are not merged", () => {
    for (const [a, b] of [["alice", "alicia"], ["alice", "\u0430lice"], ["bob", "b0b"], ["ana", "ana2"]]) assert.equal(sameAgent(a, b), false, `${a} / ${b}`);
    assert.equal(sameAgent("Alice", " ALICE"), true);
    assert.equal(sameAgent("alice", null), false);
    assert.equal(sameAgent(undefined, undefined), false);
  });
});

describe("skeleton and the reserved names", () => {
  const reserved: [string, string][] = [
    ["server", "server"], ["Server", "server"], ["SERVER", "server"],
    ["\u0455\u0435rv\u0435r", "server"], // Cyrillic ѕ е
    ["\uff53\uff45\uff52\uff56\uff45\uff52", "server"], // full-width
    ["\ua731\u1d07\u0280\u1d20\u1d07\u0280", "server"], // small capitals
    ["\u0455\u0435\u0433\u0475\u0435\u0433", "server"], // all Cyrillic ѕегѵег
    ["s\u00e9rv\u00e9r", "server"], // accents dropped
    ["ser\u0335ver", "server"], // a combining overlay dropped
    ["\ud835\udc2c\ud835\udc1e\ud835\udc2b\ud835\udc2f\ud835\udc1e\ud835\udc2b", "server"], // mathematical bold
    ["\u24e2\u24d4\u24e1\u24e5\u24d4\u24e1", "server"], // circled
    ["\u1d52\u02b7\u207f\u1d49\u02b3", "owner"], // modifier letters
    ["\uff4f\uff57\uff4e\uff45\uff52", "owner"], // full-width
    ["0wner", "owner"], ["\u03bfwn\u0435r", "owner"], ["\u0555WNER", "owner"], ["OW\u039dER", "owner"], ["ovvner", "owner"], ["o\u0461ner", "owner"],
    ["\u0430rbiter", "arbiter"], ["ARB\u0406TER", "arbiter"], ["AR\u0412ITER", "arbiter"], ["arb1ter", "arbiter"], ["arblter", "arbiter"], ["\u0251rbiter", "arbiter"],
    ["arbi\u0442er", "arbiter"], ["\u13aa\u13a1\u13f4\u13a5\u13a2\u13ac\u13a1", "arbiter"], // Cyrillic т; Cherokee capitals
  ];
  for (const [name, skel] of reserved) {
    test(`${JSON.stringify(name)} looks like ${skel}`, () => {
      assert.equal(skeleton(name), skel);
      assert.equal(looksReserved(name), true);
      assert.match(agentNameProblem(name.normalize("NFKC")) ?? "", /nor look like them/);
    });
  }
  test("ordinary names do not look reserved", () => {
    for (const name of ["alice", "servers", "serve", "observer", "owner2", "co-owner", "arbitrator", "server bot", "the server", "Claude Code", "служба", "José"]) {
      assert.equal(looksReserved(name), false, name);
      assert.equal(agentNameProblem(name), null, name);
    }
  });
  test("every look-alike in the table is NFKC- and NFD-stable (NFKC would fold it first; the skeleton maps after NFD)", () => {
    const unstable = [...lookalikeTable().keys()].filter((c) => c.normalize("NFKC") !== c || c.normalize("NFD") !== c);
    assert.deepEqual(unstable.map((c) => c.codePointAt(0)!.toString(16)), []);
    assert.ok([...lookalikeTable().values()].every((l) => "abeinorstvw".includes(l)), "only letters of the reserved names");
  });
});

describe("invisible and bidirectional characters", () => {
  const refused: [string, RegExp][] = [
    ["\u200bserver", /invisible.*U\+200B/], ["a\u200cb", /U\+200C/], ["a\u200db", /U\+200D/], ["a\u2060b", /U\+2060/], ["\ufeffa", /U\+FEFF/],
    ["a\u00adb", /U\+00AD/], ["a\u2062b", /U\+2062/], ["a\u180eb", /U\+180E/], ["a\ufe0fb", /U\+FE0F/], ["a\u{e0101}b", /U\+E0101/],
    ["a\u034fb", /U\+034F/], ["a\u3164b", /U\+3164/], ["a\u2800b", /U\+2800/], ["a\u2028b", /U\+2028/], ["a\u{e0041}b", /U\+E0041/],
    ["\u202eabc", /bidirectional.*U\+202E/], ["\u202aabc", /U\+202A/], ["abc\u202c", /U\+202C/], ["a\u2066b\u2069", /U\+2066/],
    ["a\u200fb", /U\+200F/], ["a\u061cb", /U\+061C/],
  ];
  for (const [name, why] of refused) {
    test(`${JSON.stringify(name)} is refused`, () => {
      assert.match(agentNameProblem(name) ?? "", why);
      const parsed = agentId.safeParse(name);
      assert.equal(parsed.success, false);
    });
  }
  test("the schema normalises (NFKC, trim) and keeps the case", () => {
    assert.equal(agentId.parse(" \uff21\uff4c\uff49\uff43\uff45 "), "Alice");
    assert.equal(agentId.parse("Jos\u0065\u0301"), "Jos\u00e9");
    assert.equal(agentId.parse("Claude Code"), "Claude Code");
  });
});

describe("the domain rules compare names by key", () => {
  const T = "2026-01-01T00:00:00.000Z";
  function thread(): Thread {
    const ledger = emptyLedger();
    applyLedgerEvent(ledger, { seq: 1, ts: T, type: "thread.opened", actor: "Bob", payload: { subject: "s", value: "v" }, server: {} } as never);
    return ledger.threads[0]!;
  }
  const author = (agent_id: string) => ({ agent_id, auth: "anon" as const, pubkey_hex: null });

  test("the owner is the owner in any case; a confirmation in another case is a repeat", () => {
    const t = thread();
    assert.deepEqual(decideRevision(t, null, "confirm", author("BOB")), { ok: false, code: "owner_cannot_confirm", detail: "The owner cannot confirm their own thread; others confirm or contradict it." });
    assert.equal(decideRevision(t, null, "update", author(" bob")).ok, true);
    t.confirmations.push({ agent_id: "Alice", auth: "anon" });
    assert.deepEqual(decideRevision(t, null, "confirm", author("ALICE")), { ok: true, effect: "none" });
  });

  test("a seal needs two agents by key", () => {
    const t = thread();
    const h = (id: number, agent_id: string, context_hash: string) => ({ id, agent_id, context_hash, auth: "anon" as const, pubkey_hex: null, signature_hex: null, ts: null, nonce: null, created_at: T });
    const hash = "x".repeat(64);
    assert.equal(sealOf([t], [h(1, "Alice", hash), h(2, "ALICE", hash)], hash), null);
    assert.deepEqual(sealOf([t], [h(1, "Alice", hash), h(2, "ALICE", hash), h(3, "bob", hash)], hash), { context_hash: hash, agents: ["Alice", "bob"] });
  });

  test("turns config: duplicates by key; first and supervisor by key", () => {
    assert.deepEqual(turnsConfigProblems({ participants: ["alice", "Alice"], policy: "consensus" }).map((p) => p.field), ["participants"]);
    assert.deepEqual(turnsConfigProblems({ participants: ["alice", "bob"], first: "BOB", policy: "supervisor", supervisor: "ALICE" }), []);
    assert.deepEqual(speakingOrder(["alice", "bob", "cy"], "BOB"), ["bob", "cy", "alice"]);
  });
});
