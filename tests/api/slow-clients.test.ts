/**
 * Slow and greedy clients: requests that never finish arriving, clients that hold many streams or
 * read none of them, whole-room exports in parallel, pages outside the budget, MCP batches, what a
 * turn reply costs, and requests node's HTTP layer refuses. Timeouts are configured short; the
 * tests wait for states, never time anything.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { postMessage } from "../../lib/services/messages";
import { EXPORTS_KEY, streamsKey } from "../../lib/services/rate-limit";
import { exportRoom } from "../../lib/services/verify";
import { ed25519VerifyAsync } from "../../lib/services/server-key";
import { verifyBundle, type RoomBundle } from "../../lib/log/verify";
import type { Frame } from "../../lib/realtime/feed";
import { ManualClock, startApi, type TestApi } from "../helpers/server";
import { openSse } from "../helpers/sse";
import { waitUntil } from "../helpers/wait";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LOCAL = streamsKey("127.0.0.1");

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses the first HTTP response in `text` (a Content-Length body, or what follows the head). */
function parseAnswer(text: string): RawAnswer {
  const end = text.indexOf("\r\n\r\n");
  assert.ok(end > 0, `no HTTP response in ${JSON.stringify(text.slice(0, 200))}`);
  const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  const length = headers["content-length"] === undefined ? undefined : Number(headers["content-length"]);
  const rest = text.slice(end + 4);
  return { status: Number(statusLine!.split(" ")[1]), headers, body: length === undefined ? rest : rest.slice(0, length) };
}

/** A raw TCP client: what it sent is up to the test; `closed` settles when the server hangs up. */
function rawSocket(port: number) {
  const socket = net.connect(port, "127.0.0.1");
  let received = "";
  let isClosed = false;
  socket.setEncoding("latin1");
  socket.on("data", (d: string) => (received += d));
  socket.on("error", () => {});
  const closed = new Promise<void>((resolve) => socket.on("close", () => ((isClosed = true), resolve())));
  return {
    socket,
    closed,
    get isClosed() {
      return isClosed;
    },
    get received() {
      return received;
    },
  };
}

/** Sends `payload` and returns the answer once the server closes the connection. */
async function exchange(port: number, payload: string): Promise<RawAnswer> {
  const c = rawSocket(port);
  c.socket.write(payload);
  await c.closed;
  return parseAnswer(c.received);
}

function assertApiError(answer: RawAnswer, status: number, code: string) {
  assert.equal(answer.status, status, answer.body);
  assert.match(answer.headers["content-type"] ?? "", /^application\/json/);
  const body = JSON.parse(answer.body);
  assert.equal(body.code, code);
  assert.ok(typeof body.detail === "string" && body.detail.length > 10, "a sentence a person can act on");
  assert.equal(answer.headers["x-content-type-options"], "nosniff");
  assert.equal(answer.headers["referrer-policy"], "no-referrer");
  assert.match(answer.headers["content-security-policy"] ?? "", /default-src 'none'/);
}

const caller = (f: TestApi) => ({ ip: "local", origin: f.url });

/** A room of `n` messages of 10,000 three-byte characters: ~60 KB of SSE frame each. */
async function bigRoom(f: TestApi, n: number): Promise<string> {
  const room = (await f.api.room({ description: "large messages" })).uuid;
  const text = "€".repeat(10_000);
  for (let i = 0; i < n; i++) await postMessage(f.server.svc, caller(f), room, { agent_id: `agent-${i % 3}`, text });
  return room;
}

