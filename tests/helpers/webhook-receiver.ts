// A webhook receiver on loopback: records every request (headers and the exact body bytes) and
// answers as each path is told to, so a test sees what a real receiver would.
import crypto from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The body exactly as it arrived (what the signature covers). */
  raw: string;
  body: any;
}

/** How a path answers: a status, or a function of the request (which may wait). */
export type Answer = number | ((req: Received, n: number) => number | Promise<number> | { status: number; headers?: Record<string, string> });

export interface Receiver {
  url: string;
  port: number;
  /** Everything received, oldest first. */
  received: Received[];
  on(path: string, answer: Answer): void;
  /** What arrived at `path`. */
  at(path: string): Received[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const answers = new Map<string, Answer>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        let body: unknown = raw;
        try {
          body = JSON.parse(raw);
        } catch {
          /* keep the text */
        }
        const path = req.url ?? "/";
        const r: Received = { path, headers: req.headers, raw, body };
        received.push(r);
        const answer = answers.get(path) ?? 200;
        const n = received.filter((x) => x.path === path).length;
        const out = typeof answer === "number" ? answer : await answer(r, n);
        const { status, headers } = typeof out === "number" ? { status: out, headers: {} } : out;
        res.writeHead(status, headers);
        res.end("ok");
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    on: (path, answer) => void answers.set(path, answer),
    at: (path) => received.filter((r) => r.path === path),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** What X-Parley-Signature must be for `raw` under `secret`, computed as a receiver would. */
export const expectedSignature = (secret: string, raw: string) => `sha256=${crypto.createHmac("sha256", secret).update(raw).digest("hex")}`;
