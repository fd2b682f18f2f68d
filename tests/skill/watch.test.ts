import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startApi, tempDir, type TestApi } from "../helpers/server";
import { waitUntil } from "../helpers/wait";

const SCRIPT = fileURLToPath(new URL("../../skill/parley/scripts/parley.mjs", import.meta.url));
const run = promisify(execFile);

/** The command the watchers run: logs each run (its stdin and environment) and answers, or fails first when asked. */
const ANSWER = `import fs from "node:fs";
const input = JSON.parse(fs.readFileSync(0, "utf8"));
const log = process.env.RUNS;
const runs = fs.existsSync(log) ? fs.readFileSync(log, "utf8").split("\\n").filter(Boolean).length : 0;
const e = process.env;
fs.appendFileSync(log, JSON.stringify({ ids: input.map((m) => m.id), texts: input.map((m) => m.text), room: e.PARLEY_ROOM, agent: e.PARLEY_AGENT, since: e.PARLEY_SINCE, turn: e.PARLEY_TURN_ID, phase: e.PARLEY_TURN_PHASE }) + "\\n");
if (e.FAIL_FIRST && runs === 0) process.exit(1);
process.stdout.write("  answer to " + input.map((m) => m.id).join(",") + "\\n\\n");
`;

interface Run { ids: number[]; texts: string[]; room: string; agent: string; since: string; turn?: string; phase?: string }

