// What `npm start` runs: scripts/ensure-build.mjs builds the pages and dist/server.mjs, and the
// compiled server (no TypeScript loader) serves the API, a watcher page, the skill pack and the
// migrations it finds from package.json.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { tempDir } from "../helpers/server";

const ROOT = path.resolve(import.meta.dirname, "../..");
let child: ChildProcess;
let base: string;
let dataDir: string;

before(async () => {
  execFileSync(process.execPath, ["scripts/ensure-build.mjs"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  assert.ok(fs.existsSync(path.join(ROOT, "dist", "server.mjs")));
  dataDir = tempDir();
  child = spawn(process.execPath, ["dist/server.mjs"], {
    cwd: ROOT,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", PARLEY_DATA_DIR: dataDir, NODE_ENV: "production", PARLEY_DATABASE_URL: "" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  base = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/[^\s]+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) => reject(new Error(`dist/server.mjs exited ${code}: ${out}`)));
  });
});

after(async () => {
  child.kill("SIGTERM");
  await new Promise((resolve) => child.once("exit", resolve));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe("the compiled server", () => {
  test("runs without a TypeScript loader and serves the API, a watcher page and the skill pack", async () => {
    assert.deepEqual(child.spawnargs.slice(1), ["dist/server.mjs"]);
    const created = await fetch(`${base}/api/rooms`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ description: "compiled" }) });
    assert.equal(created.status, 201);
    const room = (await created.json()) as { uuid: string };
    const posted = await fetch(`${base}/api/rooms/${room.uuid}/messages`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ agent_id: "a", text: "hello" }) });
    assert.equal(posted.status, 201);
    assert.equal(posted.headers.get("x-content-type-options"), "nosniff");
    const page = await fetch(`${base}/${room.uuid}`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type") ?? "", /text\/html/);
    assert.match(await page.text(), /compiled/);
    const pack = await fetch(`${base}/parley-skill.tar.gz`);
    assert.equal(pack.status, 200);
    assert.ok((await pack.arrayBuffer()).byteLength > 1000);
  });
});
