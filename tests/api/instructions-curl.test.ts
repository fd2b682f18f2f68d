/**
 * Every curl line the service prints for agents — each kind of room's markdown and /agents.md —
 * is run, as printed, with the real `curl` binary (through bash) against a real server: the
 * placeholders (ROOM_ID, LAST_SEEN_ID, THREAD_ID, TASK_ID, TURN_ID, LEASE_TOKEN, OWNER_TOKEN,
 * CONTEXT_HASH, MESSAGE_ID, YOU, the signature fields) are replaced by real values, and each answer
 * must have the status and the JSON shape its route documents (the zod schema the OpenAPI document
 * is built from), or the error the line says it demonstrates (`# → 400 validation_error`).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { z } from "zod";
import { routeDocs } from "../../api/http";
import { canonicalize } from "../../lib/log/jcs";
import { EMPTY, arbiterEnv, startFakeLlm, type FakeLlm } from "../helpers/fake-llm";
import { startApi, tempDir, type TestApi } from "../helpers/server";

interface Command {
  /** The logical line as printed (continuations joined), comments included. */
  text: string;
  /** The `## ` section it is printed under. */
  section: string;
  /** `# → <status> <code>`: the line demonstrates this error. */
  expectError?: { status: number; code: string };
}

/** The curl commands of a markdown document: shell code blocks and inline code spans. */
function curlCommands(md: string): Command[] {
  const commands: Command[] = [];
  let section = "";
  let fence: string | null = null;
  let pending = "";
  for (const line of md.split("\n")) {
    if (fence === null) {
      const open = /^```(\w*)/.exec(line);
      if (open) {
        fence = open[1]!;
        continue;
      }
      if (line.startsWith("## ")) section = line.slice(3).trim();
      for (const span of line.matchAll(/`(curl [^`]+)`/g)) commands.push({ text: span[1]!, section });
      continue;
    }
    if (line.startsWith("```")) {
      fence = null;
      continue;
    }
    if (fence !== "sh") continue;
    pending += pending ? `\n${line}` : line;
    if (line.endsWith("\\")) continue;
    if (/(^|\s|&&\s*)curl\s/.test(pending)) {
      const expect = /#\s*→\s*(\d{3})\s+([a-z_]+)\s*$/.exec(pending);
      commands.push({ text: pending, section, expectError: expect ? { status: Number(expect[1]), code: expect[2]! } : undefined });
    }
    pending = "";
  }
  return commands;
}

/** The command without its shell comments (none of the printed commands has a `#` inside quotes). */
const withoutComments = (cmd: string) => cmd.split("\n").map((l) => l.replace(/\s+#\s.*$/, "")).join("\n");

const PLACEHOLDER = /\b(ROOM_ID|LAST_SEEN_ID|THREAD_ID|TASK_ID|TURN_ID|LEASE_TOKEN|OWNER_TOKEN|CONTEXT_HASH|MESSAGE_ID|YOU)\b/g;
type Vars = Partial<Record<string, string>>;

function substitute(cmd: string, vars: Vars): string {
  return cmd.replace(PLACEHOLDER, (name) => {
    const value = vars[name];
    assert.ok(value !== undefined, `no value for ${name} in: ${cmd}`);
    return value;
  });
}

/** Signs a printed signed-post command the way the Signing section says, and fills in its sig fields. */
function signCommand(cmd: string, room: string): string {
  const body = /-d '([^']+)'/.exec(cmd)![1]!;
  const parsed = JSON.parse(body) as Record<string, unknown> & { agent_id: string };
  const { agent_id, sig: _sig, ...payload } = parsed;
  const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
  const pubkeyHex = (publicKey.export({ format: "der", type: "spki" }) as Buffer).subarray(-32).toString("hex");
  const ts = new Date().toISOString();
  const nonce = crypto.randomBytes(16).toString("hex");
  const signed = canonicalize({ v: 1, room, type: "message.posted", actor: agent_id, payload, ts, nonce });
  const signatureHex = crypto.sign(null, Buffer.from(signed, "utf8"), privateKey).toString("hex");
  const fields: Record<string, string> = { PUBKEY_HEX: pubkeyHex, SIGNATURE_HEX: signatureHex, TS: ts, NONCE: nonce };
  return cmd.replace(/"(PUBKEY_HEX|SIGNATURE_HEX|TS|NONCE)"/g, (_m, name: string) => JSON.stringify(fields[name]));
}

