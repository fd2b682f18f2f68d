// Several Parley instances on one PostgreSQL database, each in a process of its own (so one can be
// killed with SIGKILL), sharing one server key: the multi-instance topology of docs/DEPLOY.md.
import { spawn, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { client, NO_LIMITS } from "./server";
import { freePort } from "./net";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** No rate limits and no stream cap: the tests load one instance from one address. */
const CLUSTER_LIMITS = { ...NO_LIMITS, PARLEY_MAX_STREAMS_PER_CLIENT: "0" };

export interface Instance {
  name: string;
  url: string;
  port: number;
  api: ReturnType<typeof client>;
  child: ChildProcess;
  /** What the process wrote to stderr (errors, stacks). */
  stderr: () => string;
  /** SIGKILL: no shutdown at all. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

const exited = (child: ChildProcess) => new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));

/** One instance: server.ts without the pages, in a child process, answering /health. */
export async function startInstance(name: string, env: Record<string, string>): Promise<Instance> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `parley-${name}-`));
  const entry = path.join(dir, "instance.mjs");
  fs.writeFileSync(entry, `const { startServer } = await import(${JSON.stringify(pathToFileURL(path.join(ROOT, "server.ts")).href)});\nawait startServer({ pages: false, quiet: true });\n`);
  const child = spawn(process.execPath, ["--import", "tsx", entry], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", PARLEY_DATA_DIR: dir, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  const instance: Instance = {
    name,
    url,
    port,
    api: client(url),
    child,
    stderr: () => stderr,
    async kill() {
      child.kill("SIGKILL");
      await exited(child);
    },
    async stop() {
      child.kill("SIGTERM");
      const force = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited(child);
      clearTimeout(force);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`instance ${name} exited (${child.exitCode}) before answering /health:\n${stderr}`);
    try {
      if ((await fetch(`${url}/health`)).ok) return instance;
    } catch {
      /* not up yet */
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await instance.kill();
  throw new Error(`instance ${name} did not answer /health in 60 s:\n${stderr}`);
}

/** `n` instances started at once on `databaseUrl`, with one server key. */
export async function startCluster(databaseUrl: string, n = 3, env: Record<string, string> = {}): Promise<Instance[]> {
  const shared = { ...CLUSTER_LIMITS, PARLEY_DATABASE_URL: databaseUrl, PARLEY_KEY: crypto.randomBytes(32).toString("hex"), ...env };
  return Promise.all(Array.from({ length: n }, (_, i) => startInstance(String.fromCharCode(65 + i), shared)));
}

/** Stops every instance; one that died on its own (not killed by a test) shows what it printed. */
export async function stopAll(instances: Instance[]): Promise<void> {
  for (const i of instances) {
    if (i.child.exitCode !== null && i.child.signalCode === null) console.error(`instance ${i.name} exited with ${i.child.exitCode}:\n${i.stderr()}`);
  }
  await Promise.all(instances.map((i) => i.stop()));
}

/** Open SSE streams and waiting long-polls of an instance (its /metrics, served to loopback). */
export async function listeners(instance: Instance): Promise<number> {
  const text = await (await fetch(`${instance.url}/metrics`)).text();
  return Number(/^parley_live_listeners (\d+)$/m.exec(text)?.[1] ?? NaN);
}
