// Text that JSON allows but the log cannot hold: an unpaired UTF-16 surrogate has no canonical
// (RFC 8785) form, and NUL cannot be stored by PostgreSQL. Every string field of every write,
// REST and MCP, must refuse them at validation: 400 validation_error naming the field, nothing written.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startApi, type TestApi } from "../helpers/server";
import { connectMcp, fails } from "../helpers/mcp";

const BAD = ["x\ud800", "\udc00y", "a\u0000b"];

/** Every string leaf of a body, with its dotted path (array elements by index, as zod names them). */
function stringPaths(v: unknown, prefix: string[] = []): string[][] {
  if (typeof v === "string") return [prefix];
  if (Array.isArray(v)) return v.flatMap((x, i) => stringPaths(x, [...prefix, String(i)]));
  if (v && typeof v === "object") return Object.entries(v).flatMap(([k, x]) => stringPaths(x, [...prefix, k]));
  return [];
}

function withValue(body: unknown, path: string[], value: string): unknown {
  const copy = structuredClone(body) as Record<string, unknown>;
  let at: any = copy;
  for (const k of path.slice(0, -1)) at = at[k];
  at[path.at(-1)!] = value;
  return copy;
}

const SIG = { pubkey_hex: "a".repeat(64), signature_hex: "b".repeat(128), ts: "2026-12-01T10:00:00Z", nonce: "n".repeat(20) };

describe("unstorable text is refused at validation", () => {
  let f: TestApi;
  let open: string;
  let turns: string;
  let turnsOwner: string;
  before(async () => {
    f = await startApi();
    const r = await f.api.room();
    open = r.uuid;
    assert.equal((await f.api.say(open, "alice", "hello")).status, 201);
    assert.equal((await f.api.post(`/api/rooms/${open}/claims`, { subject: "price", value: "10", opened_by: "alice" })).status, 201);
    assert.equal((await f.api.post(`/api/rooms/${open}/tasks`, { agent_id: "alice", title: "first task" })).status, 201);
    const t = await f.api.room({ mode: "turns", turns: { participants: ["alice", "bob"] } });
    turns = t.uuid;
    turnsOwner = t.owner_token;
  });
  after(() => f.close());

  const headSize = async (room: string) => (await f.api.get(`/api/rooms/${room}`)).body.head.size as number;

  // route (relative to the room), a body that is valid apart from the field under test, and whose token authorises it.
  const writes: { route: string; room: () => string; body: unknown; owner?: () => string }[] = [
    { route: "/messages", room: () => open, body: { agent_id: "bob", text: "hi", memory_root: "root" } },
    { route: "/messages", room: () => open, body: { agent_id: "bob", text: "hi", sig: SIG } },
    { route: "/messages", room: () => open, body: { agent_id: "bob", text: "hi", pubkey_hex: SIG.pubkey_hex, signature_hex: SIG.signature_hex, ts_iso: "2026-12-01T10:00:00Z" } },
    { route: "/claims", room: () => open, body: { subject: "date", value: "Friday", opened_by: "bob", subject_key: "date", quote: "Friday works" } },
    { route: "/claims/1/revisions", room: () => open, body: { agent_id: "bob", kind: "update", value: "11", quote: "eleven" } },
    { route: "/handshake", room: () => open, body: { agent_id: "bob", context_hash: "c".repeat(64) } },
    { route: "/agents", room: () => open, body: { agent_id: "bob", capabilities: ["review"] } },
    { route: "/tasks", room: () => open, body: { agent_id: "bob", title: "t", description: "d", requires: ["review"], reviewer: "carol", context_refs: ["ref"] } },
    { route: "/tasks/claim-next", room: () => open, body: { agent_id: "bob" } },
    { route: "/tasks/1/heartbeat", room: () => open, body: { agent_id: "bob", lease_token: "tok", progress: "half" } },
    { route: "/tasks/1/fail", room: () => open, body: { agent_id: "bob", lease_token: "tok", reason: "broke" } },
    { route: "/tasks/1/handoff", room: () => open, body: { agent_id: "bob", lease_token: "tok", to_agent: "carol", note: "yours" } },
    { route: "/tasks/1/submit", room: () => open, body: { agent_id: "bob", lease_token: "tok", status: "completed", summary: "done", artifacts: [{ type: "text", ref: "r", note: "n" }] } },
    { route: "/tasks/1/review", room: () => open, body: { agent_id: "carol", decision: "accept", note: "fine" } },
    { route: "/tasks/1/cancel", room: () => open, body: { agent_id: "alice", reason: "obsolete" } },
    { route: "/verify", room: () => open, body: { checkpoint: "not a checkpoint" } },
    { route: "/turns/1/claim", room: () => turns, body: { agent_id: "alice" } },
    { route: "/turns/1/reply", room: () => turns, body: { agent_id: "alice", lease_token: "tok", text: "my turn", result: "continue" } },
    { route: "/turns/note", room: () => turns, body: { text: "note" }, owner: () => turnsOwner },
    { route: "/turns/cancel", room: () => turns, body: { reason: "done" }, owner: () => turnsOwner },
    { route: "/turns/reinstate", room: () => turns, body: { agent_id: "alice" }, owner: () => turnsOwner },
  ];

  for (const w of writes) {
    for (const path of stringPaths(w.body)) {
      test(`POST …${w.route} ${path.join(".")}`, async () => {
        const room = w.room();
        const before = await headSize(room);
        for (const bad of BAD) {
          const headers = w.owner ? { authorization: `Bearer ${w.owner()}` } : undefined;
          const r = await f.api.post(`/api/rooms/${room}${w.route}`, JSON.stringify(withValue(w.body, path, bad)), headers);
          assert.equal(r.status, 400, JSON.stringify(r.body));
          assert.equal(r.body.code, "validation_error");
          assert.ok(r.body.detail.includes(path.join(".")), `the detail names ${path.join(".")}: ${r.body.detail}`);
        }
        assert.equal(await headSize(room), before, "nothing was written");
      });
    }
  }

  test("POST /api/rooms description", async () => {
    const before = (await f.api.get("/api/rooms?limit=200")).body.total;
    for (const bad of BAD) {
      for (const body of [{ description: bad, is_public: true }, { mode: "turns", is_public: true, turns: { participants: ["alice", bad] } }]) {
        const r = await f.api.post("/api/rooms", JSON.stringify(body));
        assert.equal(r.status, 400);
        assert.equal(r.body.code, "validation_error");
        assert.match(r.body.detail, /^(description|turns\.participants\.1): /);
      }
    }
    assert.equal((await f.api.get("/api/rooms?limit=200")).body.total, before, "no room was created");
  });

  test("well-formed astral text and a lone escape written as text are accepted", async () => {
    const r = await f.api.say(open, "bob", "emoji 😀 and the six characters \\ud800");
    assert.equal(r.status, 201);
    assert.equal(r.body.text, "emoji 😀 and the six characters \\ud800");
  });

  test("MCP tools refuse the same values", async () => {
    const mcp = await connectMcp(f.url);
    try {
      const before = await headSize(open);
      for (const bad of BAD) {
        assert.match((await fails(mcp, "create_room", { description: bad }, "validation_error")).detail, /description/);
        assert.match((await fails(mcp, "send_message", { room: open, agent_id: "bob", text: bad }, "validation_error")).detail, /text/);
        assert.match((await fails(mcp, "open_thread", { room: open, subject: bad, value: "v", opened_by: "bob" }, "validation_error")).detail, /subject/);
      }
      assert.equal(await headSize(open), before, "nothing was written");
    } finally {
      await mcp.close();
    }
  });
});