describe("parley watch", () => {
  let f: TestApi;
  let dir: string;
  let answer: string;
  const children: ChildProcess[] = [];

  before(async () => {
    f = await startApi();
    dir = tempDir("parley-watch-");
    answer = path.join(dir, "answer.mjs");
    fs.writeFileSync(answer, ANSWER);
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    await f.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const exec = () => `"${process.execPath}" "${answer}"`;
  /** Each test keeps its state (cursors, locks) in a directory of its own. */
  let home = "";
  beforeEach(() => void (home = fs.mkdtempSync(path.join(dir, "home-"))));
  const locks = () => {
    const lockDir = path.join(home, "watch");
    return fs.existsSync(lockDir) ? fs.readdirSync(lockDir).filter((n) => n.endsWith(".lock")) : [];
  };

  /** A watcher in its own process, as an agent's harness would start it. */
  function watcher(args: string[], env: Record<string, string> = {}) {
    const childEnv: Record<string, string> = { PATH: process.env.PATH ?? "", HOME: home, PARLEY_STATE: path.join(home, "state.json"), ...env };
    const child = spawn(process.execPath, [SCRIPT, "watch", ...args], {
      env: childEnv as NodeJS.ProcessEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.stdout!.resume();
    const exited = new Promise<number>((resolve) => child.on("exit", (code, signal) => resolve(code ?? (signal === "SIGKILL" ? 137 : -1))));
    return {
      child,
      exited,
      stderr: () => stderr,
      started: () => waitUntil("the watcher starting", () => stderr.includes("parley watch: watching") || child.exitCode !== null, 15_000),
      stop: () => (child.kill("SIGTERM"), exited),
    };
  }

  /** waitUntil, with what the watcher said when it does not happen. */
  async function until(w: ReturnType<typeof watcher>, what: string, fn: () => Promise<boolean>) {
    try {
      await waitUntil(what, fn, 20_000);
    } catch (err) {
      throw new Error(`${(err as Error).message}; the watcher said:\n${w.stderr()}`);
    }
  }

  const runsOf = (file: string): Run[] => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as Run) : []);
  const messagesBy = async (room: string, agent: string) =>
    ((await f.api.get(`/api/rooms/${room}/messages?since=0&limit=500`)).body.messages as { id: number; agent_id: string; text: string; reply_to: number | null; auth: string; key_ref: string | null }[]).filter((m) => m.agent_id === agent);
  const say = async (room: string, agent: string, text: string) => {
    const r = await f.api.say(room, agent, text);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body as { id: number };
  };

  test("--help documents watch", async () => {
    const { stdout } = await run(process.execPath, [SCRIPT, "watch", "--help"]);
    for (const needle of ["watch  [room] --as NAME --exec", "PARLEY_ROOM, PARLEY_AGENT, PARLEY_SINCE", "PARLEY_RESULT_FILE", "exit 8", "exits 3"]) {
      assert.ok(stdout.includes(needle), `--help mentions ${needle}`);
    }
  });

  test("answers a mention as the agent, signed with its key, with the messages on stdin; a message that does not mention it runs nothing", async () => {
    const room = await f.api.room();
    const roomUrl = `${f.url}/${room.uuid}`;
    const runs = path.join(dir, "runs-mention.jsonl");
    const key = path.join(home, "bob.key");
    const made = JSON.parse((await run(process.execPath, [SCRIPT, "keygen", "--out", key], { env: { PATH: process.env.PATH ?? "", HOME: home } as Record<string, string> as NodeJS.ProcessEnv })).stdout);
    const w = watcher([roomUrl, "--as", "bob", "--exec", exec(), "--timeout", "1"], { RUNS: runs, PARLEY_KEY: key });
    await w.started();
    const other = await say(room.uuid, "carol", "Friday works for me.");
    const mention = await say(room.uuid, "alice", "@bob: is Friday fine for you?");
    await until(w, "bob's answer", async () => (await messagesBy(room.uuid, "bob")).length > 0);
    const [answered] = await messagesBy(room.uuid, "bob");
    assert.equal(answered!.text, `answer to ${mention.id}`, "the command's stdout, trimmed");
    assert.equal(answered!.reply_to, mention.id);
    assert.equal(answered!.auth, "signed");
    assert.equal(answered!.key_ref, made.key_ref);
    const log = runsOf(runs);
    assert.equal(log.length, 1, `one run, none for carol's message ${other.id}`);
    assert.deepEqual(log[0]!.ids, [mention.id]);
    assert.deepEqual(log[0]!.texts, ["@bob: is Friday fine for you?"]);
    assert.equal(log[0]!.room, roomUrl);
    assert.equal(log[0]!.agent, "bob");
    assert.ok(Number(log[0]!.since) >= 1 && Number(log[0]!.since) < mention.id, `PARLEY_SINCE ${log[0]!.since} is the cursor before the message`);
    // Its own answer does not wake it: the next mention is the next run.
    const second = await say(room.uuid, "alice", "thanks @Bob");
    await until(w, "the second answer", async () => (await messagesBy(room.uuid, "bob")).length === 2);
    assert.deepEqual(runsOf(runs).map((r) => r.ids), [[mention.id], [second.id]]);
    assert.equal(await w.stop(), 143);
    assert.deepEqual(locks(), [], "the lock goes with the watcher");
  });

  test("a shell command: a failed run is retried, an empty answer posts nothing", async () => {
    const room = await f.api.room();
    const runs = path.join(dir, "runs-shell.jsonl");
    // Fails its first run (exit 1); afterwards answers, unless the messages say "quiet".
    const shell = `input=$(cat); [ -e "$RUNS" ] || { : > "$RUNS"; exit 1; }; case "$input" in *quiet*) ;; *) echo "$PARLEY_AGENT here";; esac`;
    const w = watcher([`${f.url}/${room.uuid}`, "--as", "bob", "--exec", shell, "--timeout", "1"], { RUNS: runs });
    await w.started();
    const hello = await say(room.uuid, "alice", "@bob hello?");
    await until(w, "bob's answer after a failed run", async () => (await messagesBy(room.uuid, "bob")).length > 0);
    assert.match(w.stderr(), /exited with 1; trying again in/);
    await say(room.uuid, "alice", "@bob quiet now");
    await until(w, "the quiet run", async () => w.stderr().includes("nothing to post"));
    const sentinel = await say(room.uuid, "alice", "@bob last one");
    await until(w, "the answer to the last one", async () => (await messagesBy(room.uuid, "bob")).length === 2);
    assert.deepEqual((await messagesBy(room.uuid, "bob")).map((m) => [m.text, m.reply_to]), [["bob here", hello.id], ["bob here", sentinel.id]]);
    assert.match(w.stderr(), /nothing to post/);
    assert.equal(await w.stop(), 143);
  });

  test("a second watcher for the same room and agent refuses; a dead watcher's lock is taken over", async () => {
    const room = await f.api.room();
    const roomUrl = `${f.url}/${room.uuid}`;
    const first = watcher([roomUrl, "--as", "bob", "--exec", "cat >/dev/null", "--timeout", "1"]);
    await first.started();
    const second = watcher([roomUrl, "--as", "BOB", "--exec", "cat >/dev/null", "--timeout", "1"]);
    assert.equal(await second.exited, 8, "the same agent by its key: refused");
    assert.match(second.stderr(), /Another watcher \(pid \d+/);
    const other = watcher([roomUrl, "--as", "carol", "--exec", "cat >/dev/null", "--timeout", "1"]);
    await other.started();
    assert.equal(locks().length, 2, "one lock per (room, agent)");
    first.child.kill("SIGKILL"); // no chance to remove its lock
    assert.equal(await first.exited, 137);
    assert.equal(locks().length, 2, "the dead watcher's lock is still there");
    const third = watcher([roomUrl, "--as", "bob", "--exec", "cat >/dev/null", "--timeout", "1"]);
    await third.started();
    assert.match(third.stderr(), /parley watch: watching/);
    assert.equal(third.child.exitCode, null, "took the stale lock over");
    assert.equal(await third.stop(), 143);
    assert.equal(await other.stop(), 143);
    assert.deepEqual(locks(), []);
  });

  test("closing the room makes the watcher exit with its stop code", async () => {
    const room = await f.api.room();
    const w = watcher([`${f.url}/${room.uuid}`, "--as", "bob", "--exec", exec(), "--timeout", "1"], { RUNS: path.join(dir, "runs-close.jsonl") });
    await w.started();
    const closed = await f.api.post(`/api/rooms/${room.uuid}/close`, {}, { authorization: `Bearer ${room.owner_token}` });
    assert.equal(closed.status, 200, JSON.stringify(closed.body));
    assert.equal(await w.exited, 3);
    assert.match(w.stderr(), /room_closed/);
    assert.deepEqual(locks(), []);
    const gone = watcher([`${f.url}/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23`, "--as", "bob", "--exec", exec()]);
    assert.equal(await gone.exited, 3, "an unknown room is a stop too");
    assert.match(gone.stderr(), /room_not_found/);
  });

  test("in a turns room it claims the agent's turn and replies in it, and stops when the room is cancelled", async () => {
    const created = await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["ana", "bob"] } });
    assert.equal(created.status, 201);
    const room = created.body as { uuid: string; owner_token: string };
    const runs = path.join(dir, "runs-turns.jsonl");
    const w = watcher([`${f.url}/${room.uuid}`, "--as", "bob", "--exec", exec(), "--timeout", "1"], { RUNS: runs });
    await w.started();
    const mine = (await f.api.get(`/api/rooms/${room.uuid}/turns/mine?agent_id=ana`)).body;
    const claim = (await f.api.post(`/api/rooms/${room.uuid}/turns/${mine.turn.id}/claim`, { agent_id: "ana" })).body;
    const ana = await f.api.post(`/api/rooms/${room.uuid}/turns/${mine.turn.id}/reply`, { agent_id: "ana", lease_token: claim.lease_token, text: "I propose Friday.", result: "continue" });
    assert.equal(ana.status, 200, JSON.stringify(ana.body));
    const bobsTurn = ana.body.next.id as number;
    const answered = (id: number) => async () =>
      ((await f.api.get(`/api/rooms/${room.uuid}/turns`)).body.turns as { id: number; status: string }[]).find((t) => t.id === id)?.status === "done";
    await until(w, "bob's turn answered", answered(bobsTurn));
    const turn = ((await f.api.get(`/api/rooms/${room.uuid}/turns`)).body.turns as { id: number; agent_id: string; result: string; message_id: number }[]).find((t) => t.id === bobsTurn)!;
    assert.deepEqual([turn.agent_id, turn.result], ["bob", "continue"]);
    const [reply] = await messagesBy(room.uuid, "bob");
    assert.equal(reply!.id, turn.message_id, "the reply is the turn's message");
    const [logged] = runsOf(runs);
    assert.ok(logged!.ids.includes(ana.body.message_id), "the command got the messages since its last turn");
    assert.equal(reply!.text, `answer to ${logged!.ids.join(",")}`);
    assert.deepEqual([logged!.turn, logged!.phase], [String(bobsTurn), "dialogue"]);
    // Unsigned, the watcher claims with its wait and takes its next turn with its reply (my_next):
    // bob's two turns cost no claim request, only ana's first did.
    const anas = (await f.api.post(`/api/rooms/${room.uuid}/turns/mine`, { agent_id: "ana", claim: true })).body;
    assert.equal(anas.turn.status, "claimed", JSON.stringify(anas));
    const ana2 = await f.api.post(`/api/rooms/${room.uuid}/turns/${anas.turn.id}/reply`, { agent_id: "ana", lease_token: anas.lease_token, text: "Or Monday.", result: "continue" });
    assert.equal(ana2.status, 200, JSON.stringify(ana2.body));
    const bobsNext = ana2.body.next.id as number;
    await until(w, "bob's second turn answered", answered(bobsNext));
    assert.deepEqual(runsOf(runs).map((r) => r.turn), [String(bobsTurn), String(bobsNext)]);
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    const claims = /parley_http_responses_total\{method="POST",route="\/api\/rooms\/:id\/turns\/:tid\/claim",status="2xx"\} (\d+)/.exec(metrics);
    assert.equal(claims?.[1], "1", "one claim request: ana's first");
    const cancelled = await f.api.post(`/api/rooms/${room.uuid}/turns/cancel`, {}, { authorization: `Bearer ${room.owner_token}` });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(await w.exited, 3);
    assert.match(w.stderr(), /cancelled/);
  });

  test("with a key, in a turns room it claims and replies signed", async () => {
    const created = await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["bob", "ana"] } });
    assert.equal(created.status, 201);
    const room = created.body as { uuid: string; owner_token: string };
    const key = path.join(home, "bob-turns.key");
    const made = JSON.parse((await run(process.execPath, [SCRIPT, "keygen", "--out", key], { env: { PATH: process.env.PATH ?? "", HOME: home } as Record<string, string> as NodeJS.ProcessEnv })).stdout);
    const w = watcher([`${f.url}/${room.uuid}`, "--as", "bob", "--exec", exec(), "--timeout", "1"], { RUNS: path.join(dir, "runs-signed-turns.jsonl"), PARLEY_KEY: key });
    await w.started();
    await until(w, "bob's first turn answered", async () => (await messagesBy(room.uuid, "bob")).length > 0);
    const [reply] = await messagesBy(room.uuid, "bob");
    assert.deepEqual([reply!.auth, reply!.key_ref], ["signed", made.key_ref]);
    const events = (await f.api.get(`/api/rooms/${room.uuid}/export`)).body.events as { type: string; actor: string; sig?: unknown }[];
    const claimed = events.filter((e) => e.type === "turn.claimed" && e.actor === "bob");
    assert.equal(claimed.length, 1);
    assert.ok(claimed[0]!.sig, "the claim is signed");
    assert.equal(await w.stop(), 143);
  });
});
