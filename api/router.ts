import type { Result, Router } from "hono/router";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { SmartRouter } from "hono/router/smart-router";
import { TrieRouter } from "hono/router/trie-router";

/**
 * The paths whose matches are kept: more than the rooms a busy server's clients poll at once. A
 * kept match costs about 1.1 KB of heap (measured), so at most some 18 MB.
 */
const KEPT_PATHS = 16_384;

/**
 * Hono's own router (its RegExpRouter, else its TrieRouter), with the match of each method and
 * path kept. Parley's routes have a literal and a parameter at one position
 * (`tasks/claim-next` beside `tasks/:tid/…`), which the RegExpRouter refuses, so Hono falls back
 * to the TrieRouter, which walks the route tree and sorts what it found on every request: about
 * 3 KB of garbage and a few µs a request, where an idle poll otherwise costs some 35 µs. A match
 * depends on nothing but the method and the path, and Hono only reads it, so one kept is as good
 * as a new one; the oldest go first once KEPT_PATHS are kept.
 */
export class KeptMatchRouter<T> implements Router<T> {
  readonly name = "KeptMatchRouter";
  private readonly kept = new Map<string, Result<T>>();

  constructor(
    private readonly max = KEPT_PATHS,
    private readonly router: Router<T> = new SmartRouter<T>({ routers: [new RegExpRouter<T>(), new TrieRouter<T>()] }),
  ) {}

  add(method: string, path: string, handler: T): void {
    this.router.add(method, path, handler);
  }

  match(method: string, path: string): Result<T> {
    const key = `${method} ${path}`;
    let result = this.kept.get(key);
    if (result === undefined) {
      result = this.router.match(method, path);
      if (this.kept.size >= this.max) this.kept.delete(this.kept.keys().next().value!);
      this.kept.set(key, result);
    }
    return result;
  }
}