describe("slow clients: read timeout, stream cap, stalled streams", () => {
  let f: TestApi;
  before(async () => {
    f = await startApi({
      PARLEY_REQUEST_READ_TIMEOUT: "1s",
      PARLEY_STALLED_STREAM_TIMEOUT: "1s",
      PARLEY_MAX_STREAMS_PER_CLIENT: "4",
    });
  });
  after(() => f.close());

  test("a request whose body never finishes is answered 408 request_timeout and closed", { timeout: 30_000 }, async () => {
    const c = rawSocket(f.server.port);
    c.socket.write("POST /api/rooms HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"des");
    await c.closed;
    assertApiError(parseAnswer(c.received), 408, "request_timeout");
  });

  test("a trickled body and trickled headers are cut the same way", { timeout: 30_000 }, async () => {
    const body = rawSocket(f.server.port);
    body.socket.write("POST /api/rooms HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n");
    const headers = rawSocket(f.server.port);
    headers.socket.write("GET /health HTTP/1.1\r\nHost: localhost\r\n");
    let i = 0;
    // A byte of body and a header line every 100 ms: always active, never done.
    const trickle = setInterval(() => {
      if (!body.isClosed) body.socket.write(" ");
      if (!headers.isClosed) headers.socket.write(`X-Slow-${i++}: 1\r\n`);
    }, 100);
    try {
      await Promise.all([body.closed, headers.closed]);
    } finally {
      clearInterval(trickle);
    }
    assertApiError(parseAnswer(body.received), 408, "request_timeout");
    assertApiError(parseAnswer(headers.received), 408, "request_timeout");
  });

  test("a long-poll waiting longer than the read timeout is not cut", async () => {
    const room = await f.api.room();
    const poll = f.api.get(`/api/rooms/${room.uuid}/messages?since=1&wait=10`);
    await waitUntil("the long-poll being parked", () => f.server.svc.limiter.held(LOCAL) === 1);
    await sleep(1_600); // past the read timeout and a sweep of the connections
    await f.api.say(room.uuid, "late", "said after the read timeout");
    const answer = await poll;
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body.messages.map((m: { text: string }) => m.text), ["said after the read timeout"]);
    await waitUntil("the long-poll's slot being released", () => f.server.svc.limiter.held(LOCAL) === 0);
  });

  test("an SSE stream lives on past the read timeout", async () => {
    const room = await f.api.room();
    const sse = await openSse(`${f.url}/api/rooms/${room.uuid}/events`);
    await sse.waitFor(1);
    await sleep(1_600);
    await f.api.say(room.uuid, "late", "said after the read timeout");
    const events = await sse.waitFor(2);
    assert.equal(JSON.parse(events[1]!.data).payload.text, "said after the read timeout");
    await sse.close();
    await waitUntil("the stream's slot being released", () => f.server.svc.limiter.held(LOCAL) === 0);
  });

  test("streams and long-polls share a per-client cap: the next one is 429 rate_limited, a closed one frees its slot", async () => {
    const room = await f.api.room();
    const events = `${f.url}/api/rooms/${room.uuid}/events`;
    const streams = [await openSse(events), await openSse(events), await openSse(events)];
    const poll = f.api.get(`/api/rooms/${room.uuid}/messages?since=1&wait=20`);
    await waitUntil("three streams and a long-poll held", () => f.server.svc.limiter.held(LOCAL) === 4);

    const refused = await fetch(events);
    assert.equal(refused.status, 429);
    assert.equal((await refused.json()).code, "rate_limited");
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    const refusedPoll = await f.api.get(`/api/rooms/${room.uuid}/turns/mine?agent_id=a&wait=5`);
    assert.equal(refusedPoll.body.code, "rate_limited");
    assert.match(refusedPoll.body.detail, /4 open event streams and long-polls/);
    const refusedMcp = await fetch(`${f.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "read_messages", arguments: { room: room.uuid, since: 1, wait: 5 } } }),
    });
    assert.equal(refusedMcp.status, 429);
    assert.equal((await refusedMcp.json()).code, "rate_limited");
    // A plain read holds nothing and still passes.
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}/messages`)).status, 200);

    await streams.pop()!.close(); // the client goes away
    await waitUntil("the closed stream's slot being released", () => f.server.svc.limiter.held(LOCAL) === 3);
    const again = await openSse(events);
    assert.equal(again.res.status, 200);
    streams.push(again);

    await f.api.say(room.uuid, "a", "wakes the long-poll"); // a long-poll that ends normally
    assert.equal((await poll).status, 200);
    await waitUntil("the answered long-poll's slot being released", () => f.server.svc.limiter.held(LOCAL) === 3);
    for (const s of streams) await s.close();
    await waitUntil("every slot released", () => f.server.svc.limiter.held(LOCAL) === 0);

    // Error paths release too: an unknown room, a bad Last-Event-ID.
    assert.equal((await f.api.get(`/api/rooms/00000000-0000-4000-8000-000000000000/events`)).body.code, "room_not_found");
    assert.equal((await f.api.get(`/api/rooms/${room.uuid}/events`, { "last-event-id": "x" })).body.code, "validation_error");
    await waitUntil("slots of failed requests released", () => f.server.svc.limiter.held(LOCAL) === 0);
  });

  test("an SSE client that never reads stops the stream's reading and is dropped; its slot is freed", { timeout: 30_000 }, async () => {
    const n = 300;
    const room = await bigRoom(f, n);
    // Counts the frames the server reads for this room (the store or the shared cache).
    const frames = f.server.svc.frames;
    const read = frames.read.bind(frames);
    let framesRead = 0;
    frames.read = async (id: string, since: number, limit?: number): Promise<Frame[]> => {
      const out = await read(id, since, limit);
      if (id === room) framesRead += out.length;
      return out;
    };
    try {
      const dropped = f.server.stalls.dropped;
      const c = rawSocket(f.server.port);
      c.socket.pause(); // reads at most its buffer, then nothing
      c.socket.write(`GET /api/rooms/${room}/events?since=0 HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      await waitUntil("the stalled stream being dropped", () => f.server.stalls.dropped > dropped, 20_000);
      await waitUntil("its slot being released", () => f.server.svc.limiter.held(LOCAL) === 0);
      assert.ok(framesRead < n, `the stream read ${framesRead} of ${n + 1} frames into a socket nobody read`);
      c.socket.resume();
      await c.closed;
      assert.match(c.received, /^HTTP\/1\.1 200/);
    } finally {
      frames.read = read;
    }
  });
});

describe("exports: streamed, the same bundle, a bounded number at once", () => {
  let f: TestApi;
  let room: string;
  before(async () => {
    f = await startApi({ PARLEY_MAX_CONCURRENT_EXPORTS: "1" });
    room = await bigRoom(f, 300);
  });
  after(() => f.close());

  test("the streamed export is byte for byte the bundle, and it verifies CLEAN", async () => {
    // Something in every projection's list, and a room with several pages of events.
    await f.api.post(`/api/rooms/${room}/claims`, { agent_id: "agent-0", subject: "price", value: "10" });
    const res = await fetch(`${f.url}/api/rooms/${room}/export`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type")!, /^application\/json/);
    assert.equal(res.headers.get("content-disposition"), `attachment; filename="parley-room-${room}.json"`);
    const text = await res.text();
    assert.equal(text, JSON.stringify(await exportRoom(f.server.svc, room)), "the same bytes as the bundle in one piece");
    const report = await verifyBundle(JSON.parse(text) as RoomBundle, { verify: ed25519VerifyAsync });
    assert.equal(report.verdict, "CLEAN", JSON.stringify(report.failures));
  });

  test("a room with an empty list (no messages) and one of exactly whole pages of events export whole", async () => {
    // A page that brings nothing must not end the pulls: these exports hung once.
    const boardOnly = await f.api.room();
    await f.api.post(`/api/rooms/${boardOnly.uuid}/tasks`, { agent_id: "boss", title: "no chat here" });
    const wholePages = await f.api.room();
    while ((await f.api.get(`/api/rooms/${wholePages.uuid}`)).body.head.size < 128) await f.api.say(wholePages.uuid, "ann", "filling pages");
    for (const uuid of [boardOnly.uuid, wholePages.uuid]) {
      const text = await (await fetch(`${f.url}/api/rooms/${uuid}/export`, { signal: AbortSignal.timeout(10_000) })).text();
      assert.equal(text, JSON.stringify(await exportRoom(f.server.svc, uuid)));
    }
  });

  test("exports past the bound are 429 rate_limited until one ends; verify shares the bound", { timeout: 30_000 }, async () => {
    // A client that reads nothing of an 18 MB export keeps it running.
    const slow = rawSocket(f.server.port);
    slow.socket.pause();
    slow.socket.write(`GET /api/rooms/${room}/export HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    await waitUntil("the slow export holding the slot", () => f.server.svc.limiter.held(EXPORTS_KEY) === 1);

    const refused = await fetch(`${f.url}/api/rooms/${room}/export`);
    assert.equal(refused.status, 429);
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    const body = await refused.json();
    assert.equal(body.code, "rate_limited");
    assert.match(body.detail, /exporting or verifying 1 rooms/);
    assert.equal((await f.api.post(`/api/rooms/${room}/verify`, {})).body.code, "rate_limited");

    slow.socket.destroy();
    await waitUntil("the abandoned export's slot being released", () => f.server.svc.limiter.held(EXPORTS_KEY) === 0);
    assert.equal((await f.api.post(`/api/rooms/${room}/verify`, {})).body.verdict, "CLEAN");
    const res = await fetch(`${f.url}/api/rooms/${room}/export`);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  });
});

