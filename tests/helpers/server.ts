import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../../lib/config";
import type { Clock } from "../../lib/services/context";
import { startServer, type RunningServer } from "../../server";
import { testDatabase } from "./pg";

export const NO_LIMITS = {
  PARLEY_RATE_ROOMS_PER_HOUR: "0",
  PARLEY_RATE_POSTS_PER_MINUTE: "0",
  PARLEY_RATE_AGENT_POSTS_PER_MINUTE: "0",
  PARLEY_RATE_REQUESTS_PER_MINUTE: "0",
  // The loop guard refuses an agent's long runs of messages: tests that post many in a row turn it on themselves.
  PARLEY_LOOP_GUARD_STREAK: "0",
  PARLEY_LOOP_GUARD_PAIR: "0",
};

export function tempDir(prefix = "parley-test-"): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** The backend the API tests run on: PARLEY_TEST_BACKEND (scripts/test.mjs runs them on both), else SQLite. */
export const TEST_BACKEND: "sqlite" | "postgres" = process.env.PARLEY_TEST_BACKEND === "postgres" ? "postgres" : "sqlite";

/**
 * The database a test server gets: on PostgreSQL a database of its own — the same one for the same
 * PARLEY_DATA_DIR, so a restart on the same data finds it, as SQLite would. A test that sets
 * PARLEY_DATABASE_URL itself (even to "", for SQLite only) keeps its choice.
 */
async function backendEnv(env: Record<string, string>, dataDir: string): Promise<Record<string, string>> {
  if (TEST_BACKEND !== "postgres" || "PARLEY_DATABASE_URL" in env) return {};
  return { PARLEY_DATABASE_URL: await testDatabase(dataDir) };
}

/** A real server on a free port with a fresh data directory; API only unless pages is set. */
export async function startTestServer(env: Record<string, string> = {}, opts: { clock?: Clock; pages?: boolean } = {}): Promise<RunningServer> {
  const dataDir = env.PARLEY_DATA_DIR ?? tempDir();
  const config = loadConfig({ PORT: "0", HOST: "127.0.0.1", PARLEY_DATA_DIR: dataDir, ...NO_LIMITS, ...(await backendEnv(env, dataDir)), ...env });
  return startServer({ config, pages: opts.pages ?? false, clock: opts.clock, quiet: true });
}

export interface TestApi {
  server: RunningServer;
  api: ReturnType<typeof client>;
  url: string;
  /** Stops the server and removes the data directory it was given (unless the caller chose one). */
  close(): Promise<void>;
}

/**
 * startTestServer plus a client, with a close() that also deletes the temporary data directory.
 * A plain factory on purpose: the test file registers its own before/after hooks.
 */
export async function startApi(env: Record<string, string> = {}, opts: { clock?: Clock; pages?: boolean } = {}): Promise<TestApi> {
  const ownDir = env.PARLEY_DATA_DIR === undefined ? tempDir() : undefined;
  const removeDir = () => ownDir && fs.rmSync(ownDir, { recursive: true, force: true });
  let server: RunningServer;
  try {
    server = await startTestServer(ownDir ? { ...env, PARLEY_DATA_DIR: ownDir } : env, opts);
  } catch (err) {
    removeDir();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    server,
    api: client(server.url),
    url: server.url,
    close: () =>
      (closing ??= (async () => {
        try {
          await server.close();
        } finally {
          removeDir();
        }
      })()),
  };
}

/** Starts a server for fn alone and closes it (data directory included) whatever fn does. */
export async function withApi<T>(env: Record<string, string>, fn: (f: TestApi) => Promise<T>, opts: { clock?: Clock; pages?: boolean } = {}): Promise<T> {
  const f = await startApi(env, opts);
  try {
    return await fn(f);
  } finally {
    await f.close();
  }
}

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  constructor(private t = Date.parse("2026-11-30T10:00:00.000Z")) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

export interface JsonResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/** Small JSON client bound to a server. */
export function client(base: string) {
  async function call<T = any>(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<JsonResponse<T>> {
    const res = await fetch(base + url, {
      method,
      headers: { "content-type": "application/json", ...headers },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  }
  return {
    get: <T = any>(url: string, headers?: Record<string, string>) => call<T>("GET", url, undefined, headers),
    post: <T = any>(url: string, body?: unknown, headers?: Record<string, string>) => call<T>("POST", url, body ?? {}, headers),
    del: <T = any>(url: string, headers?: Record<string, string>) => call<T>("DELETE", url, undefined, headers),
    async room(body: Record<string, unknown> = {}) {
      const r = await call("POST", "/api/rooms", body);
      if (r.status !== 201) throw new Error(`room creation failed: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body as { uuid: string; owner_token: string; url: string };
    },
    say: (room: string, agent_id: string, text: string, extra: Record<string, unknown> = {}) =>
      call("POST", `/api/rooms/${room}/messages`, { agent_id, text, ...extra }),
  };
}
