import type { Result, Router } from "hono/router";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { SmartRouter } from "hono/router/smart-router";
import { TrieRouter } from "hono/router/trie-router";

/**
 * The matches kept, of path shapes and of paths, each: more than the route shapes the API has
 * (rooms' paths share one match each), and than the other paths a busy server's clients ask for at
 * once. A kept match costs about 1.1 KB of heap (measured), so at most some 9 MB.
 */
const KEPT_PATHS = 4_096;

/** Whether `path` holds a UUID in the lower case the API hands out (a room id) at `at`, as a whole segment. */
function uuidAt(path: string, at: number): boolean {
  if (at + 36 > path.length || (at + 36 < path.length && path.charCodeAt(at + 36) !== 47)) return false;
  for (let i = 0; i < 36; i++) {
    const c = path.charCodeAt(at + i);
    if (i === 8 || i === 13 || i === 18 || i === 23 ? c !== 45 : !((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}
/** What the k-th UUID of a path is searched as: UUIDs too, so that a route's pattern for one takes them. */
const PLACEHOLDERS = Array.from({ length: 4 }, (_, k) => `00000000-0000-4000-8000-00000000000${k}`);
/** What every placeholder begins with: a value holding it, but not equal to one, holds one inside. */
const PLACEHOLDER_PREFIX = PLACEHOLDERS[0]!.slice(0, -1);

/**
 * A match with its UUIDs taken out: Hono's parameter form that reads values from a stash (as its
 * RegExpRouter answers), the stash with the placeholders in, and which stash entries take which
 * UUID of the path.
 */
interface Shape<T> {
  handlers: [T, Record<string, number>][];
  stash: string[];
  slots: [index: number, k: number][];
}

/**
 * Hono's own router (its RegExpRouter, else its TrieRouter), with the match of each method and
 * path shape kept. Parley's routes have a literal and a parameter at one position
 * (`tasks/claim-next` beside `tasks/:tid/…`), which the RegExpRouter refuses, so Hono falls back
 * to the TrieRouter, which walks the route tree and sorts what it found on every request: about
 * 3 KB of garbage and a few µs a request, where an idle poll otherwise costs some 35 µs. A match
 * depends on nothing but the method and the path, and Hono only reads it, so one kept is as good
 * as a new one; the oldest go first once KEPT_PATHS are kept.
 *
 * A path's UUID segments (room ids) are searched as placeholders, so every room's
 * `/api/rooms/<id>/messages` shares one kept match and only the stash of parameter values is new
 * per request. Keeping a match per room's path instead made an idle poll spread over 10,000 rooms
 * cost the server 27 % more CPU than one over 10 (a kept match per room, 11 MB of them, each read
 * from memory rather than from the processor's cache). This takes a route's pattern to accept
 * either every lower-case UUID or none; a match whose parameter holds a placeholder within a
 * longer value (a wildcard) is kept per path, as before.
 */
export class KeptMatchRouter<T> implements Router<T> {
  readonly name = "KeptMatchRouter";
  /** By method and path shape; null where the path's own match is kept instead. */
  private readonly shapes = new Map<string, Shape<T> | null>();
  /** By method and path: the paths with no UUID, or whose shape is null. */
  private readonly paths = new Map<string, Result<T>>();

  constructor(
    private readonly max = KEPT_PATHS,
    private readonly router: Router<T> = new SmartRouter<T>({ routers: [new RegExpRouter<T>(), new TrieRouter<T>()] }),
  ) {}

  add(method: string, path: string, handler: T): void {
    this.router.add(method, path, handler);
  }

  match(method: string, path: string): Result<T> {
    // The path with its UUID segments (the first PLACEHOLDERS.length) in placeholders.
    const ids: string[] = [];
    let shapePath = "";
    let from = 0;
    for (let at = path.indexOf("/") + 1; at > 0 && ids.length < PLACEHOLDERS.length; at = path.indexOf("/", at) + 1) {
      if (!uuidAt(path, at)) continue;
      shapePath += path.slice(from, at) + PLACEHOLDERS[ids.length];
      ids.push(path.slice(at, (from = at + 36)));
    }
    if (ids.length > 0) {
      shapePath += path.slice(from);
      const shape = this.keep(this.shapes, `${method} ${shapePath}`, () => shapeOf(this.router.match(method, shapePath)));
      if (shape) {
        const stash = shape.stash.slice();
        for (const [index, k] of shape.slots) stash[index] = ids[k]!;
        return [shape.handlers, stash] as Result<T>;
      }
    }
    return this.keep(this.paths, `${method} ${path}`, () => this.router.match(method, path));
  }

  private keep<V>(kept: Map<string, V>, key: string, make: () => V): V {
    let value = kept.get(key);
    if (value === undefined) {
      value = make();
      if (kept.size >= this.max) kept.delete(kept.keys().next().value!);
      kept.set(key, value);
    }
    return value;
  }
}

/** A match of a path with placeholders, in stash form; null when a placeholder sits inside a longer value. */
function shapeOf<T>(result: Result<T>): Shape<T> | null {
  const [matches, oldStash] = result as [[T, Record<string, string | number>][], string[] | undefined];
  const stash: string[] = [];
  const slots: [number, number][] = [];
  const handlers: [T, Record<string, number>][] = [];
  for (const [handler, params] of matches) {
    const indexes: Record<string, number> = {};
    for (const name of Object.keys(params)) {
      const value = oldStash ? oldStash[params[name] as number]! : (params[name] as string);
      const k = PLACEHOLDERS.indexOf(value);
      if (k < 0 && value.includes(PLACEHOLDER_PREFIX)) return null;
      indexes[name] = stash.push(value) - 1;
      if (k >= 0) slots.push([indexes[name], k]);
    }
    handlers.push([handler, indexes]);
  }
  return { handlers, stash, slots };
}
