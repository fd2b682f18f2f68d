import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { rawSql } from "../helpers/db";
import { ManualClock, startApi, tempDir, withApi, type TestApi } from "../helpers/server";
import type { RunningServer } from "../../server";
import { waitUntil } from "../helpers/wait";

const run = promisify(execFile);
const SOURCE = fileURLToPath(new URL("../../skill/", import.meta.url));
const UNKNOWN_ROOM = "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23";

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** Unpacks the served tarball the way the install line does: curl | tar -xz -C <dir>. */
async function installFrom(server: RunningServer): Promise<string> {
  const dir = tempDir("parley-skill-");
  const res = await fetch(`${server.url}/parley-skill.tar.gz`);
  assert.equal(res.status, 200);
  fs.writeFileSync(path.join(dir, "pack.tar.gz"), Buffer.from(await res.arrayBuffer()));
  await run("tar", ["-xzf", "pack.tar.gz"], { cwd: dir });
  return dir;
}

/** Runs the unpacked script in a child process (async: the server lives in this process). */
function script(dir: string, env: Record<string, string> = {}) {
  const file = path.join(dir, "parley", "scripts", "parley.mjs");
  const state = path.join(dir, "state.json");
  return async (args: string[], extraEnv: Record<string, string> = {}, stdin?: string): Promise<Outcome> => {
    const childEnv: Record<string, string> = { PATH: process.env.PATH ?? "", HOME: dir, PARLEY_STATE: state, ...env, ...extraEnv };
    const child = run(process.execPath, [file, ...args], { env: childEnv as NodeJS.ProcessEnv, timeout: 60_000 });
    if (stdin !== undefined) {
      child.child.stdin!.end(stdin);
    } else child.child.stdin!.end();
    try {
      const { stdout, stderr } = await child;
      return { code: 0, stdout, stderr };
    } catch (err: any) {
      if (typeof err.code !== "number") throw err;
      return { code: err.code, stdout: err.stdout, stderr: err.stderr };
    }
  };
}

const json = (o: Outcome) => JSON.parse(o.stdout);

function frontMatter(text: string): { fields: Record<string, string>; body: string } {
  const m = /^---\n([\s\S]*?)\n---\n([\s\S]*)$/.exec(text);
  assert.ok(m, "SKILL.md starts with YAML front matter");
  const fields: Record<string, string> = {};
  for (const line of m[1]!.split("\n")) {
    const kv = /^([a-z-]+):\s*(.*)$/.exec(line);
    assert.ok(kv, `simple "key: value" front matter line: ${line}`);
    fields[kv[1]!] = kv[2]!;
  }
  return { fields, body: m[2]! };
}

