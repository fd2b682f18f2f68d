// cancelOf (api/http.ts): what a long-poll waits with to hear its caller went away, on a real
// node:http server. It reports "abort" when the connection closes before the answer is sent, and
// only then: never for an answer sent in full, never to a listener removed, and `aborted` says the
// same to a wait that starts after the close.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Context } from "hono";
import { cancelOf } from "../../api/http";
import type { Cancel } from "../../lib/realtime/notifier";

type Handler = (res: http.ServerResponse, cancel: Cancel) => void;
let handle: Handler = () => {};
let server: http.Server;
let base: string;

before(async () => {
  // The Hono context as @hono/node-server gives it: the Node response is its env's `outgoing`.
  server = http.createServer((_req, res) => handle(res, cancelOf({ env: { outgoing: res } } as unknown as Context)));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Handles the next request with `handler`, resolving with what it resolves once the response closes. */
function nextRequest<T>(handler: (res: http.ServerResponse, cancel: Cancel, done: (value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve) => {
    handle = (res, cancel) => {
      let value: T;
      res.once("close", () => setImmediate(() => resolve(value)));
      handler(res, cancel, (v) => (value = v));
    };
  });
}

describe("cancelOf", () => {
  test("a client that goes away before the answer: every listener hears it once, and aborted turns true", async () => {
    const gone = new AbortController();
    const heard = nextRequest<{ before: boolean; calls: string[]; after: boolean }>((_res, cancel, done) => {
      const calls: string[] = [];
      const state = { before: cancel.aborted, calls, after: false };
      cancel.addEventListener("abort", () => {
        calls.push("first");
        state.after = cancel.aborted;
      });
      cancel.addEventListener("abort", () => calls.push("second"));
      done(state);
      setTimeout(() => gone.abort(), 20);
    });
    await fetch(base, { signal: gone.signal }).catch(() => undefined);
    assert.deepEqual(await heard, { before: false, calls: ["first", "second"], after: true });
  });

  test("an answer sent in full calls no listener, and aborted stays false after its close", async () => {
    const heard = nextRequest<{ calls: number; res: http.ServerResponse; cancel: Cancel }>((res, cancel, done) => {
      const state = { calls: 0, res, cancel };
      cancel.addEventListener("abort", () => state.calls++);
      done(state);
      res.end("answered");
    });
    const answer = await fetch(base, { headers: { Connection: "close" } });
    assert.equal(await answer.text(), "answered");
    const { calls, res, cancel } = await heard;
    assert.equal(res.closed, true, "the response closed");
    assert.equal(calls, 0);
    assert.equal(cancel.aborted, false);
  });

  test("a listener removed is not called; a wait that starts after the close sees aborted", async () => {
    const gone = new AbortController();
    const heard = nextRequest<{ removed: number; kept: number; cancel: Cancel }>((_res, cancel, done) => {
      const state = { removed: 0, kept: 0, cancel };
      const removed = () => state.removed++;
      cancel.addEventListener("abort", removed);
      cancel.addEventListener("abort", () => state.kept++);
      cancel.removeEventListener("abort", removed);
      done(state);
      setTimeout(() => gone.abort(), 20);
    });
    await fetch(base, { signal: gone.signal }).catch(() => undefined);
    const { removed, kept, cancel } = await heard;
    assert.deepEqual({ removed, kept }, { removed: 0, kept: 1 });
    assert.equal(cancel.aborted, true);
  });
});
