/**
 * The ceilings of this machine, each in a process of its own as the server is:
 *   node --import tsx tests/bench/ceiling-server.ts node <port>   an empty node:http server
 *   node --import tsx tests/bench/ceiling-server.ts hono <port>   a trivial Hono route on @hono/node-server
 *   node --import tsx tests/bench/ceiling-server.ts fanout <port> node:http doing only a delivery's I/O
 * The first two answer GET /api/rooms/:id/messages with the empty page an idle poll gets, so the
 * ceilings and the idle poll send and parse the same shape. The third is the delivery figures'
 * ceiling: the routes the delivery bench uses (create a room, read its head, SSE, long-poll, post)
 * with no store, no log and no validation, a post written at once to every open stream and
 * answered to every waiting long-poll, in the shapes and sizes of Parley's answers. Each prints "ready" when listening.
 */
import crypto from "node:crypto";
import http from "node:http";
import { serve } from "@hono/node-server";
import { Hono } from "hono";

const [kind, portArg] = process.argv.slice(2);
const port = Number(portArg);

if (kind === "node") {
  const server = http.createServer((req, res) => {
    const since = Number(/[?&]since=(\d+)/.exec(req.url ?? "")?.[1] ?? 0);
    const body = JSON.stringify({ messages: [], has_more: false, next_since: since });
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
    res.end(body);
  });
  server.keepAliveTimeout = 65_000;
  server.listen(port, "127.0.0.1", () => console.log("ready"));
} else if (kind === "hono") {
  const app = new Hono();
  app.get("/api/rooms/:id/messages", (c) => c.json({ messages: [], has_more: false, next_since: Number(c.req.query("since") ?? 0) }));
  const server = serve({ fetch: app.fetch, port, hostname: "127.0.0.1" }, () => console.log("ready")) as http.Server;
  server.keepAliveTimeout = 65_000;
} else if (kind === "fanout") {
  const streams = new Set<http.ServerResponse>();
  let waiting: http.ServerResponse[] = [];
  let seq = 0;
  let lastHash = "0".repeat(64);
  const room = crypto.randomUUID();
  const posted: { id: number }[] = [];
  const send = (res: http.ServerResponse, status: number, value: unknown) => {
    const body = JSON.stringify(value);
    res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
    res.end(body);
  };
  const server = http.createServer((req, res) => {
    const url = req.url ?? "";
    if (req.method === "POST") {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        if (url === "/api/rooms") return send(res, 201, { uuid: room });
        const { agent_id, text } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { agent_id: string; text: string };
        // The message and its event in Parley's shapes and sizes (an SSE frame of about 640 bytes),
        // so that the ceiling writes and its readers parse the bytes Parley's do.
        const id = ++seq;
        const ts = new Date().toISOString();
        const hash = crypto.createHash("sha256").update(`${id} ${text}`).digest("hex");
        const message = { id, agent_id, text, timestamp: ts, reply_to: null, mentions: [], auth: "anon", key_ref: null, pubkey_hex: null, signature_hex: null, ts_iso: null, memory_root: null, hash };
        posted.push(message);
        const event = { v: 1, room, seq, ts, type: "message.posted", actor: agent_id, payload: { text }, server: {}, prev: lastHash, hash, message };
        lastHash = hash;
        const frame = `id: ${seq}\nevent: message.posted\ndata: ${JSON.stringify(event)}\n\n`;
        // Each socket corked around its write, so the frame leaves now in one write (Node would
        // otherwise hold every response's bytes until its next tick).
        for (const stream of streams) {
          stream.socket?.cork();
          stream.write(frame);
          stream.socket?.uncork();
        }
        const page = { messages: [message], has_more: false, next_since: seq };
        for (const res of waiting) send(res, 200, page);
        waiting = [];
        send(res, 201, { message });
      });
      return;
    }
    const since = Number(/[?&]since=(\d+)/.exec(url)?.[1] ?? 0);
    if (/\/events\b/.test(url)) {
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      res.write("retry: 3000\n\n");
      streams.add(res);
      res.on("close", () => streams.delete(res));
    } else if (/[?&]wait=/.test(url)) {
      if (since < seq) return send(res, 200, { messages: posted.filter((m) => m.id > since), has_more: false, next_since: seq });
      waiting.push(res);
      res.on("close", () => (waiting = waiting.filter((w) => w !== res)));
    } else send(res, 200, { head: { size: seq }, messages: [], has_more: false, next_since: since });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(port, "127.0.0.1", () => console.log("ready"));
} else {
  console.error("usage: ceiling-server.ts node|hono|fanout <port>");
  process.exit(2);
}
