// Secret screening at intake (SPEC 12): the log is append-only and public to anyone with the URL,
// so a write whose text carries a recognisable credential is refused on every route that logs
// agent or owner text: 422 secret_detected naming the kind, the field and the offset, nothing
// written (the room's head does not move, the task and the turn keep their state). The fake keys
// are built here at run time, so none sits in the repository as a literal.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { after, before, describe, test } from "node:test";
import { startApi, type TestApi } from "../helpers/server";
import { connectMcp, fails, ok } from "../helpers/mcp";

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const rand = (alphabet: string, n: number) => Array.from(crypto.randomBytes(n), (b) => alphabet[b % alphabet.length]).join("");
const p = (...parts: string[]) => parts.join("");
const b64url = (s: string) => Buffer.from(s).toString("base64url");

/** One fake per kind, short enough for any field (titles take 200 characters). */
const SECRETS: { kind: string; make: () => string }[] = [
  { kind: "github_token", make: () => p("gh", "p_", rand(ALNUM, 36)) },
  { kind: "aws_access_key_id", make: () => p("AKIA", rand("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)) },
  { kind: "stripe_secret_key", make: () => p("sk", "_live_", rand(ALNUM, 24)) },
  { kind: "openai_api_key", make: () => p("sk-", "proj-", rand(ALNUM + "-_", 60)) },
  { kind: "anthropic_api_key", make: () => p("sk-", "ant-api03-", rand(ALNUM + "-_", 60)) },
  { kind: "google_api_key", make: () => p("AI", "za", rand(ALNUM + "-_", 35)) },
  { kind: "slack_token", make: () => p("xo", "xb-", rand("0123456789", 12), "-", rand("0123456789", 13), "-", rand(ALNUM, 24)) },
  { kind: "gitlab_token", make: () => p("gl", "pat-", rand(ALNUM, 20)) },
  {
    kind: "jwt",
    make: () => {
      const input = `${b64url(JSON.stringify({ alg: "HS256", typ: "JWT" }))}.${b64url(JSON.stringify({ sub: "agent" }))}`;
      return `${input}.${crypto.createHmac("sha256", rand(ALNUM, 32)).update(input).digest("base64url")}`;
    },
  },
  // A random value with a digit before a letter inside it: what names never have (Summer2024 passes).
  { kind: "secret_assignment", make: () => `password="${rand(ALNUM, 9)}4x${rand(ALNUM, 9)}"` },
];

/** Every string leaf of a body, with its dotted path (array elements by index). */
function stringPaths(v: unknown, prefix: string[] = []): string[][] {
  if (typeof v === "string") return [prefix];
  if (Array.isArray(v)) return v.flatMap((x, i) => stringPaths(x, [...prefix, String(i)]));
  if (v && typeof v === "object") return Object.entries(v).flatMap(([k, x]) => stringPaths(x, [...prefix, k]));
  return [];
}

function withValue(body: Record<string, unknown>, path: string[], value: string): Record<string, unknown> {
  const copy = structuredClone(body);
  let at: any = copy;
  for (const k of path.slice(0, -1)) at = at[k];
  at[path.at(-1)!] = value;
  return copy;
}

describe("secret screening at intake", () => {
  let f: TestApi;
  let open: string;
  let turns: string;
  let turnsOwner: string;
  const id: Record<string, number> = {};
  const lease: Record<string, string> = {};

  before(async () => {
    f = await startApi();
    open = (await f.api.room()).uuid;
    const must = async (r: Promise<{ status: number; body: any }>, status = 200) => {
      const res = await r;
      assert.equal(res.status, status, JSON.stringify(res.body));
      return res.body;
    };
    await must(f.api.say(open, "alice", "hello"), 201);
    id.thread = (await must(f.api.post(`/api/rooms/${open}/claims`, { subject: "price", value: "10", opened_by: "alice" }), 201)).id;
    // Task 1: claimed by bob (heartbeat, submit, fail, handoff, cancel); task 2: submitted by dan, for carol to review.
    for (const [title, worker] of [["parse the feed", "bob"], ["write the tests", "dan"]] as const) {
      const t = await must(f.api.post(`/api/rooms/${open}/tasks`, { agent_id: "alice", title, reviewer: "carol" }), 201);
      await must(f.api.post(`/api/rooms/${open}/agents`, { agent_id: worker, capabilities: [] }));
      id[worker] = t.task.id;
      lease[worker] = (await must(f.api.post(`/api/rooms/${open}/tasks/${t.task.id}/claim`, { agent_id: worker }))).lease_token;
    }
    await must(f.api.post(`/api/rooms/${open}/tasks/${id.dan}/submit`, { agent_id: "dan", lease_token: lease.dan, status: "completed", summary: "done" }));

    const t = await f.api.room({ mode: "turns", turns: { participants: ["alice", "bob"] } });
    turns = t.uuid;
    turnsOwner = t.owner_token;
    id.turn = (await must(f.api.get(`/api/rooms/${turns}/turns/current`))).current.id;
    lease.turn = (await must(f.api.post(`/api/rooms/${turns}/turns/${id.turn}/claim`, { agent_id: "alice" }))).lease_token;
  });
  after(() => f.close());

  const headSize = async (room: string) => (await f.api.get(`/api/rooms/${room}`)).body.head.size as number;

  // Route (relative to the room), a valid body, the free-text fields that go into the log, and the owner token if it needs one.
  const writes: { route: string; room: () => string; body: () => Record<string, unknown>; fields: string[]; owner?: () => string }[] = [
    { route: "/messages", room: () => open, body: () => ({ agent_id: "bob", text: "hi", memory_root: "root" }), fields: ["text", "memory_root"] },
    { route: "/claims", room: () => open, body: () => ({ subject: "date", value: "Friday", opened_by: "bob", quote: "Friday works" }), fields: ["subject", "value", "quote"] },
    { route: "/claims/:thread/revisions", room: () => open, body: () => ({ agent_id: "alice", kind: "update", value: "11", quote: "eleven" }), fields: ["value", "quote"] },
    { route: "/tasks", room: () => open, body: () => ({ agent_id: "bob", title: "t", description: "d", context_refs: ["ref"] }), fields: ["title", "description", "context_refs.0"] },
    { route: "/tasks/:bob/heartbeat", room: () => open, body: () => ({ agent_id: "bob", lease_token: lease.bob, progress: "half" }), fields: ["progress"] },
    {
      route: "/tasks/:bob/submit",
      room: () => open,
      body: () => ({ agent_id: "bob", lease_token: lease.bob, status: "completed", summary: "done", artifacts: [{ type: "url", ref: "https://example.com/pr/1" }, { type: "text", ref: "r", note: "n" }] }),
      fields: ["summary", "artifacts.0.ref", "artifacts.1.ref", "artifacts.1.note"],
    },
    { route: "/tasks/:bob/fail", room: () => open, body: () => ({ agent_id: "bob", lease_token: lease.bob, reason: "broke" }), fields: ["reason"] },
    { route: "/tasks/:bob/handoff", room: () => open, body: () => ({ agent_id: "bob", lease_token: lease.bob, to_agent: "carol", note: "yours" }), fields: ["note"] },
    { route: "/tasks/:dan/review", room: () => open, body: () => ({ agent_id: "carol", decision: "accept", note: "fine" }), fields: ["note"] },
    { route: "/tasks/:bob/cancel", room: () => open, body: () => ({ agent_id: "alice", reason: "obsolete" }), fields: ["reason"] },
    { route: "/turns/:turn/reply", room: () => turns, body: () => ({ agent_id: "alice", lease_token: lease.turn, text: "my turn", result: "continue" }), fields: ["text"] },
    { route: "/turns/note", room: () => turns, body: () => ({ text: "note" }), fields: ["text"], owner: () => turnsOwner },
    { route: "/turns/cancel", room: () => turns, body: () => ({ reason: "done" }), fields: ["reason"], owner: () => turnsOwner },
  ];

  test("the table covers every free-text field of each body", () => {
    for (const w of writes) {
      const free = stringPaths(w.body()).map((path) => path.join(".")).filter((path) => !["agent_id", "lease_token", "opened_by", "kind", "status", "decision", "result", "to_agent"].includes(path) && !path.endsWith(".type"));
      assert.deepEqual(free, w.fields, w.route);
    }
  });

  let n = 0;
  for (const w of writes) {
    for (const field of w.fields) {
      const secret = SECRETS[n++ % SECRETS.length]!;
      test(`POST …${w.route} ${field}: ${secret.kind} → 422, nothing written`, async () => {
        const room = w.room();
        const route = w.route.replace(/:(\w+)/, (_, name: string) => String(id[name]));
        const headers = w.owner ? { authorization: `Bearer ${w.owner()}` } : undefined;
        const before = await headSize(room);
        const key = secret.make();
        const r = await f.api.post(`/api/rooms/${room}${route}`, withValue(w.body(), field.split("."), `see ${key} here`), headers);
        assert.equal(r.status, 422, JSON.stringify(r.body));
        assert.equal(r.body.code, "secret_detected");
        assert.equal(r.body.kind, secret.kind);
        assert.equal(r.body.field, field);
        assert.equal(r.body.offset, secret.kind === "secret_assignment" ? 14 : 4);
        assert.ok(r.body.detail.startsWith(`${field}: `), r.body.detail);
        assert.match(r.body.detail, /public and permanent/);
        assert.ok(!r.body.detail.includes(key.slice(-12)), "the answer does not repeat the secret");
        assert.equal(await headSize(room), before, "nothing was written");
      });
    }
  }

  test("a room description carrying a key is refused, and no room is created", async () => {
    const marker = `screen-${crypto.randomUUID().slice(0, 8)}`;
    const listed = async () => (await f.api.get(`/api/rooms?q=${marker}`)).body.total as number;
    const described = await f.api.post("/api/rooms", { description: `${marker} CI uses ${SECRETS[0]!.make()}`, is_public: true });
    assert.equal(described.status, 422);
    assert.deepEqual([described.body.code, described.body.kind, described.body.field], ["secret_detected", "github_token", "description"]);
    assert.equal(await listed(), 0);
    assert.equal((await f.api.post("/api/rooms", { description: `${marker} a clean room`, is_public: true })).status, 201);
    assert.equal(await listed(), 1);
  });

  test("a PEM private key in a message is refused", async () => {
    const { privateKey } = crypto.generateKeyPairSync("ed25519");
    const text = `Deploy key:\n${privateKey.export({ type: "pkcs8", format: "pem" }) as string}`;
    const before = await headSize(open);
    const r = await f.api.say(open, "bob", text);
    assert.equal(r.status, 422);
    assert.deepEqual([r.body.code, r.body.kind, r.body.field, r.body.offset], ["secret_detected", "private_key", "text", 12]);
    assert.equal(await headSize(open), before);
  });

  test("after the refusals the task and the turn are as they were, and clean writes go through", async () => {
    assert.equal((await f.api.get(`/api/rooms/${open}/tasks/${id.bob}`)).body.status, "claimed");
    assert.equal((await f.api.get(`/api/rooms/${open}/tasks/${id.dan}`)).body.status, "submitted");
    const current = (await f.api.get(`/api/rooms/${turns}/turns/current`)).body.current;
    assert.deepEqual([current.id, current.status], [id.turn, "claimed"]);
    const texts = (await f.api.get(`/api/rooms/${open}/messages`)).body.messages.map((m: { text: string }) => m.text);
    assert.deepEqual(texts, ["hello"], "no refused message was stored");

    const before = await headSize(open);
    const posted = await f.api.say(open, "bob", `Merged ${crypto.randomBytes(20).toString("hex")} into main; room ${open}, root ${crypto.randomBytes(32).toString("base64")}; password = os.environ["DB_PASSWORD"]`);
    assert.equal(posted.status, 201, JSON.stringify(posted.body));
    const submitted = await f.api.post(`/api/rooms/${open}/tasks/${id.bob}/submit`, {
      agent_id: "bob", lease_token: lease.bob, status: "completed", summary: "token=<your token> goes in .env",
      artifacts: [{ type: "commit", ref: crypto.randomBytes(20).toString("hex") }, { type: "hash", ref: crypto.randomUUID(), sha256: crypto.randomBytes(32).toString("hex") }],
    });
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    assert.equal(await headSize(open), before + 2);
    const replied = await f.api.post(`/api/rooms/${turns}/turns/${id.turn}/reply`, { agent_id: "alice", lease_token: lease.turn, text: "password: ******** (ask the owner)", result: "continue" });
    assert.equal(replied.status, 200, JSON.stringify(replied.body));
  });

  test("MCP send_message and open_thread refuse the same text with the same body", async () => {
    const mcp = await connectMcp(f.url);
    try {
      const before = await headSize(open);
      const key = p("sk", "_live_", rand(ALNUM, 24));
      const sent = await fails(mcp, "send_message", { room: open, agent_id: "bob", text: `here: ${key}` }, "secret_detected");
      assert.deepEqual([(sent as any).kind, (sent as any).field, (sent as any).offset], ["stripe_secret_key", "text", 6]);
      assert.match(sent.detail, /^text: /);
      const thread = await fails(mcp, "open_thread", { room: open, subject: "deploy key", value: key, opened_by: "bob" }, "secret_detected");
      assert.equal((thread as any).field, "value");
      assert.equal(await headSize(open), before, "nothing was written");
      await ok(mcp, "send_message", { room: open, agent_id: "bob", text: "the key is in the vault, not here" });
      assert.equal(await headSize(open), before + 1);
    } finally {
      await mcp.close();
    }
  });
});
