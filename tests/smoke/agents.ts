// npm run smoke:agents — a real two-agent conversation against a freshly started server:
// agent A (planner) over MCP with the official SDK client, agent B (builder) with the skill
// script unpacked from /parley-skill.tar.gz, signing every message. Ends with both agents
// verifying the room's history against the receipts they kept, and prints the transcript.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { connectMcp, ok, until } from "../helpers/mcp";
import { startTestServer, tempDir } from "../helpers/server";

const run = promisify(execFile);
const started = Date.now();
const log = (who: string, what: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(2).padStart(6)}s] ${who.padEnd(8)} ${what}`);

// Two negotiators: one confirmation from the other side agrees a thread.
const server = await startTestServer({ PARLEY_AGREE_QUORUM: "1" });
const home = tempDir("parley-smoke-");
let mcp: Client | undefined;

try {
  // ---- agent B installs the skill the way /agents.md says: curl | tar -xz -C <skills dir>
  const tarball = Buffer.from(await (await fetch(`${server.url}/parley-skill.tar.gz`)).arrayBuffer());
  fs.writeFileSync(path.join(home, "parley-skill.tar.gz"), tarball);
  await run("tar", ["-xzf", "parley-skill.tar.gz"], { cwd: home });
  const scriptFile = path.join(home, "parley", "scripts", "parley.mjs");
  log("builder", `installed the skill pack (${tarball.length} bytes) into ${home}`);

  const env: Record<string, string> = { PATH: process.env.PATH ?? "", HOME: home, PARLEY_STATE: path.join(home, "state.json"), PARLEY_AGENT: "builder", PARLEY_KEY: path.join(home, "builder.key") };
  async function builder(args: string[], extraEnv: Record<string, string> = {}): Promise<any> {
    log("builder", `$ parley ${args.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a)).join(" ")}`);
    const { stdout } = await run(process.execPath, [scriptFile, ...args], { env: { ...env, ...extraEnv } as NodeJS.ProcessEnv, timeout: 60_000 }).catch((err) => {
      throw new Error(`parley ${args[0]} exited ${err.code}: ${err.stderr}`);
    });
    return JSON.parse(stdout);
  }

  // ---- agent A connects over MCP
  mcp = await connectMcp(server.url, "smoke-planner");
  const { tools } = await mcp.listTools();
  log("planner", `connected to ${server.url}/mcp: ${tools.length} tools (${tools.map((t) => t.name).join(", ")})`);
  async function planner(name: string, args: Record<string, unknown>): Promise<any> {
    log("planner", `→ ${name} ${JSON.stringify(args).slice(0, 100)}`);
    return ok(mcp!, name, args);
  }

  // 1. A creates the room and hands its URL to B.
  const room = await planner("create_room", { description: "Agree on the release date of v2 and the code freeze before it." });
  log("planner", `room ${room.url}`);

  // 2. B makes a key, looks at the room, reads it (empty).
  const key = await builder(["keygen"]);
  log("builder", `key_ref ${key.key_ref}`);
  const info = await builder(["info", room.url]);
  assert.equal(info.status, "open");
  assert.deepEqual((await builder(["read", room.url])).messages, []);

  // 3. A opens with a proposal; B is already long-polling and wakes up on it.
  //    A missed wake-up answers B an empty page after its 25 s wait, and the check below fails.
  const idle = server.svc.notifier.streamCount;
  let bAnswered = false;
  const bWaits = builder(["wait", room.url, "--timeout", "25"]).finally(() => (bAnswered = true));
  bWaits.catch(() => {}); // its failure is reported where it is awaited, below
  await until(() => bAnswered || server.svc.notifier.streamCount > idle, "builder's long-poll is parked on the server", 20_000);
  const a1 = await planner("send_message", { room: room.url, agent_id: "planner", text: "Proposal: code freeze on 5 March, release v2 on 12 March. Does that work for the build?" });
  const seenByB = await bWaits;
  assert.deepEqual(seenByB.messages.map((m: any) => m.id), [a1.id]);

  // 4. B answers, signed, replying to A's message.
  const b1 = await builder(["send", room.url, "--reply-to", String(a1.id), "Freeze on 5 March is fine. 12 March is tight for the release notes; I propose 14 March."]);
  assert.equal(b1.auth, "signed");

  // 5. A reads with its cursor and a long-poll, and confirms.
  const page = await planner("read_messages", { room: room.uuid, since: a1.id, wait: 25 });
  assert.deepEqual(page.messages.map((m: any) => [m.agent_id, m.auth]), [["builder", "signed"]]);
  const a2 = await planner("send_message", { room: room.uuid, agent_id: "planner", text: "Agreed: code freeze 5 March, release v2 on 14 March.", reply_to: page.messages[0].id });

  // 6. B waits from its saved cursor, sees the agreement, confirms and stops.
  // (Its cursor is still at A's first message, so the page starts with its own answer.)
  const seen = await builder(["wait", room.url, "--timeout", "25"]);
  assert.deepEqual(seen.messages.map((m: any) => m.id), [b1.id, a2.id]);
  const b2 = await builder(["send", room.url, "--reply-to", String(a2.id), "Confirmed: freeze 5 March, release 14 March. Done on my side."]);

  // 7. The agreement goes into the ledger: A proposes it as a thread citing its message, B (signed)
  //    confirms it, both acknowledge the same context_hash, and the ledger is sealed.
  const thread = await planner("revise_thread", { room: room.uuid, kind: "propose", agent_id: "planner", subject: "Release date of v2", value: "14 March (code freeze 5 March)", source_msg_id: a2.id, quote: "release v2 on 14 March" });
  assert.equal(thread.status, "proposed");
  const confirmed = await builder(["revise", room.url, "--thread", String(thread.id), "--kind", "confirm", "--source", String(b2.id), "--quote", "Confirmed: freeze 5 March, release 14 March."]);
  assert.equal(confirmed.status, "agreed");
  const { context_hash } = await planner("get_context", { room: room.uuid });
  await planner("handshake", { room: room.uuid, agent_id: "planner", context_hash });
  const sealed = await builder(["handshake", room.url]);
  assert.deepEqual(sealed.sealed?.agents, ["builder", "planner"]);
  log("builder", `ledger sealed on ${sealed.context_hash.slice(0, 16)}… by ${sealed.sealed.agents.join(" and ")}`);
  assert.equal((await builder(["context", room.url, "--json"])).context_hash, context_hash, "both see the same ledger");

  // 8. Both verify the history against the receipts they kept.
  const aReport = await planner("verify_integrity", { room: room.uuid, checkpoint: a2.receipt.checkpoint });
  log("planner", `verify_integrity with its receipt (seq ${a2.receipt.seq}): ${aReport.verdict}`);
  assert.equal(aReport.verdict, "CLEAN", aReport.explanation);
  const bReport = await builder(["verify", room.url]);
  log("builder", `verify with its saved receipt: ${bReport.verdict} (${bReport.details.agent_signatures} agent signatures, ${bReport.details.projections.threads} thread)`);
  assert.equal(bReport.verdict, "CLEAN", bReport.explanation);

  const ledger = await planner("get_context", { room: room.uuid });
  log("planner", `get_context: ${ledger.threads.map((t: any) => `#${t.id} ${t.subject} = ${t.current_value} [${t.status}]`).join("; ")}, sealed by ${ledger.sealed.agents.join(", ")}`);

  // ---- transcript
  const all = await planner("read_messages", { room: room.uuid, since: 0 });
  console.log(`\nTranscript of ${room.url}\n${"-".repeat(72)}`);
  for (const m of all.messages) {
    const auth = m.auth === "signed" ? `signed ${m.key_ref}` : "anon";
    const reply = m.reply_to ? ` ↩ #${m.reply_to}` : "";
    console.log(`#${m.id} ${m.agent_id} (${auth})${reply}\n    ${m.text}`);
  }
  console.log("-".repeat(72));
  console.log(`Verdicts: planner ${aReport.verdict}, builder ${bReport.verdict}. ${aReport.explanation}`);
  console.log(`smoke:agents passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (err) {
  console.error(`smoke:agents FAILED: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
} finally {
  await mcp?.close();
  await server.close();
}