describe("skill pack", () => {
  let f: TestApi;
  let dir: string;
  let parley: ReturnType<typeof script>;

  before(async () => {
    f = await startApi();
    dir = await installFrom(f.server);
    parley = script(dir);
  });
  after(() => f.close());

  test("the tarball has deterministic bytes and holds exactly the skill's source files", async () => {
    const a = await fetch(`${f.url}/parley-skill.tar.gz`);
    const b = await fetch(`${f.url}/parley-skill.tar.gz`);
    assert.match(a.headers.get("content-type")!, /application\/gzip/);
    const bytesA = Buffer.from(await a.arrayBuffer());
    assert.ok(bytesA.equals(Buffer.from(await b.arrayBuffer())), "byte-identical on two fetches");
    await withApi({}, async (other) => {
      const c = Buffer.from(await (await fetch(`${other.url}/parley-skill.tar.gz`)).arrayBuffer());
      assert.ok(bytesA.equals(c), "and on another server start");
    });
    const etag = a.headers.get("etag")!;
    const again = await fetch(`${f.url}/parley-skill.tar.gz`, { headers: { "if-none-match": etag } });
    assert.equal(again.status, 304);

    const { stdout } = await run("tar", ["-tvzf", path.join(dir, "pack.tar.gz")]);
    const listing = stdout.trim().split("\n");
    assert.deepEqual(listing.map((l) => l.split(/\s+/).at(-1)), ["parley/", "parley/SKILL.md", "parley/scripts/", "parley/scripts/parley.mjs"]);
    assert.ok(listing.every((l) => l.includes(" 0/0 ")), "uid/gid 0");
    assert.match(listing[3]!, /^-rwxr-xr-x/, "the script is executable");
    for (const rel of ["parley/SKILL.md", "parley/scripts/parley.mjs"]) {
      assert.ok(fs.readFileSync(path.join(dir, rel)).equals(fs.readFileSync(path.join(SOURCE, rel))), `${rel} is the source file`);
    }
  });

  test("SKILL.md has agentskills.io front matter: name = folder, description <= 1024, body < 500 lines", () => {
    const { fields, body } = frontMatter(fs.readFileSync(path.join(dir, "parley", "SKILL.md"), "utf8"));
    assert.equal(fields.name, "parley");
    assert.equal(fields.name, path.basename(path.join(dir, "parley")), "name equals the folder");
    assert.match(fields.name!, /^[a-z0-9]+(-[a-z0-9]+)*$/);
    assert.ok(fields.name!.length <= 64);
    assert.ok(fields.description!.length > 50 && fields.description!.length <= 1024, `description ${fields.description!.length} chars`);
    assert.match(fields.description!, /Use this skill when/);
    assert.ok((fields.compatibility ?? "").length <= 500);
    assert.ok(body.split("\n").length < 500);
    for (const topic of ["## The loop", "## When to speak", "## When to stop", "## Signing", "## Checking the history", "verify"]) {
      assert.ok(body.includes(topic), `the body covers ${topic}`);
    }
  });

  test("the files are browsable under /skill/ as text", async () => {
    const index = await fetch(`${f.url}/skill/`);
    assert.equal(index.status, 200);
    const text = await index.text();
    assert.ok(text.includes(`${f.url}/skill/parley/SKILL.md`));
    assert.ok(text.includes(`${f.url}/skill/parley/scripts/parley.mjs`));
    for (const rel of ["parley/SKILL.md", "parley/scripts/parley.mjs"]) {
      const res = await fetch(`${f.url}/skill/${rel}`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type")!, /^text\/plain; charset=utf-8/);
      assert.ok(Buffer.from(await res.arrayBuffer()).equals(fs.readFileSync(path.join(dir, rel))));
    }
    const missing = await fetch(`${f.url}/skill/parley/../../package.json`);
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).code, "not_found");
    const nothing = await fetch(`${f.url}/skill/parley/nope.md`);
    assert.equal(nothing.status, 404);
    assert.equal((await nothing.json()).code, "not_found");
  });

  test("/agents.md shows the one-line installs and the MCP line", async () => {
    const md = await (await fetch(`${f.url}/agents.md`)).text();
    assert.ok(md.includes(`claude mcp add --transport http parley ${f.url}/mcp`));
    for (const dirName of ["~/.claude/skills", "~/.codex/skills", "~/.openclaw/skills", "~/.hermes/skills"]) {
      assert.ok(md.includes(`mkdir -p ${dirName} && curl -sL ${f.url}/parley-skill.tar.gz | tar -xz -C ${dirName}`), dirName);
    }
  });

  test("help, usage errors and exit code 2", async () => {
    const help = await parley(["help"]);
    assert.equal(help.code, 0);
    for (const cmd of ["info", "read", "wait", "send", "create", "verify", "keygen"]) assert.ok(help.stdout.includes(`  ${cmd} `), cmd);
    assert.equal((await parley([])).code, 2);
    assert.equal((await parley(["frobnicate"])).code, 2);
    assert.equal((await parley(["read"])).code, 2, "no room");
    assert.equal((await parley(["read", UNKNOWN_ROOM])).code, 2, "a bare UUID of an unknown server");
    assert.equal((await parley(["read", `${f.url}/${UNKNOWN_ROOM}`, "--bogus"])).code, 2);
    assert.equal((await parley(["read", `${f.url}/${UNKNOWN_ROOM}`, "--limit", "many"])).code, 2);
    const noAgent = await parley(["send", `${f.url}/${UNKNOWN_ROOM}`, "hi"]);
    assert.equal(noAgent.code, 2);
    assert.match(noAgent.stderr, /--agent/);
  });

  test("create, keygen, signed send, read, wait, info and verify against a real server", async () => {
    const created = await parley(["create", f.url, "--description", "Split the bill", "--public"]);
    assert.equal(created.code, 0, created.stderr);
    const room = json(created);
    assert.equal(room.url, `${f.url}/${room.uuid}`);
    assert.ok(room.owner_token);
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}`)).body.description, "Split the bill");

    const key = path.join(dir, "bob.key");
    const keygen = await parley(["keygen", "--out", key]);
    assert.equal(keygen.code, 0, keygen.stderr);
    const { pubkey_hex, key_ref } = json(keygen);
    assert.equal((fs.statSync(key).mode & 0o777).toString(8), "600");
    assert.equal((await parley(["keygen", "--out", key])).code, 2, "never overwrites a key silently");

    assert.equal((await f.api.say(room.uuid, "alice", "I paid 60 for dinner.")).status, 201);
    const sent = await parley(["send", room.url, "--agent", "bob", "--key", key, "--reply-to", "2", "I owe you 30 then."]);
    assert.equal(sent.code, 0, sent.stderr);
    const posted = json(sent);
    assert.equal(posted.auth, "signed");
    assert.equal(posted.key_ref, key_ref);
    const stored = (await f.api.get(`/api/rooms/${room.uuid}/messages?since=0`)).body.messages.at(-1);
    assert.equal(stored.pubkey_hex, pubkey_hex);
    assert.equal(stored.reply_to, 2);
    assert.equal(stored.text, "I owe you 30 then.");

    const fromStdin = await parley(["send", "--agent", "bob", "-"], { PARLEY_ROOM: room.uuid, PARLEY_KEY: key }, "Line one\nLine two\n");
    assert.equal(fromStdin.code, 0, fromStdin.stderr);
    assert.equal(json(fromStdin).auth, "signed");
    const unsigned = await parley(["send", room.url, "--agent", "bob", "not signed"]);
    assert.equal(unsigned.code, 5, "403 signature_required is an error, not a stop");
    assert.match(unsigned.stderr, /signature_required/);

    const read = await parley(["read", room.url]);
    assert.equal(read.code, 0, read.stderr);
    const page = json(read);
    assert.deepEqual(page.messages.map((m: any) => [m.agent_id, m.text]), [["alice", "I paid 60 for dinner."], ["bob", "I owe you 30 then."], ["bob", "Line one\nLine two"]]);
    assert.equal(page.next_since, 4);
    const tail = json(await parley(["read", room.url, "--tail", "1"]));
    assert.deepEqual(tail.messages.map((m: any) => m.id), [4]);
    const since = json(await parley(["read", room.url, "--since", "2", "--limit", "1"]));
    assert.deepEqual(since.messages.map((m: any) => m.id), [3]);
    assert.equal(since.has_more, true);

    // wait: from the saved cursor (4), woken by alice's next message.
    const idle = f.server.svc.notifier.streamCount;
    const waiting = parley(["wait", room.url, "--timeout", "20"]);
    // A child process starts slowly on a busy machine: allow it most of its 20 s wait to get parked.
    await waitUntil("parley wait parking its long-poll", () => f.server.svc.notifier.streamCount > idle, 15_000);
    assert.equal((await f.api.say(room.uuid, "alice", "Deal.")).status, 201);
    const woke = await waiting;
    assert.equal(woke.code, 0, woke.stderr);
    assert.deepEqual(json(woke).messages.map((m: any) => m.text), ["Deal."]);
    const quiet = await parley(["wait", room.url, "--timeout", "0.5"]);
    assert.deepEqual(json(quiet).messages, [], "nothing new: an empty page after the timeout");
    assert.equal(json(quiet).next_since, 5);

    const info = await parley(["info", room.url]);
    assert.equal(info.code, 0);
    assert.equal(json(info).message_count, 4);

    const verify = await parley(["verify", room.url]);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    const report = json(verify);
    assert.equal(report.verdict, "CLEAN");
    assert.match(report.checkpoint, /saved receipt \(seq 4\)/);

    const state = JSON.parse(fs.readFileSync(path.join(dir, "state.json"), "utf8"));
    assert.equal(state.rooms[room.uuid].receipt.seq, 4);
    assert.equal(state.rooms[room.uuid].owner_token, room.owner_token);
    assert.equal((fs.statSync(path.join(dir, "state.json")).mode & 0o777).toString(8), "600");
  });

  test("turns rooms: turn waits, claims and shows the input; reply answers; a signed agent; 7 when not yet, 3 when completed", async () => {
    const room = (await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["ann", "bo"] } })).body;
    const key = path.join(dir, "ann.key");
    assert.equal((await parley(["keygen", "--out", key])).code, 0);
    const early = await parley(["turn", room.url, "--agent", "bo", "--timeout", "0"]);
    assert.equal(early.code, 7, early.stderr);
    assert.match(early.stderr, /Not your turn yet/);
    const t1 = await parley(["turn", room.url, "--agent", "ann", "--key", key, "--json"]);
    assert.equal(t1.code, 0, t1.stderr);
    assert.equal(json(t1).turn.agent_id, "ann");
    assert.match(json(t1).input_messages[0].text, /Turns protocol/);
    assert.equal((await parley(["reply", room.url, "--agent", "ann", "Hello Bo."])).code, 2, "--result is required");
    const r1 = await parley(["reply", room.url, "--agent", "ann", "--key", key, "--result", "complete", "Shall we finish?"]);
    assert.equal(r1.code, 0, r1.stderr);
    assert.deepEqual(json(r1).next, { id: json(r1).next.id, agent_id: "bo", phase: "confirm" });
    const t2 = await parley(["turn", room.url, "--agent", "bo"]);
    assert.equal(t2.code, 0, t2.stderr);
    assert.match(t2.stdout, /Shall we finish\?/);
    const r2 = await parley(["reply", room.url, "--agent", "bo", "--result", "complete", "-"], {}, "Yes.\n");
    assert.equal(json(r2).room_status, "completed");
    const after = await parley(["turn", room.url, "--agent", "ann"]);
    assert.equal(after.code, 3);
    const msgs = (await f.api.get(`/api/rooms/${room.uuid}/messages`)).body.messages;
    assert.equal(msgs[1].auth, "signed");
    assert.equal((await f.api.post(`/api/rooms/${room.uuid}/verify`, {})).body.verdict, "CLEAN");
  });

  test("the script's own JCS signs text with non-ASCII, quotes, escapes and emoji the way the server checks it", async () => {
    const { uuid } = await f.api.room();
    const key = path.join(dir, "unicode.key");
    await parley(["keygen", "--out", key]);
    const text = 'Prix : 30 € — d\'accord ? 🤝 "quoted" \\ back\tslash\u0007 Ωμέγα 日本';
    const sent = await parley(["send", `${f.url}/${uuid}`, "--agent", "zoë", "--key", key, "--memory-root", "mr-1", "--", text]);
    assert.equal(sent.code, 0, sent.stderr);
    const stored = (await f.api.get(`/api/rooms/${uuid}/messages`)).body.messages[0];
    assert.equal(stored.text, text);
    assert.equal(stored.auth, "signed");
    assert.equal(stored.memory_root, "mr-1");
  });

  test("verify with the saved receipt detects a rewritten history that is otherwise self-consistent", async () => {
    const { uuid } = await f.api.room({ description: "Price negotiation" });
    const url = `${f.url}/${uuid}`;
    assert.equal((await f.api.say(uuid, "alice", "I offer 100.")).status, 201);
    const before = (await f.server.svc.store.getRoom(uuid))!;
    const key = path.join(dir, "carol.key");
    await parley(["keygen", "--out", key]);
    assert.equal((await parley(["send", url, "--agent", "carol", "--key", key, "Accepted at 100."])).code, 0);
    assert.equal((await parley(["send", url, "--agent", "carol", "--key", key, "Shipping on Monday."])).code, 0);
    assert.equal(json(await parley(["verify", url])).verdict, "CLEAN");

    // The operator rewrites history: drops carol's two events, rolls the head back and lets a
    // new event take their place. Chain, tree and checkpoints are all valid again afterwards.
    await rawSql(f.server.svc, "DELETE FROM events WHERE room = ? AND seq > ?", [uuid, before.headSize]);
    await rawSql(f.server.svc, "DELETE FROM messages WHERE room = ? AND seq > ?", [uuid, before.headSize]);
    await rawSql(
      f.server.svc,
      "UPDATE rooms SET head_size = ?, head_leaf = ?, head_root = ?, frontier = ?, checkpoint = ?, message_count = ?, agent_count = ?, last_activity_at = ?, expires_at = ? WHERE uuid = ?",
      [before.headSize, before.headLeaf, before.headRoot, before.frontier, before.checkpoint, before.messageCount, before.agentCount, before.lastActivityAt, before.expiresAt, uuid],
    );
    assert.equal((await f.api.say(uuid, "alice", "I offer 150.")).status, 201);

    const fresh = script(dir, { PARLEY_STATE: path.join(tempDir(), "state.json") });
    const blind = await fresh(["verify", url]);
    assert.equal(json(blind).verdict, "CLEAN", "without a kept checkpoint the rewrite is invisible");

    const caught = await parley(["verify", url]);
    assert.equal(caught.code, 1, caught.stdout + caught.stderr);
    const report = json(caught);
    assert.equal(report.verdict, "REFUTED");
    assert.match(report.checkpoint, /saved receipt \(seq 4\)/);
    assert.match(caught.stderr, /REFUTED/);

    const state = JSON.parse(fs.readFileSync(path.join(dir, "state.json"), "utf8"));
    const file = path.join(dir, "kept-checkpoint.txt");
    fs.writeFileSync(file, state.rooms[uuid].receipt.checkpoint);
    const explicit = await fresh(["verify", url, "--checkpoint", file]);
    assert.equal(explicit.code, 1);
    assert.equal(json(explicit).verdict, "REFUTED");
  });

  test("exit code 3 (stop) for 404 and room_full", async () => {
    const gone = await parley(["read", `${f.url}/${UNKNOWN_ROOM}`]);
    assert.equal(gone.code, 3);
    assert.match(gone.stderr, /room_not_found[\s\S]*Stop/);
    assert.equal((await parley(["info", `${f.url}/${UNKNOWN_ROOM}`])).code, 3);
    assert.equal((await parley(["send", `${f.url}/${UNKNOWN_ROOM}`, "--agent", "x", "hi"])).code, 3);

    await withApi({ PARLEY_ROOM_MESSAGE_CAP: "1" }, async (capped) => {
      const { uuid } = await capped.api.room();
      const url = `${capped.url}/${uuid}`;
      assert.equal((await parley(["send", url, "--agent", "x", "only one"])).code, 0);
      const full = await parley(["send", url, "--agent", "x", "one too many"]);
      assert.equal(full.code, 3);
      assert.match(full.stderr, /room_full/);
    });
  });

  test("exit code 3 (stop) for an expired room (410)", async () => {
    const clock = new ManualClock(Date.now());
    await withApi({ PARLEY_ROOM_IDLE_TTL: "1h" }, async (expiring) => {
      const { uuid } = await expiring.api.room();
      const url = `${expiring.url}/${uuid}`;
      assert.equal((await parley(["read", url])).code, 0);
      clock.advance(3_600_000 + 1);
      for (const args of [["read", url], ["wait", url, "--timeout", "1"], ["info", url], ["send", url, "--agent", "x", "hello?"], ["verify", url]]) {
        const out = await parley(args);
        assert.equal(out.code, 3, args[0]);
        assert.match(out.stderr, /410 room_expired/);
      }
    }, { clock });
  });

  test("exit code 4 (back off) for rate_limited, with the Retry-After seconds", async () => {
    await withApi({ PARLEY_RATE_AGENT_POSTS_PER_MINUTE: "1" }, async (limited) => {
      const { uuid } = await limited.api.room();
      const url = `${limited.url}/${uuid}`;
      assert.equal((await parley(["send", url, "--agent", "x", "first"])).code, 0);
      const again = await parley(["send", url, "--agent", "x", "second"]);
      assert.equal(again.code, 4);
      assert.match(again.stderr, /429 rate_limited/);
      assert.match(again.stderr, /Retry-After: \d+/);
    });
  });
});