let home: string;
const shellEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, LANG: "C.UTF-8", NODE_ENV: "test" });

/** Runs a command with bash; `curl` is the real binary, told to print the status after the body. */
function runShell(cmd: string, opts: { withStatus: boolean }): Promise<{ exit: number; stdout: string; stderr: string }> {
  const script = opts.withStatus ? `curl() { command curl -w '\\n%{http_code}' "$@"; }\n${cmd}` : `set -o pipefail\n${cmd}`;
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", script], { cwd: home, env: shellEnv() });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString("utf8")));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
    // A guard against a line that hangs (a long-poll that nothing wakes), not a timing assertion.
    const guard = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(guard);
      resolve({ exit: code ?? -1, stdout, stderr });
    });
  });
}

/** Runs a streaming command (`curl -N`) until its first complete Server-Sent Event, then stops it. */
function firstSseEvent(cmd: string): Promise<{ id: string; event: string; data: unknown }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", cmd], { cwd: home, env: shellEnv(), detached: true });
    let out = "";
    const stop = () => {
      try {
        process.kill(-child.pid!, "SIGTERM");
      } catch {
        /* already gone */
      }
    };
    const guard = setTimeout(() => {
      stop();
      reject(new Error(`no event from ${cmd}; got ${JSON.stringify(out)}`));
    }, 60_000);
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString("utf8");
      const frame = out.split("\n\n").find((block, i, all) => i < all.length - 1 && /^data: /m.test(block));
      if (!frame) return;
      clearTimeout(guard);
      stop();
      const field = (name: string) => frame.split("\n").find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2) ?? "";
      resolve({ id: field("id"), event: field("event"), data: JSON.parse(field("data")) as unknown });
    });
    child.on("error", reject);
  });
}

/** The documented route of a request: method and path matched against the OpenAPI registry. */
function routeOf(method: string, pathname: string) {
  const candidates = routeDocs.filter((r) => {
    if (r.method !== method.toLowerCase()) return false;
    const pattern = new RegExp(`^${r.path.replace(/:[a-z]+/g, "[^/]+")}$`);
    return pattern.test(pathname);
  });
  // A literal segment beats a parameter (…/tasks/claim-next over …/tasks/:tid).
  candidates.sort((a, b) => (a.path.match(/:/g)?.length ?? 0) - (b.path.match(/:/g)?.length ?? 0));
  return candidates[0];
}

interface Ran {
  command: string;
  status: number;
  body: any;
}

/** Per-command extra checks, on top of the documented status and shape. */
type Check = (ran: Ran, vars: Vars) => void;

/**
 * Runs the commands in order with the given placeholder values; what an answer hands back (a room,
 * a task, a lease, a turn, a context hash) becomes the value of its placeholder for the lines after.
 */
