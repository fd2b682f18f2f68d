import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { call, connectMcp, fails, ok, TOOL_NAMES, TOOLS_LIST_BUDGET, until, WireLog, type LegacyClient, type ToolResult } from "../helpers/mcp";
import { client, ManualClock, startTestServer } from "../helpers/server";
import type { RunningServer } from "../../server";
import { agentEnvelope } from "../../lib/log/event";
import { bytesToHex, utf8 } from "../../lib/log/bytes";
import { nobleSign, noblePublicKey } from "../../lib/log/ed25519";

const UNKNOWN_ROOM = "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23";

/** A raw JSON-RPC POST, as a client without the SDK would send it. */
function rpc(server: RunningServer, body: unknown, accept = "application/json, text/event-stream") {
  return fetch(`${server.url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept, "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify(body),
  });
}

function signFor(seed: Uint8Array, room: string, actor: string, payload: Record<string, unknown>) {
  const ts = new Date().toISOString();
  const nonce = crypto.randomBytes(12).toString("hex");
  const signature = nobleSign(seed, utf8(agentEnvelope({ room, type: "message.posted", actor, payload, ts, nonce })));
  return { pubkey_hex: bytesToHex(noblePublicKey(seed)), signature_hex: bytesToHex(signature), ts, nonce };
}

describe("MCP endpoint", () => {
  let server: RunningServer;
  let mcp: LegacyClient;
  let api: ReturnType<typeof client>;
  const wire = new WireLog();

  before(async () => {
    server = await startTestServer();
    mcp = await connectMcp(server.url, "parley-tests", wire);
    api = client(server.url);
  });
  after(async () => {
    await mcp.close();
    await server.close();
  });

  test("a 2025 client (SDK 1.x) initializes on protocol 2025-11-25; the server names itself, offers tools and explains the loop", () => {
    assert.equal(mcp.negotiated.version, "2025-11-25");
    assert.equal(wire.methods[0], "initialize", "the 2025 handshake, not server/discover");
    assert.equal(mcp.getServerVersion()?.name, "parley");
    assert.ok(mcp.getServerCapabilities()?.tools);
    // A stateless 2025 server could never send a resource update later: it offers none.
    assert.deepEqual(mcp.getServerCapabilities()?.resources, {});
    const instructions = mcp.getInstructions() ?? "";
    for (const needle of ["read_messages", "since", "wait=25", "send_message", "room_full", "room_expired", "rate_limited", "verify_integrity"]) {
      assert.ok(instructions.includes(needle), `instructions mention ${needle}`);
    }
    assert.ok(instructions.split("\n").length <= 8, "a few lines");
  });

  test("tools/list names exactly the tools, each saying when to use it, with annotations, lean schemas, and at most 16 KB in all", async (t) => {
    const { tools } = await mcp.listTools();
    assert.deepEqual(tools.map((x) => x.name).sort(), [...TOOL_NAMES].sort());
    const readOnly = new Set(["get_room", "list_rooms", "read_messages", "get_context", "verify_integrity", "list_tasks"]);
    for (const tool of tools) {
      assert.ok((tool.description ?? "").length > 40, `${tool.name} tells an agent when to use it`);
      assert.ok((tool.description ?? "").length <= 260, `${tool.name}: a description of a sentence or two`);
      assert.equal(tool.inputSchema.type, "object");
      const a = tool.annotations!;
      assert.equal(a.readOnlyHint, readOnly.has(tool.name), `${tool.name} readOnlyHint`);
      // A write says it destroys nothing (the hint's default is true); a read needs no more.
      if (!readOnly.has(tool.name)) assert.equal(a.destructiveHint, false, `${tool.name}: no tool deletes anything`);
      const text = JSON.stringify(tool);
      for (const costly of ["maxLength", "minLength", "additionalProperties", "$schema", '"default"', '"pattern"']) {
        assert.ok(!text.includes(costly), `${tool.name} advertises no ${costly}`);
      }
    }
    // Output schemas where a caller acts on a field: a cursor, a receipt, a lease token, a verdict.
    const withOutput = tools.filter((x) => x.outputSchema).map((x) => x.name).sort();
    assert.deepEqual(withOutput, ["claim_task", "create_room", "get_context", "my_turn", "read_messages", "send_message", "verify_integrity"]);
    const input = (name: string) => tools.find((x) => x.name === name)!.inputSchema as any;
    assert.deepEqual(input("read_messages").required, ["room"]);
    assert.equal(input("read_messages").properties.wait.maximum, 25);
    assert.equal(input("my_turn").properties.wait.maximum, 30);
    // Enums and small ranges come from the REST schemas (lib/schemas), not hand copies.
    assert.deepEqual(input("create_room").properties.mode.enum, ["open", "turns"]);
    assert.deepEqual(input("revise_thread").properties.kind.enum, ["propose", "update", "confirm", "contradict", "retract"]);
    assert.deepEqual([input("create_task").properties.priority.minimum, input("create_task").properties.priority.maximum], [0, 9]);
    assert.match(input("send_message").properties.sig.description, /pubkey_hex, signature_hex, ts, nonce/);

    // The answer on the wire: 27,713 bytes for 19 tools before the lean schemas and the merges.
    const bytes = wire.bytes.get("tools/list")!;
    t.diagnostic(`tools/list answer (2025-11-25): ${bytes} bytes for ${tools.length} tools`);
    assert.ok(bytes <= TOOLS_LIST_BUDGET, `tools/list is ${bytes} bytes; at most ${TOOLS_LIST_BUDGET}`);
    const res = await rpc(server, { jsonrpc: "2.0", id: 1, method: "tools/list" });
    assert.equal((await res.arrayBuffer()).byteLength, bytes, "a raw 2025 POST gets the same answer");
  });

  test("open_thread, folded into revise_thread (kind propose), still answers to its name, unlisted", async () => {
    const { uuid } = await api.room();
    const opened = await ok(mcp, "open_thread", { room: uuid, opened_by: "alice", subject: "Venue", value: "Hall B" });
    assert.deepEqual([opened.subject, opened.current_value, opened.opened_by], ["Venue", "Hall B", "alice"]);
    const proposed = await ok(mcp, "revise_thread", { room: uuid, kind: "propose", agent_id: "bob", subject: "Date", value: "14 March" });
    assert.deepEqual([proposed.subject, proposed.opened_by, proposed.status], ["Date", "bob", "proposed"]);
    assert.deepEqual((await api.get(`/api/rooms/${uuid}/context`)).body.threads.map((t: any) => t.subject), ["Venue", "Date"]);
  });

  test("every tool that takes a room accepts uuid for room (as Roomcomm's clients send it); room and uuid that disagree are a validation_error", async () => {
    const { uuid } = await api.room();
    const other = (await api.room()).uuid;
    const posted = await ok(mcp, "send_message", { uuid, agent_id: "alice", text: "by uuid" });
    const byName: Record<string, Record<string, unknown>> = {
      get_room: {},
      read_messages: { since: 0 },
      get_context: {},
      verify_integrity: { checkpoint: posted.receipt.checkpoint },
    };
    for (const [name, args] of Object.entries(byName)) {
      const viaUuid = await ok(mcp, name, { uuid, ...args });
      const viaRoom = await ok(mcp, name, { room: uuid, ...args });
      assert.deepEqual(viaUuid, viaRoom, `${name}: uuid is room`);
      assert.deepEqual(await ok(mcp, name, { uuid: `${server.url}/${uuid}`, room: uuid.toUpperCase(), ...args }), viaRoom, `${name}: both, naming one room`);
      const clash = await fails(mcp, name, { uuid: other, room: uuid, ...args }, "validation_error");
      assert.match(clash.detail, /^uuid: names another room than room/, name);
    }
    assert.equal((await ok(mcp, "read_messages", { uuid, since: 0 })).messages[0].text, "by uuid");
    const clash = await fails(mcp, "send_message", { uuid: other, room: uuid, agent_id: "alice", text: "which room?" }, "validation_error");
    assert.match(clash.detail, /^uuid: /);
    assert.match((await fails(mcp, "get_room", { uuid: 42 }, "validation_error")).detail, /^uuid: must be a room id/);
    assert.equal((await fails(mcp, "get_room", { uuid: "not-a-room" })).code, "invalid_uuid");
    // The ledger, board and turns tools take it too.
    assert.equal((await ok(mcp, "revise_thread", { uuid, kind: "propose", agent_id: "alice", subject: "Venue", value: "Hall B" })).status, "proposed");

    // create_room and list_rooms take no room: a room id there is a mistake (an agent told to join
    // a room that calls create_room), answered with what to do instead, and nothing is created.
    const before = (await api.get("/api/rooms?limit=200")).body.total;
    for (const key of ["uuid", "room"]) {
      const made = await fails(mcp, "create_room", { [key]: uuid, is_public: true }, "validation_error");
      assert.match(made.detail, new RegExp(`^${key}: create_room makes a new room .* read_messages`));
      assert.match((await fails(mcp, "list_rooms", { [key]: uuid }, "validation_error")).detail, new RegExp(`^${key}: list_rooms lists public rooms .* get_room`));
    }
    assert.equal((await api.get("/api/rooms?limit=200")).body.total, before, "no room was created");
    assert.equal((await api.get(`/api/rooms/${uuid}`)).body.message_count, 1, "the clashing send_message wrote nothing");
  });

  test("create_room, get_room, list_rooms and get_context return what REST returns, with this server's URLs", async () => {
    const created = await ok(mcp, "create_room", { description: "Pick a venue", is_public: true });
    assert.match(created.uuid, /^[0-9a-f-]{36}$/);
    assert.equal(created.url, `${server.url}/${created.uuid}`);
    assert.ok(created.owner_token.length >= 24);
    assert.equal(created.description, "Pick a venue");

    const info = await ok(mcp, "get_room", { room: created.url });
    const rest = await api.get(`/api/rooms/${created.uuid}`);
    assert.deepEqual(info, rest.body);

    const list = await ok(mcp, "list_rooms", { q: "venue", sort: "new" });
    assert.deepEqual(list.rooms.map((r: any) => r.uuid), [created.uuid]);
    assert.equal(list.total, 1);

    const empty = await ok(mcp, "get_context", { room: created.uuid });
    assert.equal(empty.room_uuid, created.uuid);
    assert.deepEqual(empty.threads, []);
    assert.equal(empty.sealed, null);
    assert.equal(empty.context_hash, crypto.createHash("sha256").update("[]").digest("hex"));

    // The ledger a REST client writes is the one get_context reads.
    const opened = await api.post(`/api/rooms/${created.uuid}/claims`, { subject: "Venue", value: "Hall B", opened_by: "alice" });
    assert.equal(opened.status, 201, JSON.stringify(opened.body));
    const context = await ok(mcp, "get_context", { room: created.url });
    assert.deepEqual(context, (await api.get(`/api/rooms/${created.uuid}/context`)).body);
    assert.deepEqual(context.threads.map((t: any) => [t.subject, t.current_value, t.status]), [["Venue", "Hall B", "proposed"]]);
    assert.notEqual(context.context_hash, empty.context_hash);
  });

  test("a room argument is a UUID (any case) or a room URL; anything else is invalid_uuid", async () => {
    const { uuid } = await api.room();
    for (const room of [uuid, uuid.toUpperCase(), `${server.url}/${uuid}`, `${server.url}/${uuid}?format=md`, `${server.url}/api/rooms/${uuid}/messages`, ` ${uuid} `]) {
      assert.equal((await ok(mcp, "get_room", { room })).uuid, uuid, room);
    }
    const bad = await fails(mcp, "get_room", { room: "not-a-room" });
    assert.equal(bad.code, "invalid_uuid");
    assert.equal(bad.detail, (await api.get("/api/rooms/not-a-room")).body.detail, "the same sentence as REST");
    assert.equal((await fails(mcp, "get_room", {})).code, "validation_error");
  });

  test("send_message and read_messages: anonymous and signed posts, cursors, tail and receipts", async () => {
    const { uuid } = await api.room();
    const first = await ok(mcp, "send_message", { room: uuid, agent_id: "alice", text: "Hello from MCP" });
    assert.equal(first.auth, "anon");
    assert.equal(first.receipt.seq, first.id);
    assert.match(first.receipt.checkpoint, new RegExp(`/room/${uuid}\\n${first.id}\\n`));

    const seed = crypto.randomBytes(32);
    const payload = { text: "Signed answer", reply_to: first.id };
    const signed = await ok(mcp, "send_message", { room: uuid, agent_id: "bob", text: "Signed answer", reply_to: first.id, sig: signFor(seed, uuid, "bob", payload) });
    assert.equal(signed.auth, "signed");
    assert.equal(signed.reply_to, first.id);
    const pinned = await fails(mcp, "send_message", { room: uuid, agent_id: "bob", text: "unsigned now" });
    assert.equal(pinned.code, "signature_required");

    const page = await ok(mcp, "read_messages", { room: uuid, since: 0 });
    assert.deepEqual(page.messages.map((m: any) => m.text), ["Hello from MCP", "Signed answer"]);
    assert.equal(page.next_since, signed.id);
    assert.equal(page.has_more, false);
    assert.deepEqual(page, (await api.get(`/api/rooms/${uuid}/messages?since=0`)).body, "the same page as REST");

    const limited = await ok(mcp, "read_messages", { room: uuid, since: 0, limit: 1 });
    assert.equal(limited.messages.length, 1);
    assert.equal(limited.has_more, true);
    const tail = await ok(mcp, "read_messages", { room: uuid, tail: 1 });
    assert.deepEqual(tail.messages.map((m: any) => m.id), [signed.id]);
    const empty = await ok(mcp, "read_messages", { room: uuid, since: signed.id });
    assert.deepEqual(empty.messages, []);
    assert.equal(empty.next_since, signed.id);
  });

  // A missed wake-up answers an empty page when the 10 s wait runs out (the body fails), and the
  // test's timeout, shorter than the wait, fails it before that.
  test("read_messages with wait long-polls until another agent posts", { timeout: 8_000 }, async () => {
    const { uuid } = await api.room();
    const idle = server.svc.notifier.streamCount;
    const waiting = ok(mcp, "read_messages", { room: uuid, since: 1, wait: 10 });
    await until(() => server.svc.notifier.streamCount > idle, "the read_messages long-poll is parked", 5_000);
    assert.equal((await api.say(uuid, "carol", "anyone there?")).status, 201);
    const page = await waiting;
    assert.deepEqual(page.messages.map((m: any) => m.text), ["anyone there?"]);
  });

  test("read_messages with mentioning waits only for messages that address the agent, as REST does", { timeout: 8_000 }, async () => {
    const { uuid } = await api.room();
    assert.equal((await api.say(uuid, "bob", "hello all")).status, 201);
    const waiting = ok(mcp, "read_messages", { room: uuid, since: 0, mentioning: "Dana", wait: 10 });
    assert.equal((await api.say(uuid, "carol", "still nobody for dana")).status, 201);
    assert.equal((await api.say(uuid, "carol", "@dana can you check this?")).status, 201);
    const page = await waiting;
    assert.deepEqual(page.messages.map((m: any) => m.text), ["@dana can you check this?"]);
    assert.deepEqual(page.messages[0].mentions, ["dana"]);
    assert.equal(page.next_since, page.messages[0].id);
    const rest = await api.get(`/api/rooms/${uuid}/messages?since=0&mentioning=Dana`);
    assert.deepEqual(rest.body.messages.map((m: any) => m.id), page.messages.map((m: any) => m.id));
    assert.equal((await fails(mcp, "read_messages", { room: uuid, mentioning: "" })).code, "validation_error");
  });

  test("verify_integrity is CLEAN for an honest room, with and without a kept checkpoint", async () => {
    const { uuid } = await api.room();
    const posted = await ok(mcp, "send_message", { room: uuid, agent_id: "alice", text: "one" });
    await api.say(uuid, "bob", "two");
    const plain = await ok(mcp, "verify_integrity", { room: uuid });
    assert.equal(plain.verdict, "CLEAN", plain.explanation);
    const kept = await ok(mcp, "verify_integrity", { room: uuid, checkpoint: posted.receipt.checkpoint });
    assert.equal(kept.verdict, "CLEAN", kept.explanation);
    const other = await api.room();
    const foreign = await ok(mcp, "verify_integrity", { room: other.uuid, checkpoint: posted.receipt.checkpoint });
    assert.notEqual(foreign.verdict, "CLEAN", "a checkpoint of another room never verifies");
  });

  test("the ledger over MCP: propose, confirm twice, handshake twice → agreed and sealed, with the REST rules", async () => {
    const { uuid } = await ok(mcp, "create_room", {});
    const opened = await ok(mcp, "revise_thread", { room: uuid, agent_id: "alice", kind: "propose", subject: "Price", value: "100 EUR" });
    assert.equal(opened.status, "proposed");
    assert.equal(opened.opened_by, "alice");
    const rest = await api.post(`/api/rooms/${uuid}/claims`, { subject: "", value: "x", opened_by: "alice" });
    assert.deepEqual(await fails(mcp, "revise_thread", { room: uuid, agent_id: "alice", kind: "propose", subject: "", value: "x" }), rest.body, "the REST detail");
    assert.match((await fails(mcp, "revise_thread", { room: uuid, agent_id: "", kind: "propose", subject: "S", value: "x" }, "validation_error")).detail, /^agent_id: /, "named as the tool names it");
    assert.match((await fails(mcp, "revise_thread", { room: uuid, agent_id: "bob", kind: "propose", thread_id: opened.id, subject: "S", value: "x" }, "validation_error")).detail, /^thread_id: propose opens a new thread/);
    assert.match((await fails(mcp, "revise_thread", { room: uuid, agent_id: "bob", kind: "agree", thread_id: opened.id }, "validation_error")).detail, /^kind: must be one of propose, update/);
    const own = await fails(mcp, "revise_thread", { room: uuid, thread_id: opened.id, agent_id: "alice", kind: "confirm" });
    assert.equal(own.code, "owner_cannot_confirm");
    await ok(mcp, "revise_thread", { room: uuid, thread_id: opened.id, agent_id: "bob", kind: "confirm" });
    const agreed = await ok(mcp, "revise_thread", { room: uuid, thread_id: opened.id, agent_id: "carol", kind: "confirm" });
    assert.equal(agreed.status, "agreed");
    const ctx = await ok(mcp, "get_context", { room: uuid });
    assert.deepEqual(ctx, (await api.get(`/api/rooms/${uuid}/context`)).body);
    assert.equal((await fails(mcp, "handshake", { room: uuid, agent_id: "bob", context_hash: "0".repeat(64) })).code, "stale_context_hash");
    await ok(mcp, "handshake", { room: uuid, agent_id: "bob", context_hash: ctx.context_hash });
    const sealed = await ok(mcp, "handshake", { room: uuid, agent_id: "alice", context_hash: ctx.context_hash });
    assert.deepEqual(sealed.sealed.agents, ["alice", "bob"]);
    assert.equal((await fails(mcp, "revise_thread", { room: uuid, thread_id: 999, agent_id: "bob", kind: "confirm" })).code, "thread_not_found");
    const badId = await fails(mcp, "revise_thread", { room: uuid, thread_id: "1", agent_id: "bob", kind: "confirm" });
    assert.deepEqual([badId.code, badId.detail], ["validation_error", "thread_id: must be a whole number of at least 1."]);
  });

  test("errors are isError results with the REST code and sentence", async () => {
    const unknown = await fails(mcp, "read_messages", { room: UNKNOWN_ROOM });
    const rest = await api.get(`/api/rooms/${UNKNOWN_ROOM}/messages`);
    assert.deepEqual(unknown, rest.body);
    assert.equal(unknown.code, "room_not_found");
    for (const name of ["get_room", "send_message", "get_context", "verify_integrity"]) {
      assert.equal((await fails(mcp, name, { room: UNKNOWN_ROOM, agent_id: "a", text: "x" })).code, "room_not_found", name);
    }

    const { uuid } = await api.room();
    const cases: [Record<string, unknown>, string][] = [
      [{ agent_id: "a", text: "" }, "text"],
      [{ agent_id: "a", text: "   " }, "text"],
      [{ agent_id: "   ", text: "hi" }, "agent_id"],
      [{ agent_id: "a", text: "x".repeat(10_001) }, "text"],
      [{ agent_id: "a", text: 5 }, "text"],
      [{ agent_id: "a", text: "hi", reply_to: 999 }, "reply_to"],
      [{ agent_id: "a", text: "hi", sig: { pubkey_hex: "zz" } }, "sig"],
    ];
    for (const [args, field] of cases) {
      const mcpError = await fails(mcp, "send_message", { room: uuid, ...args });
      const restError = await api.say(uuid, args.agent_id as string, args.text as string, args);
      assert.equal(mcpError.code, "validation_error", JSON.stringify(args));
      assert.ok(mcpError.detail.startsWith(`${field}`), mcpError.detail);
      assert.deepEqual(mcpError, restError.body, "the same code and detail as REST");
    }
    for (const args of [{ limit: 0 }, { since: -1 }, { tail: 501 }, { wait: 26 }, { since: "soon" }, { wait: true }]) {
      assert.equal((await fails(mcp, "read_messages", { room: uuid, ...args })).code, "validation_error", JSON.stringify(args));
    }
    assert.equal((await fails(mcp, "create_room", { description: "x".repeat(501) })).code, "validation_error");
    assert.equal((await fails(mcp, "create_room", { protocol_mode: "premium" })).code, "arbiter_unavailable");
    assert.equal((await fails(mcp, "list_rooms", { sort: "random" })).code, "validation_error");
    assert.equal((await fails(mcp, "verify_integrity", { room: uuid, checkpoint: 7 })).code, "validation_error");
    assert.equal((await api.get(`/api/rooms/${uuid}`)).body.message_count, 0, "failed calls stored nothing");

    await assert.rejects(mcp.callTool({ name: "delete_everything", arguments: {} }), /Unknown tool/);
  });
});

describe("MCP transport", () => {
  let server: RunningServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  test("GET and DELETE /mcp answer 405 with Allow: POST and a JSON body", async () => {
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(`${server.url}/mcp`, { method, headers: { accept: "text/event-stream" } });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get("allow"), "POST");
      assert.match(res.headers.get("content-type")!, /^application\/json/);
      const body = await res.json();
      assert.match(body.error.message, /POST/);
    }
  });

  test("no OAuth metadata: /.well-known/* and unknown /mcp paths are JSON 404s", async () => {
    for (const path of ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration", "/mcp/sse", "/mcp/messages"]) {
      const res = await fetch(server.url + path);
      assert.equal(res.status, 404, path);
      assert.match(res.headers.get("content-type")!, /^application\/json/, path);
      assert.equal((await res.json()).code, "not_found", path);
    }
  });

  test("JSON responses by default, an event stream when the client ranks it first", async () => {
    const list = { jsonrpc: "2.0", id: 7, method: "tools/list" };
    const legacy = await rpc(server, { jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "create_room", arguments: {} } });
    assert.match(legacy.headers.get("content-type")!, /^application\/json/, "2025 tool calls without initialize: stateless");
    assert.equal((await legacy.json()).result.structuredContent.mode, "open");
    const json = await rpc(server, list);
    assert.match(json.headers.get("content-type")!, /^application\/json/);
    assert.equal((await json.json()).result.tools.length, TOOL_NAMES.length);

    const sse = await rpc(server, list, "text/event-stream, application/json;q=0.5");
    assert.equal(sse.status, 200);
    assert.match(sse.headers.get("content-type")!, /^text\/event-stream/);
    const text = await sse.text();
    const data = text.split("\n").find((l) => l.startsWith("data: "))!;
    assert.equal(JSON.parse(data.slice(6)).result.tools.length, TOOL_NAMES.length);
  });

  test("bad requests: not JSON, missing Accept, oversized body", async () => {
    const notJson = await fetch(`${server.url}/mcp`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{nope" });
    assert.equal(notJson.status, 400);
    assert.equal((await notJson.json()).error.code, -32700);

    const noAccept = await rpc(server, { jsonrpc: "2.0", id: 1, method: "tools/list" }, "application/json");
    assert.equal(noAccept.status, 406);

    const big = await rpc(server, { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "send_message", arguments: { text: "x".repeat(70_000) } } });
    assert.equal(big.status, 413);
    assert.equal((await big.json()).code, "payload_too_large");
  });

  test("URLs in tool output use PARLEY_PUBLIC_URL when it is set", async () => {
    const pub = await startTestServer({ PARLEY_PUBLIC_URL: "https://parley.example" });
    const mcp = await connectMcp(pub.url);
    try {
      const created = await ok(mcp, "create_room", {});
      assert.equal(created.url, `https://parley.example/${created.uuid}`);
      const info = await ok(mcp, "get_room", { room: created.url });
      assert.match(info.head.checkpoint, /^parley\.example\/room\//);
    } finally {
      await mcp.close();
      await pub.close();
    }
  });
});

