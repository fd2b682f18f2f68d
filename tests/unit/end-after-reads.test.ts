// endAfterReads (api/http.ts): a quick answer's end waits for the end of the loop's poll phase and
// leaves with the turn's other answers; whole, in order, and one failing end keeps no other back.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { endAfterReads } from "../../api/http";

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;
let handle: Handler = () => {};
let server: http.Server;
let base: string;

before(async () => {
  server = http.createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe("endAfterReads", () => {
  test("the answer is ended after the turn, not in end(); the client gets it whole", async () => {
    const seen: boolean[] = [];
    handle = (_req, res) => {
      endAfterReads(res);
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("hello, later");
      seen.push(res.writableEnded);
      setImmediate(() => seen.push(res.writableEnded));
    };
    const res = await fetch(base);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "hello, later");
    assert.deepEqual(seen, [false, true]);
  });

  test("answers ended in one turn leave in the order they were ended, with their end callbacks", async () => {
    const order: string[] = [];
    const waiting: http.ServerResponse[] = [];
    handle = (req, res) => {
      endAfterReads(res);
      waiting.push(res);
      if (waiting.length < 3) return;
      // All three ended in one turn, the last first.
      for (const r of waiting.reverse()) {
        const name = new URL(r.req.url!, base).searchParams.get("n")!;
        r.end(name, () => order.push(name));
      }
    };
    const texts = await Promise.all(["a", "b", "c"].map(async (n) => (await fetch(`${base}/?n=${n}`)).text()));
    assert.deepEqual(texts, ["a", "b", "c"]);
    assert.equal(order.length, 3);
    assert.deepEqual(order, waiting.map((r) => new URL(r.req.url!, base).searchParams.get("n")));
  });

  test("an end that throws keeps no other answer of the turn back", async () => {
    const errors: unknown[] = [];
    const logged = console.error;
    console.error = (err: unknown) => errors.push(err);
    let bad: http.ServerResponse | undefined;
    handle = (req, res) => {
      endAfterReads(res);
      if (req.url === "/bad") {
        bad = res;
        return;
      }
      // A chunk end() refuses, ended in the same turn as the good answer, before it.
      (bad!.end as (chunk: unknown) => void)(42);
      res.end("still answered");
    };
    try {
      const badAnswer = fetch(`${base}/bad`).catch((err: unknown) => err);
      while (!bad) await new Promise((resolve) => setTimeout(resolve, 5));
      const good = await fetch(`${base}/good`);
      assert.equal(await good.text(), "still answered");
      assert.equal(errors.length, 1);
      assert.equal((errors[0] as NodeJS.ErrnoException).code, "ERR_INVALID_ARG_TYPE");
      bad.destroy();
      assert.ok((await badAnswer) instanceof Error);
    } finally {
      console.error = logged;
    }
  });
});