describe("what requests cost: MCP batches, turn replies", () => {
  let f: TestApi;
  before(async () => {
    // The clock stands still: no bucket refills while a test counts.
    f = await startApi({ PARLEY_TRUST_PROXY: "1", PARLEY_RATE_POSTS_PER_MINUTE: "3", PARLEY_RATE_REQUESTS_PER_MINUTE: "10" }, { clock: new ManualClock(Date.now()) });
  });
  after(() => f.close());

  const from = (ip: string) => ({ "x-forwarded-for": ip });
  const rpc = (body: unknown, ip: string) =>
    fetch(`${f.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18", ...from(ip) },
      body: JSON.stringify(body),
    });

  test("an MCP batch is refused with a JSON-RPC error and nothing in it runs", async () => {
    const room = (await f.api.post("/api/rooms", {}, from("10.1.0.1"))).body.uuid;
    const batch = [
      { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "send_message", arguments: { room, agent_id: "a", text: "in a batch" } } },
      ...Array.from({ length: 5 }, (_, i) => ({ jsonrpc: "2.0", id: i + 2, method: "tools/list" })),
    ];
    const res = await rpc(batch, "10.1.0.2");
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.equal(body.error.code, -32600);
    assert.match(body.error.message, /batches are not supported/);
    const info = await f.api.get(`/api/rooms/${room}`, from("10.1.0.1"));
    assert.equal(info.body.message_count, 0, "the batch's send_message did not run");
  });

  test("a turn reply, REST or MCP, costs one post token and no request token, as a post does", async () => {
    // X sets up and claims; Y, whose request budget is spent, replies and posts.
    const x = from("10.2.0.1");
    const y = from("10.2.0.2");
    for (let i = 0; i < 20 && (await f.api.get("/health", y)).status !== 429; i++);
    assert.equal((await f.api.get("/api/rooms", y)).body.code, "rate_limited", "Y's request budget is spent");

    const created = await f.api.post("/api/rooms", { mode: "turns", turns: { participants: ["ana", "ben"], first: "ana", max_rounds: 5, turn_timeout_s: 300, delay_s: 0 } }, x);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const room = created.body.uuid as string;
    const open = (await f.api.post("/api/rooms", {}, x)).body.uuid as string;
    const claimCurrent = async (agent: string) => {
      const turn = (await f.api.get(`/api/rooms/${room}/turns/current`, x)).body.current as { id: number; agent_id: string };
      assert.equal(turn.agent_id, agent);
      const claimed = await f.api.post(`/api/rooms/${room}/turns/${turn.id}/claim`, { agent_id: agent }, x);
      assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
      return { id: turn.id, lease_token: claimed.body.lease_token as string };
    };

    const ana = await claimCurrent("ana");
    const rest = await f.api.post(`/api/rooms/${room}/turns/${ana.id}/reply`, { agent_id: "ana", lease_token: ana.lease_token, text: "ana's turn", result: "continue" }, y);
    assert.equal(rest.status, 200, JSON.stringify(rest.body)); // post token 1

    const ben = await claimCurrent("ben");
    const mcp = await rpc({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "reply_turn", arguments: { room, turn_id: ben.id, agent_id: "ben", lease_token: ben.lease_token, text: "ben's turn", result: "continue" } } }, "10.2.0.2");
    assert.equal(mcp.status, 200);
    const result = (await mcp.json()).result;
    assert.ok(!result.isError, result.content?.[0]?.text); // post token 2

    assert.equal((await f.api.post(`/api/rooms/${open}/messages`, { agent_id: "cy", text: "a post" }, y)).status, 201); // post token 3
    const limited = await f.api.post(`/api/rooms/${open}/messages`, { agent_id: "cy", text: "one too many" }, y);
    assert.equal(limited.body.code, "rate_limited");
    assert.match(limited.body.detail, /messages from your address/);
  });
});

describe("requests node's HTTP layer refuses get the API's answer", () => {
  let f: TestApi;
  before(async () => (f = await startApi()));
  after(() => f.close());

  test("an invalid or missing Host, and a request that is not HTTP, are JSON with a code and the security headers", { timeout: 30_000 }, async () => {
    for (const host of ["exa mple", "a/b", "user@host", "x:99999", ""]) {
      assertApiError(await exchange(f.server.port, `GET /health HTTP/1.1\r\nHost: ${host}\r\n\r\n`), 400, "bad_request");
    }
    assertApiError(await exchange(f.server.port, "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"), 400, "bad_request");
    assertApiError(await exchange(f.server.port, "NOT HTTP AT ALL\r\n\r\n"), 400, "bad_request");
    assertApiError(await exchange(f.server.port, `GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: ${"x".repeat(20_000)}\r\n\r\n`), 431, "headers_too_large");
  });

  test("a target the URL parser reads as an authority (//host:port) does not take the server down", { timeout: 30_000 }, async () => {
    const odd = await exchange(f.server.port, "GET //x:99999/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert.equal(JSON.parse(odd.body).code, "not_found");
    const health = await f.api.get("/health");
    assert.equal(health.status, 200);
  });
});