async function runAll(commands: Command[], vars: Vars, checks: [RegExp, Check][] = []): Promise<Ran[]> {
  const ran: Ran[] = [];
  const used = new Set<RegExp>();
  for (const c of commands) {
    let cmd = substitute(c.text, vars);
    if (/"PUBKEY_HEX"/.test(cmd)) cmd = signCommand(cmd, vars.ROOM_ID!);
    // Values handed back (a lease token such as "…-VC-…") are not placeholders: they are left out of the check.
    let rest = withoutComments(cmd).replace(/\b(POST|DELETE|GET)\b/g, "");
    // Longest first: taking out a short value ("3", a task id) first would cut a token that contains it,
    // which then stays behind, and a token ending in "-BY" reads as a placeholder.
    const values = Object.values(vars).filter((v): v is string => !!v).sort((a, b) => b.length - a.length);
    for (const value of values) rest = rest.split(value).join("");
    assert.doesNotMatch(rest, /\b[A-Z]{2,}(_[A-Z]+)*\b|<[^>]*>/, `a placeholder is left in: ${cmd}`);

    if (/\|\s*tar\b/.test(cmd)) {
      // An install line: it must unpack the skill where it says.
      const result = await runShell(cmd, { withStatus: false });
      assert.equal(result.exit, 0, `${cmd}\n${result.stderr}`);
      const dir = /-C (\S+)\s*$/.exec(withoutComments(cmd))![1]!.replace(/^~/, home);
      assert.ok(fs.existsSync(path.join(dir, "parley", "SKILL.md")), `${cmd} unpacked parley/SKILL.md`);
      ran.push({ command: cmd, status: 200, body: null });
      continue;
    }
    if (/\bcurl -N\b/.test(cmd)) {
      const first = await firstSseEvent(cmd);
      assert.match(first.id, /^\d+$/, cmd);
      assert.ok(first.event, cmd);
      assert.equal(typeof first.data, "object", cmd);
      ran.push({ command: cmd, status: 200, body: first });
      continue;
    }

    const result = await runShell(cmd, { withStatus: true });
    assert.equal(result.exit, 0, `${cmd}\n${result.stderr}`);
    const cut = result.stdout.lastIndexOf("\n");
    const status = Number(result.stdout.slice(cut + 1));
    const text = result.stdout.slice(0, cut);
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      assert.fail(`${cmd}\nanswered ${status} with a body that is not JSON: ${text.slice(0, 300)}`);
    }
    const url = new URL(/'(https?:\/\/[^']+)'/.exec(cmd)![1]!);
    const method = /-X (\w+)/.exec(cmd)?.[1] ?? "GET";
    const route = routeOf(method, url.pathname);
    assert.ok(route, `${method} ${url.pathname} is a documented route`);
    if (c.expectError) {
      assert.equal(status, c.expectError.status, `${cmd}\n${text}`);
      assert.equal(body.code, c.expectError.code, cmd);
      assert.equal(typeof body.detail, "string", cmd);
    } else {
      assert.equal(status, route.status ?? 200, `${cmd}\n${text}`);
      if (route.response) {
        const shape = (route.response as z.ZodType).safeParse(body);
        assert.ok(shape.success, `${cmd}\nthe answer does not have the documented shape: ${shape.error?.message}\n${text.slice(0, 500)}`);
      }
      if (method === "POST" && url.pathname === "/api/rooms") {
        vars.ROOM_ID = body.uuid;
        vars.OWNER_TOKEN = body.owner_token;
      }
      if (body.task?.id !== undefined) vars.TASK_ID = String(body.task.id);
      if (typeof body.lease_token === "string") vars.LEASE_TOKEN = body.lease_token;
      if (body.turn?.id !== undefined) vars.TURN_ID = String(body.turn.id);
      if (typeof body.context_hash === "string") vars.CONTEXT_HASH = body.context_hash;
    }
    const r = { command: cmd, status, body };
    for (const [pattern, check] of checks) {
      if (!pattern.test(c.text)) continue;
      check(r, vars);
      used.add(pattern);
    }
    ran.push(r);
  }
  for (const [pattern] of checks) assert.ok(used.has(pattern), `a printed line matches ${pattern}`);
  return ran;
}

let f: TestApi;
let llm: FakeLlm;
before(async () => {
  home = tempDir("parley-curl-home-");
  // An arbiter (the stand-in LLM, answering "nothing found") so that a premium room can exist.
  llm = await startFakeLlm({ handler: () => EMPTY });
  f = await startApi(arbiterEnv(llm, { PARLEY_ARBITER_RETRIES: "0" }));
});
after(async () => {
  await f.close();
  await llm.close();
  fs.rmSync(home, { recursive: true, force: true });
});

/** A room where two others have spoken: alice mentions your-name, then bob does not. */
async function roomWithTalk(body: Record<string, unknown> = {}) {
  const room = await f.api.room({ description: "Agree on a release date", ...body });
  const m1 = await f.api.say(room.uuid, "alice", "@your-name can you check the release date?");
  assert.equal(m1.status, 201);
  const m2 = await f.api.say(room.uuid, "bob", "Noted, the release on 14 March works for me.");
  assert.equal(m2.status, 201);
  return { room, vars: { ROOM_ID: room.uuid, OWNER_TOKEN: room.owner_token, LAST_SEEN_ID: String(m1.body.id - 1), MESSAGE_ID: String(m2.body.id) } as Vars };
}

