import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { connectMcp, fails, ok, until } from "../helpers/mcp";
import { client, startTestServer } from "../helpers/server";
import { waitUntil } from "../helpers/wait";
import { streamsKey } from "../../lib/services/rate-limit";
import type { RunningServer } from "../../server";

type Api = ReturnType<typeof client>;

const UNKNOWN_ROOM = "3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23";
const AGENTS = ["ana", "ben", "cy"] as const;
const TURN_KEYS = ["agent_id", "available_at", "claim_by", "closed_at", "id", "lease_until", "message_id", "opened_at", "phase", "reason", "result", "round", "slot", "status"];
const MESSAGE_KEYS = ["agent_id", "auth", "hash", "id", "key_ref", "memory_root", "mentions", "pubkey_hex", "reply_to", "signature_hex", "text", "timestamp", "ts_iso"];

const keys = (o: object) => Object.keys(o).sort();

function assertTurn(turn: any, agent: string): void {
  assert.deepEqual(keys(turn), TURN_KEYS, "the turn as REST shows it (no lease hash)");
  assert.equal(turn.agent_id, agent);
}

async function turnsRoom(api: Api): Promise<string> {
  const r = await api.post("/api/rooms", { mode: "turns", turns: { participants: [...AGENTS] } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.uuid;
}

describe("MCP turns tools", () => {
  let server: RunningServer;
  let api: Api;
  const clients = new Map<string, Client>();
  const agent = (name: string) => clients.get(name)!;

  before(async () => {
    server = await startTestServer();
    api = client(server.url);
    for (const name of [...AGENTS, "dan"]) clients.set(name, await connectMcp(server.url));
  });
  after(async () => {
    for (const mcp of clients.values()) await mcp.close();
    await server.close();
  });

  test("three agents finish a conversation through MCP alone: my_turn with wait and claim, reply_turn, consensus", async () => {
    const room = await turnsRoom(api);
    const roomUrl = `${server.url}/${room}`;

    // my_turn over MCP is GET /turns/mine over REST.
    const first = await ok(agent("ana"), "my_turn", { room: roomUrl, agent_id: "ana" });
    assert.deepEqual(first, (await api.get(`/api/rooms/${room}/turns/mine?agent_id=ana`)).body);
    assert.deepEqual(keys(first), ["detail", "input_messages", "room_status", "turn"]);
    assert.equal(first.room_status, "active");
    assertTurn(first.turn, "ana");
    assert.deepEqual([first.turn.round, first.turn.phase, first.turn.status], [1, "dialogue", "ready"]);
    assert.deepEqual(first.input_messages.map((m: any) => m.agent_id), ["server"], "the kickoff protocol card");
    assert.deepEqual(keys(first.input_messages[0]), MESSAGE_KEYS);
    const notYet = await ok(agent("ben"), "my_turn", { room, agent_id: "ben" });
    assert.equal(notYet.turn, null);
    assert.match(notYet.detail, /Not your turn yet/);

    // Every agent runs the loop at once; the server orders them. ana proposes in round 2, the others confirm.
    const replies: { agent: string; text: string; result: string; phase: string; seen: string[] }[] = [];
    async function run(name: string) {
      const mcp = agent(name);
      for (let i = 0; i < 20; i++) {
        // One call waits for the turn and takes it: my_turn with claim.
        const mine = await ok(mcp, "my_turn", { room: i % 2 ? roomUrl : room, agent_id: name, wait: 10, claim: true });
        if (mine.room_status !== "active" || mine.turn === null) {
          assert.deepEqual(keys(mine), ["detail", "input_messages", "room_status", "turn"], "nothing claimed");
          if (mine.room_status !== "active") return mine;
          continue;
        }
        const claimed = mine;
        assert.deepEqual(keys(claimed), ["detail", "input_messages", "lease_token", "lease_until", "receipt", "room_status", "turn"]);
        assertTurn(claimed.turn, name);
        assert.equal(claimed.turn.status, "claimed");
        assert.equal(claimed.turn.lease_until, claimed.lease_until);
        assert.equal(typeof claimed.receipt.checkpoint, "string");
        assert.match(claimed.detail, new RegExp(`^It is your turn \\(${claimed.turn.id}\\)\\. .*You hold its lease until ${claimed.lease_until}: answer with reply_turn`));
        assert.doesNotMatch(claimed.detail, /Claim it/, "the detail says what is left to do");
        const again = await ok(mcp, "my_turn", { room, agent_id: name, claim: true });
        assert.equal(again.lease_token, claimed.lease_token, "a live re-claim returns the same lease token");
        assert.equal(again.receipt, null, "and appends nothing");
        assert.deepEqual(again.input_messages, claimed.input_messages, "the same messages since this agent's last turn");
        const peek = await ok(mcp, "my_turn", { room, agent_id: name });
        assert.deepEqual([peek.turn.status, peek.lease_token], ["claimed", undefined], "without claim, my_turn only looks");

        const result = mine.turn.phase === "confirm" ? "complete" : name === "ana" && mine.turn.round === 2 ? "complete" : "continue";
        const text = `${name}, round ${mine.turn.round} (${mine.turn.phase}): ${result}`;
        const replied = await ok(mcp, "reply_turn", { room, agent_id: name, turn_id: mine.turn.id, lease_token: claimed.lease_token, text, result });
        assert.deepEqual(keys(replied), ["message_id", "next", "receipt", "room_status", "turn"]);
        assertTurn(replied.turn, name);
        assert.deepEqual([replied.turn.status, replied.turn.result, replied.turn.message_id], ["done", result, replied.message_id]);
        assert.equal(replied.receipt.seq, replied.message_id);
        replies.push({ agent: name, text, result, phase: mine.turn.phase, seen: mine.input_messages.filter((m: any) => m.agent_id !== "server").map((m: any) => m.text) });
        if (replied.room_status === "completed") {
          assert.equal(replied.next, null);
        } else {
          assert.equal(replied.room_status, "active");
          assert.ok(replied.next, "the next turn is open");
          // Ready, or already claimed for its agent when that agent's my_turn with claim was waiting.
          assert.ok(["ready", "claimed"].includes(replied.next.status), replied.next.status);
        }
      }
      assert.fail(`${name} never saw the room end`);
    }
    const ends = await Promise.all(AGENTS.map(run));

    assert.deepEqual(
      replies.map((r) => [r.agent, r.phase, r.result]),
      [
        ["ana", "dialogue", "continue"], ["ben", "dialogue", "continue"], ["cy", "dialogue", "continue"],
        ["ana", "dialogue", "complete"], ["ben", "confirm", "complete"], ["cy", "confirm", "complete"],
      ],
    );
    // Each turn came with what the others said since this agent's previous turn.
    replies.forEach((r, i) => {
      const previous = replies.slice(0, i).map((x) => x.agent).lastIndexOf(r.agent);
      assert.deepEqual(r.seen, replies.slice(previous + 1, i).map((x) => x.text), `input_messages of reply ${i}`);
    });
    for (const end of ends) {
      assert.equal(end.room_status, "completed");
      assert.equal(end.turn, null);
      assert.match(end.detail, /complete/);
    }
    const endRest = (await api.get(`/api/rooms/${room}/turns/mine?agent_id=ben`)).body;
    assert.deepEqual(await ok(agent("ben"), "my_turn", { room, agent_id: "ben", wait: 5 }), endRest, "the same answer as REST, at once");

    const overview = (await api.get(`/api/rooms/${room}/turns`)).body;
    assert.equal(overview.status, "completed");
    assert.equal(overview.current, null);
    assert.deepEqual(overview.turns.map((t: any) => [t.agent_id, t.phase, t.status]), replies.map((r) => [r.agent, r.phase, "done"]));
    const messages = (await api.get(`/api/rooms/${room}/messages?since=0`)).body.messages;
    assert.deepEqual(messages.filter((m: any) => m.agent_id !== "server").map((m: any) => m.text), replies.map((r) => r.text));

    const verified = await api.post(`/api/rooms/${room}/verify`, {});
    assert.equal(verified.status, 200);
    assert.equal(verified.body.verdict, "CLEAN", verified.body.explanation);

    // A completed room is read-only over MCP too.
    const last = overview.turns.at(-1);
    assert.equal((await fails(agent("ana"), "claim_turn", { room, agent_id: "ana", turn_id: last.id })).code, "room_closed");
    assert.deepEqual(await ok(agent("ana"), "my_turn", { room, agent_id: "ana", claim: true }), (await api.get(`/api/rooms/${room}/turns/mine?agent_id=ana`)).body, "nothing to claim: my_turn's answer");
  });

  test("reply_turn with my_next: after the first my_turn, one tool call a turn; its wait holds a stream slot", { timeout: 15_000 }, async () => {
    const r = await api.post("/api/rooms", { mode: "turns", turns: { participants: ["ana", "ben"], max_rounds: 3 } });
    const room = r.body.uuid as string;
    const seen: string[] = [];
    async function run(name: string) {
      let calls = 0;
      let mine = await ok(agent(name), "my_turn", { room, agent_id: name, wait: 10, claim: true });
      calls++;
      while (mine.turn) {
        assert.deepEqual([mine.turn.agent_id, mine.turn.status, typeof mine.lease_token], [name, "claimed", "string"]);
        seen.push(`${name} ${mine.turn.round}`);
        const replied = await ok(agent(name), "reply_turn", {
          room, agent_id: name, turn_id: mine.turn.id, lease_token: mine.lease_token, text: `${name} in round ${mine.turn.round}`, result: "continue", my_next: { wait: 10, claim: true },
        });
        calls++;
        assert.equal(replied.turn.status, "done");
        mine = replied.my_next;
        if (mine.turn) assert.equal(mine.input_messages.at(-1).text.startsWith(name === "ana" ? "ben" : "ana"), true, "the other's reply is handed over");
      }
      assert.equal(mine.room_status, "blocked");
      return calls;
    }
    const [anaCalls, benCalls] = await Promise.all([run("ana"), run("ben")]);
    assert.deepEqual(seen, ["ana 1", "ben 1", "ana 2", "ben 2", "ana 3", "ben 3"]);
    assert.deepEqual([anaCalls, benCalls], [4, 4], "one call a turn, after the first my_turn");
    assert.equal((await api.post(`/api/rooms/${room}/verify`, {})).body.verdict, "CLEAN");
    const bad = await fails(agent("ana"), "reply_turn", { room, agent_id: "ana", turn_id: 1, lease_token: "x".repeat(43), text: "t", result: "continue", my_next: { wait: 31 } });
    assert.deepEqual([bad.code, /^my_next\.wait/.test(bad.detail)], ["validation_error", true]);

    // While it waits, the call holds one of its caller's stream slots, as my_turn's wait does.
    const other = (await api.post("/api/rooms", { mode: "turns", turns: { participants: ["ana", "ben"] } })).body.uuid as string;
    const slots = () => server.svc.limiter.held(streamsKey("127.0.0.1"));
    const a = await ok(agent("ana"), "my_turn", { room: other, agent_id: "ana", claim: true });
    const waiting = ok(agent("ana"), "reply_turn", { room: other, agent_id: "ana", turn_id: a.turn.id, lease_token: a.lease_token, text: "over", result: "continue", my_next: { wait: 10 } });
    await waitUntil("the reply's wait holding a slot", () => slots() === 1);
    const b = await ok(agent("ben"), "my_turn", { room: other, agent_id: "ben", claim: true });
    await ok(agent("ben"), "reply_turn", { room: other, agent_id: "ben", turn_id: b.turn.id, lease_token: b.lease_token, text: "back", result: "continue" });
    const answered = await waiting;
    assert.deepEqual([answered.my_next.turn.agent_id, answered.my_next.turn.status, answered.my_next.lease_token], ["ana", "ready", undefined], "without claim: only looked");
    await waitUntil("the slot being released", () => slots() === 0);
  });

  test("create_room with mode turns starts a turns room over MCP, with the REST rules for its config", async () => {
    const created = await ok(agent("ana"), "create_room", { mode: "turns", turns: { participants: ["ana", "ben"], first: "ben", max_rounds: 3 } });
    assert.equal(created.mode, "turns");
    assert.equal((await ok(agent("ana"), "get_room", { room: created.uuid })).mode, "turns");
    const first = await ok(agent("ben"), "my_turn", { room: created.url, agent_id: "ben" });
    assert.deepEqual([first.room_status, first.turn.agent_id], ["active", "ben"]);
    const overview = await api.get(`/api/rooms/${created.uuid}/turns`);
    assert.equal(overview.body.max_rounds, 3);
    for (const args of [{ mode: "turns" }, { turns: { participants: ["ana", "ben"] } }, { mode: "turns", turns: { participants: ["ana"] } }]) {
      const mcpError = await fails(agent("ana"), "create_room", args);
      assert.equal(mcpError.code, "validation_error", JSON.stringify(args));
      assert.deepEqual(mcpError, (await api.post("/api/rooms", args)).body, "the same detail as REST");
    }
  });

  // claim_turn, folded into my_turn (claim), still answers to its name: these use it, and my_turn's claim.
  test("errors are tool errors with the REST code and sentence: not_your_turn, not_participant, room_not_found, validation", async () => {
    const room = await turnsRoom(api);
    const mine = await ok(agent("ana"), "my_turn", { room, agent_id: "ana" });
    const tid = mine.turn.id as number;
    const restClaim = (agent_id: string) => api.post(`/api/rooms/${room}/turns/${tid}/claim`, { agent_id });

    // Claim by the wrong agent.
    const wrong = await fails(agent("ben"), "claim_turn", { room, agent_id: "ben", turn_id: tid });
    assert.equal(wrong.code, "not_your_turn");
    const wrongRest = await restClaim("ben");
    assert.equal(wrongRest.status, 403);
    assert.deepEqual(wrong, wrongRest.body, "the same code and detail as REST");

    // Reply with a wrong lease token (and with ana's token by another agent).
    const claimed = await ok(agent("ana"), "claim_turn", { room, agent_id: "ana", turn_id: tid });
    const reply = (agent_id: string, lease_token: string) => ({ room, agent_id, turn_id: tid, lease_token, text: "hello", result: "continue" });
    const badToken = await fails(agent("ana"), "reply_turn", reply("ana", "not-the-lease-token"));
    assert.equal(badToken.code, "not_your_turn");
    const badTokenRest = await api.post(`/api/rooms/${room}/turns/${tid}/reply`, bodyOf(reply("ana", "not-the-lease-token")));
    assert.deepEqual(badToken, badTokenRest.body);
    assert.equal((await fails(agent("ben"), "reply_turn", reply("ben", claimed.lease_token))).code, "not_your_turn");

    // The REST re-claim and the MCP re-claim are one and the same lease.
    const reclaimRest = await restClaim("ana");
    assert.equal(reclaimRest.status, 200);
    assert.deepEqual(await ok(agent("ana"), "claim_turn", { room, agent_id: "ana", turn_id: tid }), reclaimRest.body);
    assert.equal(reclaimRest.body.lease_token, claimed.lease_token);

    // my_turn's claim is the same lease too.
    const viaMyTurn = await ok(agent("ana"), "my_turn", { room, agent_id: "ana", claim: true });
    assert.deepEqual([viaMyTurn.turn.id, viaMyTurn.lease_token], [tid, claimed.lease_token]);
    assert.equal((await ok(agent("ben"), "my_turn", { room, agent_id: "ben", claim: true })).lease_token, undefined, "not ben's turn: nothing claimed");

    // A non-participant, on every turn tool.
    for (const [name, args] of [
      ["my_turn", { room, agent_id: "dan", wait: 1 }],
      ["my_turn", { room, agent_id: "dan", claim: true }],
      ["claim_turn", { room, agent_id: "dan", turn_id: tid }],
      ["reply_turn", reply("dan", claimed.lease_token)],
    ] as const) {
      const err = await fails(agent("dan"), name, args);
      assert.equal(err.code, "not_participant", name);
      assert.match(err.detail, /"ana", "ben", "cy"/, "the detail names the participants");
    }
    assert.deepEqual(await fails(agent("dan"), "my_turn", { room, agent_id: "dan" }), (await api.get(`/api/rooms/${room}/turns/mine?agent_id=dan`)).body);

    // An unknown room, as a UUID or a URL.
    for (const r of [UNKNOWN_ROOM, `${server.url}/${UNKNOWN_ROOM}`]) {
      for (const [name, args] of [
        ["my_turn", { room: r, agent_id: "ana", wait: 1 }],
        ["claim_turn", { room: r, agent_id: "ana", turn_id: 1 }],
        ["reply_turn", { ...reply("ana", "x"), room: r }],
      ] as const) {
        assert.equal((await fails(agent("ana"), name, args)).code, "room_not_found", `${name} ${r}`);
      }
    }
    assert.deepEqual(await fails(agent("ana"), "my_turn", { room: UNKNOWN_ROOM, agent_id: "ana" }), (await api.get(`/api/rooms/${UNKNOWN_ROOM}/turns/mine?agent_id=ana`)).body);
    assert.equal((await fails(agent("ana"), "claim_turn", { room, agent_id: "ana", turn_id: 999 })).code, "turn_not_found");

    // Arguments of the wrong type or out of range: validation_error naming the argument, before anything is written.
    const cases: [string, Record<string, unknown>, string][] = [
      ["my_turn", { room, agent_id: 5 }, "agent_id"],
      ["my_turn", { room }, "agent_id"],
      ["my_turn", { room, agent_id: "ana", wait: "soon" }, "wait"],
      ["my_turn", { room, agent_id: "ana", wait: true }, "wait"],
      ["my_turn", { room, agent_id: "ana", wait: 31 }, "wait"],
      ["my_turn", { room, agent_id: "ana", wait: 2.5 }, "wait"],
      ["my_turn", { room, agent_id: "ana", wait: -1 }, "wait"],
      ["my_turn", { room: 42, agent_id: "ana" }, "room"],
      ["my_turn", { room, agent_id: "ana", claim: "yes" }, "claim"],
      ["my_turn", { room, agent_id: "ana", claim: true, sig: { pubkey_hex: "zz" } }, "sig"],
      ["claim_turn", { room, agent_id: "ana", turn_id: String(tid) }, "turn_id"],
      ["claim_turn", { room, agent_id: "ana", turn_id: 0 }, "turn_id"],
      ["claim_turn", { room, agent_id: "ana", turn_id: 1.5 }, "turn_id"],
      ["claim_turn", { room, agent_id: "ana" }, "turn_id"],
      ["claim_turn", { room, agent_id: ["ana"], turn_id: tid }, "agent_id"],
      ["reply_turn", { ...reply("ana", claimed.lease_token), result: "done" }, "result"],
      ["reply_turn", { ...reply("ana", claimed.lease_token), result: undefined }, "result"],
      ["reply_turn", { ...reply("ana", claimed.lease_token), text: 5 }, "text"],
      ["reply_turn", { ...reply("ana", claimed.lease_token), text: "   " }, "text"],
      ["reply_turn", { ...reply("ana", claimed.lease_token), lease_token: 7 }, "lease_token"],
      ["reply_turn", { ...reply("ana", claimed.lease_token), turn_id: "1" }, "turn_id"],
    ];
    for (const [name, args, field] of cases) {
      const err = await fails(agent("ana"), name, args);
      assert.equal(err.code, "validation_error", `${name} ${JSON.stringify(args)}`);
      assert.ok(err.detail.startsWith(field), `${name}: ${err.detail}`);
    }

    // None of that wrote anything: ana still holds the turn, and her reply goes through.
    const before = (await api.get(`/api/rooms/${room}/turns/current`)).body;
    assert.deepEqual([before.current.id, before.current.status], [tid, "claimed"]);
    const done = await ok(agent("ana"), "reply_turn", reply("ana", claimed.lease_token));
    assert.equal(done.next.agent_id, "ben");
    assert.equal((await fails(agent("ana"), "reply_turn", reply("ana", claimed.lease_token))).code, "invalid_transition", "one reply per turn");
    const messages = (await api.get(`/api/rooms/${room}/messages?since=0`)).body.messages;
    assert.deepEqual(messages.map((m: any) => m.agent_id), ["server", "ana"]);
  });

  test("my_turn with wait ends when the client goes away: the long-poll leaves no waiter behind", async () => {
    const room = await turnsRoom(api);
    const notifier = server.svc.notifier;
    const idle = notifier.streamCount;
    const waiter = await connectMcp(server.url);
    const pending = waiter.callTool({ name: "my_turn", arguments: { room, agent_id: "ben", wait: 30 } }).then(
      () => "answered",
      () => "rejected",
    );
    await until(() => notifier.streamCount > idle, "ben's my_turn waits for the room", 5_000);
    await waiter.close();
    await until(() => notifier.streamCount === idle, "the wait ends with the connection", 5_000);
    assert.equal(await pending, "rejected", "the closed client gets no answer");
  });

  // A missed wake-up would still hand ben his turn, but only when the 20 s wait runs out: the
  // test's timeout, shorter than the wait, fails it first.
  test("my_turn with wait returns as soon as the turn passes to this agent", { timeout: 10_000 }, async () => {
    const room = await turnsRoom(api);
    const notifier = server.svc.notifier;
    const idle = notifier.streamCount;
    const waiting = ok(agent("ben"), "my_turn", { room, agent_id: "ben", wait: 20 });
    await until(() => notifier.streamCount > idle, "ben's my_turn waits for the room", 5_000);
    const claimed = await ok(agent("ana"), "my_turn", { room, agent_id: "ana", claim: true });
    await ok(agent("ana"), "reply_turn", { room, agent_id: "ana", turn_id: claimed.turn.id, lease_token: claimed.lease_token, text: "over to ben", result: "pass" });
    const bens = await waiting;
    assertTurn(bens.turn, "ben");
    assert.equal(bens.turn.status, "ready");
    assert.ok(bens.input_messages.some((m: any) => m.text === "over to ben"));
  });
});

/** The REST body of a tool call: the arguments without `room`. */
function bodyOf(args: Record<string, unknown>): Record<string, unknown> {
  const { room: _room, turn_id: _tid, ...body } = args;
  return body;
}
