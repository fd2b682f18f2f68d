/**
 * The ceilings of this machine, each in a process of its own as the server is:
 *   node --import tsx tests/bench/ceiling-server.ts node <port>   an empty node:http server
 *   node --import tsx tests/bench/ceiling-server.ts hono <port>   a trivial Hono route on @hono/node-server
 * Both answer GET /api/rooms/:id/messages with the empty page an idle poll gets, so the ceilings
 * and the idle poll send and parse the same shape. Prints "ready" when listening.
 */
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
} else {
  console.error("usage: ceiling-server.ts node|hono <port>");
  process.exit(2);
}
