// The API's router (api/router.ts): Hono's matches, each method and path shape searched once (a
// path's UUID segments taken out), the oldest dropped past the bound.
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
  ["GET", "/files/:rest{.+}", "files"],
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

const ROOM_A = "0b6c9a4e-1d2f-4a3b-8c7d-9e0f1a2b3c4d";
const ROOM_B = "5f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0";
const TASK = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d";

test("paths that differ only in their UUIDs share one search, and each gets its own parameters", () => {
  const { counting, kept, plain } = routers();
  const asked: [string, string][] = [
    ["GET", `/api/rooms/${ROOM_A}/messages`],
    ["GET", `/api/rooms/${ROOM_B}/messages`],
    ["POST", `/api/rooms/${ROOM_A}/tasks/${TASK}/claim`],
    ["POST", `/api/rooms/${ROOM_B}/tasks/${ROOM_A}/claim`],
    ["POST", `/api/rooms/${ROOM_B}/tasks/claim-next`],
    ["GET", `/${ROOM_A}`],
    ["GET", `/${ROOM_B}`],
  ];
  for (const [method, path] of asked) assert.deepEqual(named(kept.match(method, path)), named(plain.match(method, path)), `${method} ${path}`);
  assert.deepEqual(named(kept.match("POST", `/api/rooms/${ROOM_B}/tasks/${ROOM_A}/claim`)), ["frame()", `claim(id=${ROOM_B},tid=${ROOM_A})`]);
  assert.deepEqual(named(kept.match("GET", `/${ROOM_B}`)), ["frame()", `room page(id=${ROOM_B})`]);
  assert.equal(counting.searches, 4, "one search each for messages, a task's claim, claim-next and the room page");
  // Not a room id as the API hands it out (upper case, one character short or long): searched as it is.
  for (const path of [`/api/rooms/${ROOM_A.toUpperCase()}/messages`, `/api/rooms/${ROOM_A.slice(1)}/messages`, `/api/rooms/${ROOM_A}0/messages`]) {
    assert.deepEqual(named(kept.match("GET", path)), named(plain.match("GET", path)), path);
  }
  assert.equal(counting.searches, 7);
});

test("a parameter that holds a UUID within a longer value is matched per path", () => {
  const { counting, kept } = routers();
  assert.deepEqual(named(kept.match("GET", `/files/${ROOM_A}/a.txt`)), ["frame()", `files(rest=${ROOM_A}/a.txt)`]);
  assert.deepEqual(named(kept.match("GET", `/files/${ROOM_B}/a.txt`)), ["frame()", `files(rest=${ROOM_B}/a.txt)`]);
  assert.deepEqual(named(kept.match("GET", `/files/${ROOM_A}/a.txt`)), ["frame()", `files(rest=${ROOM_A}/a.txt)`]);
  // The shape's search, then one for each path.
  assert.equal(counting.searches, 3);
});