describe("MCP shares the service's rules with REST", () => {
  test("an expired room answers room_expired on every tool", async () => {
    const clock = new ManualClock();
    const server = await startTestServer({ PARLEY_ROOM_IDLE_TTL: "72h" }, { clock });
    const mcp = await connectMcp(server.url);
    try {
      const { uuid } = await ok(mcp, "create_room", {});
      await ok(mcp, "send_message", { room: uuid, agent_id: "a", text: "before" });
      clock.advance(72 * 3_600_000 + 1);
      for (const name of ["get_room", "read_messages", "send_message", "get_context", "verify_integrity"]) {
        const err = await fails(mcp, name, { room: uuid, agent_id: "a", text: "after" });
        assert.equal(err.code, "room_expired", name);
        assert.match(err.detail, /Stop polling/);
      }
    } finally {
      await mcp.close();
      await server.close();
    }
  });

  test("the message cap holds across MCP and REST: room_full", async () => {
    const server = await startTestServer({ PARLEY_ROOM_MESSAGE_CAP: "3" });
    const mcp = await connectMcp(server.url);
    const api = client(server.url);
    try {
      const { uuid } = await api.room();
      await ok(mcp, "send_message", { room: uuid, agent_id: "a", text: "1" });
      assert.equal((await api.say(uuid, "b", "2")).status, 201);
      // Concurrent posts over MCP cannot overshoot the cap either.
      const results = await Promise.all([0, 1, 2, 3].map((i) => call(mcp, "send_message", { room: uuid, agent_id: `c${i}`, text: "race" })));
      assert.equal(results.filter((r) => !r.isError).length, 1);
      for (const r of results.filter((x) => x.isError)) assert.equal(JSON.parse(r.content[0]!.text).code, "room_full");
      const rest = await api.say(uuid, "d", "4");
      assert.equal(rest.status, 429);
      assert.deepEqual(await fails(mcp, "send_message", { room: uuid, agent_id: "a", text: "5" }), rest.body);
      assert.equal((await api.get(`/api/rooms/${uuid}`)).body.message_count, 3);
    } finally {
      await mcp.close();
      await server.close();
    }
  });

  test("posts over MCP and REST share the per-(room, agent) rate limit", async () => {
    const server = await startTestServer({ PARLEY_RATE_AGENT_POSTS_PER_MINUTE: "2" });
    const mcp = await connectMcp(server.url);
    const api = client(server.url);
    try {
      const { uuid } = await api.room();
      assert.equal((await api.say(uuid, "ann", "rest 1")).status, 201);
      await ok(mcp, "send_message", { room: uuid, agent_id: "ann", text: "mcp 1" });
      const limited = await fails(mcp, "send_message", { room: uuid, agent_id: "ann", text: "mcp 2" });
      assert.equal(limited.code, "rate_limited");
      assert.ok((limited.retry_after ?? 0) >= 1, "retry_after in seconds");
      const rest = await api.say(uuid, "ann", "rest 2");
      assert.equal(rest.status, 429, "the same bucket for REST");
      assert.equal(rest.body.code, "rate_limited");
      await ok(mcp, "send_message", { room: uuid, agent_id: "bo", text: "another agent has its own bucket" });
      assert.equal((await api.get(`/api/rooms/${uuid}`)).body.message_count, 3, "limited posts stored nothing");
    } finally {
      await mcp.close();
      await server.close();
    }
  });

  test("posts over MCP and REST share the per-client rate limit", async () => {
    const server = await startTestServer({ PARLEY_RATE_POSTS_PER_MINUTE: "3" });
    const mcp = await connectMcp(server.url);
    const api = client(server.url);
    try {
      const { uuid } = await api.room();
      assert.equal((await api.say(uuid, "a", "1")).status, 201);
      await ok(mcp, "send_message", { room: uuid, agent_id: "b", text: "2" });
      assert.equal((await api.say(uuid, "c", "3")).status, 201);
      assert.equal((await fails(mcp, "send_message", { room: uuid, agent_id: "d", text: "4" })).code, "rate_limited");
      assert.equal((await api.say(uuid, "e", "5")).status, 429);
    } finally {
      await mcp.close();
      await server.close();
    }
  });

  test("room creation and reads over MCP take from the same budgets as REST", async () => {
    const server = await startTestServer({ PARLEY_RATE_ROOMS_PER_HOUR: "2", PARLEY_RATE_REQUESTS_PER_MINUTE: "12" });
    const mcp = await connectMcp(server.url);
    const api = client(server.url);
    try {
      const { uuid } = await ok(mcp, "create_room", {});
      assert.equal((await api.post("/api/rooms", {})).status, 201);
      assert.equal((await fails(mcp, "create_room", {})).code, "rate_limited");
      assert.equal((await api.post("/api/rooms", {})).status, 429);

      let calls = 0;
      let last: ToolResult | undefined;
      while (calls < 20) {
        calls++;
        last = await call(mcp, "get_room", { room: uuid });
        if (last.isError) break;
      }
      assert.equal(last?.isError, true, "reads over MCP are limited");
      assert.equal(JSON.parse(last!.content[0]!.text).code, "rate_limited");
      assert.ok(calls <= 12);
      // Every tool but create_room and send_message takes from that budget, however new.
      assert.equal((await fails(mcp, "join_board", { room: uuid, agent_id: "a", capabilities: [] })).code, "rate_limited");
      const rest = await api.get(`/api/rooms/${uuid}`);
      assert.equal(rest.status, 429, "and the budget is the one REST reads use");
      assert.ok(Number(rest.headers.get("retry-after")) >= 1);
    } finally {
      await mcp.close();
      await server.close();
    }
  });
});
