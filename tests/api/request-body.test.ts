// Request bodies are read straight off the socket (api/app.ts, readBody in api/http.ts): the
// 64 KiB limit with and without Content-Length, UTF-8 as Request.text() reads it, and a client that
// goes away mid-body costs nothing but its own request.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { startApi, type TestApi } from "../helpers/server";

let f: TestApi;
before(async () => (f = await startApi()));
after(() => f.close());

const LIMIT = 64 * 1024;

/** POSTs `chunks` one by one with chunked transfer encoding (no Content-Length). */
function postChunked(path: string, chunks: string[]): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(f.url + path, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on("error", reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

/** The server's count of stored rooms (GET /metrics, allowed from loopback). */
const roomCount = async () => Number(/^parley_rooms (\d+)$/m.exec(await (await fetch(`${f.url}/metrics`)).text())![1]);

describe("request bodies", () => {
  test("a chunked body of exactly 64 KiB is read; one byte more is 413 payload_too_large and writes nothing", async () => {
    const before = await roomCount();
    const body = (n: number) => JSON.stringify({ description: "chunked", pad: "p".repeat(n) });
    const exact = body(0).length;
    const fits = body(LIMIT - exact);
    assert.equal(Buffer.byteLength(fits), LIMIT);
    const ok = await postChunked("/api/rooms", [fits.slice(0, 1000), fits.slice(1000, 40_000), fits.slice(40_000)]);
    assert.equal(ok.status, 201);
    assert.equal(ok.body.description, "chunked");
    const over = body(LIMIT - exact + 1);
    const refused = await postChunked("/api/rooms", [over.slice(0, 30_000), over.slice(30_000)]);
    assert.equal(refused.status, 413);
    assert.equal(refused.body.code, "payload_too_large");
    assert.equal(await roomCount(), before + 1);
  });

  test("a Content-Length over the limit is refused before the body is read", async () => {
    const res = await fetch(`${f.url}/api/rooms`, { method: "POST", headers: { "content-type": "application/json" }, body: "x".repeat(LIMIT + 1) });
    assert.equal(res.status, 413);
    assert.equal((await res.json()).code, "payload_too_large");
  });

  test("UTF-8 bodies: a leading BOM is dropped and multi-byte text split across chunks arrives whole", async () => {
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ description: "Überprüfung — 合意 ✓" }))]);
    const res = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = http.request(f.url + "/api/rooms", { method: "POST", headers: { "content-type": "application/json" } }, (r) => {
        let text = "";
        r.setEncoding("utf8");
        r.on("data", (d: string) => (text += d));
        r.on("end", () => resolve({ status: r.statusCode!, body: JSON.parse(text) }));
      });
      req.on("error", reject);
      // Split inside a multi-byte character.
      const cut = bytes.indexOf(Buffer.from("合")) + 1;
      req.write(bytes.subarray(0, cut));
      req.end(bytes.subarray(cut));
    });
    assert.equal(res.status, 201);
    assert.equal(res.body.description, "Überprüfung — 合意 ✓");
  });

  test("a client that goes away mid-body writes nothing and the server answers the next request", async () => {
    const before = await roomCount();
    await new Promise<void>((resolve) => {
      const req = http.request(f.url + "/api/rooms", { method: "POST", headers: { "content-type": "application/json", "content-length": "5000" } });
      req.on("error", () => resolve());
      req.write('{"description":"never finished"');
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 50);
    });
    const res = await f.api.post("/api/rooms", { description: "after" });
    assert.equal(res.status, 201);
    assert.equal(await roomCount(), before + 1);
  });
});
