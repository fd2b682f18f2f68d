// The 2026-07-28 protocol on /mcp with the official SDK 2.x client: no initialize (server/discover
// and a per-request _meta envelope), the same tools, limits and errors as for 2025 clients, and
// room events pushed on a subscriptions/listen stream.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import { connectMcp, connectModern, fails, ok, TOOL_NAMES, TOOLS_LIST_BUDGET, until, WireLog } from "../helpers/mcp";
import { client, startTestServer } from "../helpers/server";
import type { RunningServer } from "../../server";
import { streamsKey } from "../../lib/services/rate-limit";

const UNKNOWN_ROOM = "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23";
const STREAMS = streamsKey("127.0.0.1");
const messagesOf = (room: string) => `parley://rooms/${room}/messages`;

describe("MCP 2026-07-28 (SDK 2.x client)", () => {
  let server: RunningServer;
  let mcp: Client;
  let api: ReturnType<typeof client>;
  const wire = new WireLog();
  const held = () => server.svc.limiter.held(STREAMS);

  before(async () => {
    server = await startTestServer();
    mcp = await connectModern(server.url, "parley-tests-2026", wire);
    api = client(server.url);
  });
  after(async () => {
    await mcp.close();
    await server.close();
  });

  test("the client negotiates 2026-07-28 with server/discover, no initialize; the server names itself, explains the loop and offers room subscriptions", () => {
    assert.equal(mcp.getNegotiatedProtocolVersion(), "2026-07-28");
    assert.equal(wire.methods[0], "server/discover");
    assert.ok(!wire.methods.includes("initialize"), "no 2025 handshake");
    assert.equal(mcp.getServerVersion()?.name, "parley");
    const instructions = mcp.getInstructions() ?? "";
    for (const needle of ["read_messages", "wait=25", "send_message", "my_turn", "claim=true", "room_full", "verify_integrity"]) {
      assert.ok(instructions.includes(needle), `instructions mention ${needle}`);
    }
    assert.ok(mcp.getServerCapabilities()?.tools);
    assert.equal(mcp.getServerCapabilities()?.resources?.subscribe, true);
  });

  test("tools/list: the same tools as 2025 clients get, and at most 16 KB on the wire", async (t) => {
    const { tools } = await mcp.listTools();
    assert.deepEqual(tools.map((x) => x.name).sort(), [...TOOL_NAMES].sort());
    const legacy = await connectMcp(server.url);
    try {
      const shape = (x: { name: string; inputSchema: unknown; outputSchema?: unknown; annotations?: unknown; description?: string }) => [x.name, x.description, x.inputSchema, x.outputSchema, x.annotations];
      assert.deepEqual(tools.map(shape), (await legacy.listTools()).tools.map(shape), "one definition serves both protocol lines");
    } finally {
      await legacy.close();
    }
    const bytes = wire.bytes.get("tools/list")!;
    t.diagnostic(`tools/list answer (2026-07-28): ${bytes} bytes for ${tools.length} tools`);
    assert.ok(bytes <= TOOLS_LIST_BUDGET, `tools/list is ${bytes} bytes; at most ${TOOLS_LIST_BUDGET}`);
  });

  test("create, post and read over 2026-07-28: what REST sees, uuid for room included", async () => {
    const created = await ok(mcp, "create_room", { description: "Pick a venue" });
    assert.equal(created.url, `${server.url}/${created.uuid}`);
    const posted = await ok(mcp, "send_message", { room: created.url, agent_id: "alice", text: "Hall B?" });
    assert.equal(posted.receipt.seq, posted.id);
    await api.say(created.uuid, "bob", "Hall B works");
    const page = await ok(mcp, "read_messages", { uuid: created.uuid, since: 0 });
    assert.deepEqual(page.messages.map((m: any) => [m.agent_id, m.text]), [["alice", "Hall B?"], ["bob", "Hall B works"]]);
    assert.deepEqual(page, (await api.get(`/api/rooms/${created.uuid}/messages?since=0`)).body, "the same page as REST");
    assert.deepEqual(await ok(mcp, "get_room", { uuid: created.uuid }), (await api.get(`/api/rooms/${created.uuid}`)).body);
    const verified = await ok(mcp, "verify_integrity", { room: created.uuid, checkpoint: posted.receipt.checkpoint });
    assert.equal(verified.verdict, "CLEAN", verified.explanation);
    const proposed = await ok(mcp, "revise_thread", { uuid: created.uuid, agent_id: "alice", kind: "propose", subject: "Venue", value: "Hall B" });
    assert.deepEqual((await ok(mcp, "get_context", { room: created.uuid })).threads.map((x: any) => x.id), [proposed.id]);
  });

  test("errors are tool results with the REST body, validated by the REST schemas", async () => {
    const { uuid } = await api.room();
    for (const args of [{ agent_id: "a", text: "" }, { agent_id: "   ", text: "hi" }, { agent_id: "a", text: "hi", reply_to: 999 }]) {
      const rest = await api.say(uuid, args.agent_id, args.text, args);
      assert.deepEqual(await fails(mcp, "send_message", { room: uuid, ...args }, "validation_error"), rest.body, JSON.stringify(args));
    }
    assert.deepEqual(await fails(mcp, "read_messages", { room: UNKNOWN_ROOM }, "room_not_found"), (await api.get(`/api/rooms/${UNKNOWN_ROOM}/messages`)).body);
    assert.match((await fails(mcp, "read_messages", { room: uuid, uuid: UNKNOWN_ROOM }, "validation_error")).detail, /^uuid: names another room/);
    assert.equal((await api.get(`/api/rooms/${uuid}`)).body.message_count, 0, "failed calls stored nothing");
    await assert.rejects(mcp.callTool({ name: "delete_everything", arguments: {} }), /Unknown tool/);
  });

  test("read_messages with wait long-polls until another agent posts, holding one stream slot while it waits", { timeout: 8_000 }, async () => {
    const { uuid } = await api.room();
    const waiting = ok(mcp, "read_messages", { room: uuid, since: 1, wait: 10 });
    await until(() => held() === 1, "the long-poll is parked", 5_000);
    assert.equal((await api.say(uuid, "carol", "anyone there?")).status, 201);
    assert.deepEqual((await waiting).messages.map((m: any) => m.text), ["anyone there?"]);
    await until(() => held() === 0, "the long-poll's slot is released", 5_000);
  });

  test("subscriptions/listen pushes each new message of the rooms it names; the stream holds a stream slot until closed", { timeout: 15_000 }, async () => {
    const one = (await api.room()).uuid;
    const two = (await api.room()).uuid;
    const updated: string[] = [];
    mcp.setNotificationHandler("notifications/resources/updated", (n) => void updated.push(n.params.uri));
    const idle = server.svc.notifier.streamCount;
    const sub = await mcp.listen({ resourceSubscriptions: [messagesOf(one), messagesOf(two)] });
    try {
      assert.deepEqual(sub.honoredFilter, { resourceSubscriptions: [messagesOf(one), messagesOf(two)] });
      assert.equal(held(), 1, "one stream slot, as GET /events");
      assert.equal(server.svc.notifier.streamCount, idle + 2, "one wake-up per room");

      await api.say(one, "bob", "first");
      await until(() => updated.length === 1, "the first message is pushed");
      assert.deepEqual(updated, [messagesOf(one)]);
      // The notification says where; the agent reads from its cursor.
      assert.deepEqual((await ok(mcp, "read_messages", { room: one, since: 0 })).messages.map((m: any) => m.text), ["first"]);

      const other = await connectMcp(server.url);
      try {
        await ok(other, "send_message", { room: two, agent_id: "carol", text: "over 2025 MCP" });
      } finally {
        await other.close();
      }
      await until(() => updated.length === 2, "a message of the second room is pushed");
      await api.say(one, "bob", "second");
      await until(() => updated.length === 3, "and the next one of the first");
      assert.deepEqual(updated, [messagesOf(one), messagesOf(two), messagesOf(one)]);
    } finally {
      await sub.close();
    }
    assert.equal(await sub.closed, "local");
    await until(() => held() === 0 && server.svc.notifier.streamCount === idle, "the stream's slot and wake-ups are released", 5_000);
  });

  test("a listened room that is deleted gets a last update, and its stream ends gracefully", { timeout: 15_000 }, async () => {
    const room = await api.room();
    const updated: string[] = [];
    mcp.setNotificationHandler("notifications/resources/updated", (n) => void updated.push(n.params.uri));
    const sub = await mcp.listen({ resourceSubscriptions: [messagesOf(room.uuid)] });
    assert.equal((await api.del(`/api/rooms/${room.uuid}`, { authorization: `Bearer ${room.owner_token}` })).status, 200);
    assert.equal(await sub.closed, "graceful");
    assert.deepEqual(updated, [messagesOf(room.uuid)]);
    await until(() => held() === 0, "the stream's slot is released", 5_000);
    await assert.rejects(mcp.readResource({ uri: messagesOf(room.uuid) }), (err: any) => err.data?.code === "room_not_found");
  });

  test("subscriptions/listen refuses an unknown room or a foreign URI with the REST code, and holds nothing", async () => {
    const { uuid } = await api.room();
    const refused = async (uris: string[], code: string) =>
      assert.rejects(mcp.listen({ resourceSubscriptions: uris }), (err: any) => {
        assert.equal(err.code, -32602, err.message);
        assert.equal(err.data?.code, code, err.message);
        return true;
      });
    await refused([messagesOf(uuid), messagesOf(UNKNOWN_ROOM)], "room_not_found");
    await refused(["https://example.com/feed"], "validation_error");
    await refused(Array.from({ length: 21 }, () => messagesOf(uuid)), "validation_error");
    assert.equal(held(), 0);
  });

  test("resources: a room's messages as a resource template; a read gives its newest messages, as REST tail", async () => {
    const { resourceTemplates } = await mcp.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((r) => r.uriTemplate), ["parley://rooms/{room}/messages"]);
    const { uuid } = await api.room();
    await api.say(uuid, "bob", "hello");
    const read = await mcp.readResource({ uri: messagesOf(uuid) });
    const content = read.contents[0] as { uri: string; mimeType?: string; text: string };
    assert.deepEqual([content.uri, content.mimeType], [messagesOf(uuid), "application/json"]);
    assert.deepEqual(JSON.parse(content.text), (await api.get(`/api/rooms/${uuid}/messages?tail=100`)).body);
    await assert.rejects(mcp.readResource({ uri: messagesOf(UNKNOWN_ROOM) }), (err: any) => err.data?.code === "room_not_found");
    await assert.rejects(mcp.readResource({ uri: "parley://elsewhere" }), /Unknown resource/);
  });
});
