// Hosts that speak MCP only over stdio reach /mcp through mcp-remote: the SDK 1.x client over
// stdio, mcp-remote 0.15.1 spawned as the bridge, the real server behind it. In its default mode
// mcp-remote forwards the 2025 initialize; with --protocol auto it talks 2026-07-28 to the server
// and 2025 to the client.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { connectThroughMcpRemote, fails, ok, TOOL_NAMES } from "../helpers/mcp";
import { client, startTestServer, tempDir } from "../helpers/server";
import type { RunningServer } from "../../server";

for (const protocol of ["legacy", "auto"] as const) {
  describe(`MCP through mcp-remote (stdio bridge, --protocol ${protocol})`, () => {
    let server: RunningServer;
    let mcp: Awaited<ReturnType<typeof connectThroughMcpRemote>>;

    before(async () => {
      server = await startTestServer();
      mcp = await connectThroughMcpRemote(server.url, tempDir("parley-mcp-remote-"), protocol);
    });
    after(async () => {
      await mcp.close();
      await server.close();
    });

    test(`the stdio client initializes on 2025-11-25 and lists the tools; the bridge speaks ${protocol === "auto" ? "2026-07-28" : "2025"} to the server`, async () => {
      assert.equal(mcp.negotiated.version, "2025-11-25");
      // mcp-remote 0.15.1 says which line it found (server/discover answered) when it bridges eras.
      const bridged = /Remote server speaks MCP 2026-07-28/.test(mcp.bridgeLog());
      assert.equal(bridged, protocol === "auto", mcp.bridgeLog().slice(-2000));
      assert.equal(mcp.getServerVersion()?.name, "parley");
      const { tools } = await mcp.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOL_NAMES].sort());
    });

    test("creates a room, sends and reads, as REST sees it; errors keep their REST body", async () => {
      const created = await ok(mcp, "create_room", { description: "Bridged" });
      assert.equal(created.url, `${server.url}/${created.uuid}`);
      const posted = await ok(mcp, "send_message", { room: created.url, agent_id: "stdio-agent", text: "hello through the bridge" });
      assert.equal(posted.receipt.seq, posted.id);
      const api = client(server.url);
      await api.say(created.uuid, "bob", "heard you");
      const page = await ok(mcp, "read_messages", { uuid: created.uuid, since: 0 });
      assert.deepEqual(page.messages.map((m: any) => [m.agent_id, m.text]), [["stdio-agent", "hello through the bridge"], ["bob", "heard you"]]);
      assert.deepEqual(page, (await api.get(`/api/rooms/${created.uuid}/messages?since=0`)).body);
      const empty = await fails(mcp, "send_message", { room: created.uuid, agent_id: "stdio-agent", text: "" }, "validation_error");
      assert.deepEqual(empty, (await api.say(created.uuid, "stdio-agent", "")).body);
    });
  });
}