async function withThread(room: string, vars: Vars) {
  const thread = await f.api.post(`/api/rooms/${room}/claims`, { opened_by: "alice", subject: "Price", value: "100 EUR" });
  assert.equal(thread.status, 201);
  vars.THREAD_ID = String(thread.body.id);
}

const markdown = async (room: string) => {
  const res = await fetch(`${f.url}/${room}?format=md`);
  assert.equal(res.status, 200);
  return res.text();
};

/** The checks every room and /agents.md share: the loop's lines answer what the text says. */
const loopChecks: [RegExp, Check][] = [
  [/messages\?since=0'/, (r) => assert.ok(r.body.messages.length >= 1, r.command)],
  [/-X POST '[^']+\/messages'/, (r) => assert.equal(r.body.agent_id, "your-name", r.command)],
  [/wait=25'/, (r) => assert.ok(r.body.messages.length >= 1, `${r.command}: newer messages exist, so it answers at once`)],
];

/** Every curl line of a document was run, and every line that says `curl` was found. */
function assertAllRun(md: string, commands: Command[], ran: Ran[]) {
  assert.equal(ran.length, commands.length);
  const printed = (md.match(/\bcurl -/g) ?? []).length;
  const extracted = commands.reduce((n, c) => n + (c.text.match(/\bcurl -/g) ?? []).length, 0);
  assert.equal(extracted, printed, "every curl in the text is in a command the test ran");
}

describe("the curl lines of each kind of room", () => {
  test("an open room", async () => {
    const { room, vars } = await roomWithTalk();
    const md = await markdown(room.uuid);
    const commands = curlCommands(md);
    assert.deepEqual(
      commands.map((c) => withoutComments(c.text).replace(/'[^']*'/g, "URL").replace(/\s+/g, " ")),
      ["curl -s URL", "curl -s -X POST URL -H URL \\ -d URL", "curl -s URL", "curl -s URL", "curl -s URL", "curl -N URL"],
      "read, post, wait, wait for mentions, room info, events",
    );
    const ran = await runAll(commands, vars, loopChecks);
    assertAllRun(md, commands, ran);
  });

  test("a room with ledger threads", async () => {
    const { room, vars } = await roomWithTalk();
    await withThread(room.uuid, vars);
    const md = await markdown(room.uuid);
    const commands = curlCommands(md);
    assert.ok(commands.some((c) => c.text.includes("/handshake")), "the ledger's lines are there");
    const ran = await runAll(commands, vars, [
      ...loopChecks,
      [/\/claims'/, (r) => assert.equal(r.body.opened_by, "your-name")],
      [/\/revisions'/, (r) => assert.equal(r.body.confirmations.length, 1)],
      [/\/handshake'/, (r) => assert.equal(r.body.handshake.agent_id, "your-name")],
    ]);
    assertAllRun(md, commands, ran);
  });

  test("a room with tasks", async () => {
    const { room, vars } = await roomWithTalk();
    const task = await f.api.post(`/api/rooms/${room.uuid}/tasks`, { agent_id: "alice", title: "Write the parser", requires: ["python"] });
    assert.equal(task.status, 201);
    const md = await markdown(room.uuid);
    const commands = curlCommands(md);
    assert.ok(commands.some((c) => c.text.includes("/tasks/claim-next")), "the board's lines are there");
    const ran = await runAll(commands, vars, [
      ...loopChecks,
      [/claim-next'/, (r) => assert.equal(r.body.task.id, task.body.task.id, "the open task is claimed")],
      [/\/submit'/, (r) => assert.equal(r.body.task.status, "submitted")],
    ]);
    assertAllRun(md, commands, ran);
  });

  test("a turns room", async () => {
    const room = await f.api.room({ mode: "turns", turns: { participants: ["ana", "ben"], max_rounds: 3 } });
    const md = await markdown(room.uuid);
    const commands = curlCommands(md);
    assert.ok(commands.some((c) => c.text.includes("/turns/mine")), "the turns lines are there");
    assert.ok(!commands.some((c) => /-X POST '[^']+\/messages'/.test(c.text)), "no post outside a turn");
    const ran = await runAll(commands, { ROOM_ID: room.uuid, YOU: "ana" }, [
      [/turns\/mine/, (r) => assert.equal(r.body.turn.agent_id, "ana", "ana's turn is open")],
      [/\/reply'/, (r) => assert.equal(r.body.next.agent_id, "ben", "the turn passed to ben")],
    ]);
    assertAllRun(md, commands, ran);
  });

  test("a premium room (the arbiter writes the ledger)", async () => {
    const { room, vars } = await roomWithTalk({ protocol_mode: "premium" });
    await withThread(room.uuid, vars);
    const md = await markdown(room.uuid);
    assert.match(md, /An arbiter/);
    const commands = curlCommands(md);
    assert.ok(commands.some((c) => c.text.includes("/handshake")));
    const ran = await runAll(commands, vars, loopChecks);
    assertAllRun(md, commands, ran);
  });
});

describe("the curl lines of /agents.md", () => {
  let md: string;
  let bySection: Map<string, Command[]>;
  before(async () => {
    const res = await fetch(`${f.url}/agents.md`);
    assert.equal(res.status, 200);
    md = await res.text();
    bySection = new Map();
    for (const c of curlCommands(md)) bySection.set(c.section, [...(bySection.get(c.section) ?? []), c]);
  });

  test("every section's lines run, each in a room of its own", async () => {
    const expected = ["Create a room", "How to take part", "Errors", "Ledger", "Tasks", "Turns", "Signing", "Watching and checking", "Install Parley as a tool (optional)"];
    assert.deepEqual([...bySection.keys()], expected);
    const ran: Ran[] = [];
    for (const [section, commands] of bySection) {
      const { vars } = await roomWithTalk();
      if (section === "Ledger") await withThread(vars.ROOM_ID!, vars);
      vars.YOU = "ana";
      const checks: Record<string, [RegExp, Check][]> = {
        "Create a room": [
          [/\/close'/, (r) => assert.equal(r.body.status, "closed")],
          [/\/reopen'/, (r) => assert.equal(r.body.status, "open")],
          [/-X DELETE/, (r, v) => assert.equal(r.body.deleted, v.ROOM_ID)],
        ],
        "How to take part": loopChecks,
        Tasks: [[/\/review'/, (r) => assert.equal(r.body.task.review.decision, "accept")]],
        Turns: [
          [/turns\/mine/, (r) => assert.equal(r.body.turn.agent_id, "ana")],
          [/\/turns\/cancel'/, (r) => assert.equal(r.body.status, "cancelled")],
        ],
        Signing: [[/\/messages'/, (r) => assert.equal(r.body.auth, "signed", "the recipe in the text gives a valid signature")]],
        "Watching and checking": [[/\/verify'/, (r) => assert.equal(r.body.verdict, "CLEAN")]],
      };
      ran.push(...(await runAll(commands, vars, checks[section] ?? [])));
    }
    assertAllRun(md, [...bySection.values()].flat(), ran);
  });
});

describe("@mentions", () => {
  // KNOWN FAILURE until `mentioning=` lands on GET /messages (issue 13, being built alongside):
  // today the parameter is ignored, so the wait answers every newer message and none carries
  // `mentions`. The lines above already run (they answer 200 with the documented shape); this
  // test holds them to what the text promises. Do not skip it: it turns green with the feature.
  test("waiting with mentioning= wakes only for messages that address you", async () => {
    const { room, vars } = await roomWithTalk();
    const agents = await (await fetch(`${f.url}/agents.md`)).text();
    const lines = [...curlCommands(await markdown(room.uuid)), ...curlCommands(agents)].filter((c) => c.text.includes("mentioning="));
    assert.equal(lines.length, 2, "the room and /agents.md both teach the mention wait");
    const ran = await runAll(lines, vars);
    for (const r of ran) {
      assert.ok(r.body.messages.length >= 1, r.command);
      for (const m of r.body.messages) {
        assert.ok(Array.isArray(m.mentions) && m.mentions.includes("your-name"), `${r.command}: message ${m.id} (${m.agent_id}) does not mention your-name`);
      }
      assert.ok(!r.body.messages.some((m: { agent_id: string }) => m.agent_id === "bob"), "bob's message does not mention your-name");
    }
    const post = await f.api.say(room.uuid, "your-name", "@other-agent I can take the parser.");
    assert.deepEqual(post.body.mentions, ["other-agent"], "a posted message lists its mentions");
  });
});
