// The API's router (api/router.ts): Hono's matches, each method and path searched once, the oldest
// dropped past the bound.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Result, Router } from "hono/router";
import { TrieRouter } from "hono/router/trie-router";
import { KeptMatchRouter } from "../../api/router";

/** Hono's TrieRouter, counting its searches. */
class Counting<T> implements Router<T> {
  readonly name = "Counting";
  searches = 0;
  private readonly inner = new TrieRouter<T>();
  add(method: string, path: string, handler: T): void {
    this.inner.add(method, path, handler);
  }
  match(method: string, path: string): Result<T> {
    this.searches++;
    return this.inner.match(method, path);
  }
}

const ROUTES: [string, string, string][] = [
  ["ALL", "*", "frame"],
  ["POST", "/api/rooms/:id/tasks/claim-next", "claim-next"],
  ["POST", "/api/rooms/:id/tasks/:tid/claim", "claim"],
  ["GET", "/api/rooms/:id/messages", "messages"],
  ["GET", "/:id{[0-9a-f-]{36}}", "room page"],
];

/** The handlers a match names, in order, with the parameters each one sees. */
function named(result: Result<string>): string[] {
  const [matches, stash] = result as [[string, Record<string, string | number>][], string[] | undefined];
  return matches.map(([handler, params]) =>
    `${handler}(${Object.entries(params).map(([k, v]) => `${k}=${stash ? stash[v as number] : v}`).join(",")})`,
  );
}

function routers(max?: number) {
  const counting = new Counting<string>();
  const kept = new KeptMatchRouter<string>(max, counting);
  const plain = new TrieRouter<string>();
  for (const [method, path, handler] of ROUTES) {
    kept.add(method, path, handler);
    plain.add(method, path, handler);
  }
  return { counting, kept, plain };
}

test("the kept router answers what Hono's router answers, and searches each method and path once", () => {
  const { counting, kept, plain } = routers();
  const asked: [string, string][] = [
    ["POST", "/api/rooms/r1/tasks/claim-next"],
    ["POST", "/api/rooms/r1/tasks/t9/claim"],
    ["GET", "/api/rooms/r1/messages"],
    ["GET", "/api/rooms/r2/messages"],
    ["POST", "/api/rooms/r1/messages"],
    ["GET", "/0b6c9a4e-1d2f-4a3b-8c7d-9e0f1a2b3c4d"],
    ["GET", "/nowhere"],
  ];
  for (let round = 0; round < 3; round++) {
    for (const [method, path] of asked) assert.deepEqual(named(kept.match(method, path)), named(plain.match(method, path)), `${method} ${path}`);
  }
  assert.deepEqual(named(kept.match("POST", "/api/rooms/r1/tasks/claim-next")), ["frame()", "claim-next(id=r1)"]);
  assert.deepEqual(named(kept.match("GET", "/api/rooms/r2/messages")), ["frame()", "messages(id=r2)"]);
  assert.equal(counting.searches, asked.length, "three rounds, one search a method and path");
});

test("past its bound the kept router drops the oldest path first", () => {
  const { counting, kept } = routers(2);
  kept.match("GET", "/api/rooms/a/messages");
  kept.match("GET", "/api/rooms/b/messages");
  kept.match("GET", "/api/rooms/a/messages");
  assert.equal(counting.searches, 2);
  kept.match("GET", "/api/rooms/c/messages"); // a goes
  kept.match("GET", "/api/rooms/b/messages");
  assert.equal(counting.searches, 3, "b and c kept");
  kept.match("GET", "/api/rooms/a/messages");
  assert.equal(counting.searches, 4, "a searched again");
  assert.deepEqual(named(kept.match("GET", "/api/rooms/a/messages")), ["frame()", "messages(id=a)"]);
});
