import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { ATTACKS, buildDemoRoom, type DemoRoom } from "../../cli/tamper";
import { exportRoom } from "../../lib/services/verify";
import { startApi, tempDir } from "../helpers/server";

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "../..");

/** Runs `parley verify` on a file, returning its exit code and output. */
async function cliVerify(bundleFile: string, ...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout } = await run(process.execPath, [path.join(ROOT, "bin/parley.mjs"), "verify", bundleFile, ...args]);
    return { code: 0, out: stdout };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, out: e.stdout };
  }
}

async function saveBundle(demo: DemoRoom): Promise<string> {
  const file = path.join(tempDir(), "bundle.json");
  fs.writeFileSync(file, JSON.stringify(await exportRoom(demo.svc, demo.room)));
  return file;
}

interface Report {
  verdict: string;
  explanation: string;
  failures: { seq: number | null; type: string }[];
  details: { agent_signatures: number; caller_checkpoint?: { size: number; consistent: boolean } };
}

/**
 * POST /api/rooms/{id}/verify on a real server started on the demo's data directory (its
 * database and server key, tampered or not), once per request body.
 */
async function serverVerify(demo: DemoRoom, ...bodies: Record<string, unknown>[]): Promise<Report[]> {
  // The demo edits a SQLite file: its server runs on that file whatever backend the suite uses.
  const f = await startApi({ PARLEY_DATA_DIR: path.dirname(demo.dbFile), PARLEY_DATABASE_URL: "" });
  try {
    const reports: Report[] = [];
    for (const body of bodies) {
      const r = await f.api.post<Report>(`/api/rooms/${demo.room}/verify`, body);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      reports.push(r.body);
    }
    return reports;
  } finally {
    await f.close();
  }
}

/** Closes the demo's store and removes its data directory. */
async function dispose(demo: DemoRoom): Promise<void> {
  await demo.close();
  fs.rmSync(path.dirname(demo.dbFile), { recursive: true, force: true });
}

function saveCheckpoint(demo: DemoRoom): string {
  const file = path.join(tempDir(), "kept.txt");
  fs.writeFileSync(file, demo.keptCheckpoint);
  return file;
}

test("an honest room is CLEAN online and offline, with and without the kept checkpoint", async () => {
  const demo = await buildDemoRoom();
  try {
    const [online] = await serverVerify(demo, { checkpoint: demo.keptCheckpoint });
    assert.equal(online!.verdict, "CLEAN", online!.explanation);
    assert.equal(online!.details.agent_signatures, 2);
    assert.deepEqual(online!.details.caller_checkpoint, { size: 5, consistent: true });
    const file = await saveBundle(demo);
    assert.equal((await cliVerify(file)).code, 0);
    const withCheckpoint = await cliVerify(file, "--checkpoint", saveCheckpoint(demo), "--key", demo.svc.key.pubkeyHex);
    assert.equal(withCheckpoint.code, 0, withCheckpoint.out);
    assert.match(withCheckpoint.out, /^CLEAN/);
  } finally {
    await dispose(demo);
  }
});

describe("every attack of SPEC 4.6 is REFUTED by the server and by the offline CLI", () => {
  test("the demo runs exactly the attacks (a) to (e)", () => {
    assert.deepEqual(ATTACKS.map((a) => a.id), ["a", "b", "c", "d", "e"]);
  });

  for (const attack of ATTACKS) {
    test(`(${attack.id}) ${attack.title}`, async () => {
      const demo = await buildDemoRoom();
      try {
        attack.run(demo);
        const opts = attack.withKeptCheckpoint ? { checkpoint: demo.keptCheckpoint } : {};
        const [online] = await serverVerify(demo, opts);
        assert.equal(online!.verdict, "REFUTED", online!.explanation);
        assert.ok(online!.failures.length > 0 && online!.failures.every((f) => typeof f.type === "string"));
        const args = attack.withKeptCheckpoint ? ["--checkpoint", saveCheckpoint(demo)] : [];
        const offline = await cliVerify(await saveBundle(demo), ...args);
        assert.equal(offline.code, 1, offline.out);
        assert.match(offline.out, /^REFUTED/);
      } finally {
        await dispose(demo);
      }
    });
  }

  test("(b) is caught by the agent's signature alone, and by the kept checkpoint alone", async () => {
    const demo = await buildDemoRoom();
    try {
      ATTACKS.find((a) => a.id === "b")!.run(demo);
      const [bySignature, byCheckpoint] = await serverVerify(demo, {}, { checkpoint: demo.keptCheckpoint });
      assert.deepEqual([...new Set(bySignature!.failures.map((f) => f.type))], ["agent_signature"]);
      assert.equal(bySignature!.failures[0]!.seq, demo.signedSeq);
      assert.ok(byCheckpoint!.failures.some((f) => f.type === "consistency"));
    } finally {
      await dispose(demo);
    }
  });

  test("(d) without a kept checkpoint the shorter log is consistent in itself: only a receipt catches it", async () => {
    const demo = await buildDemoRoom();
    try {
      ATTACKS.find((a) => a.id === "d")!.run(demo);
      const [blind, kept] = await serverVerify(demo, {}, { checkpoint: demo.keptCheckpoint });
      assert.equal(blind!.verdict, "CLEAN");
      assert.equal(kept!.verdict, "REFUTED");
      assert.equal(kept!.failures[0]!.type, "truncated");
    } finally {
      await dispose(demo);
    }
  });
});

test("parley tamper-demo reports every attack detected and exits 0", async () => {
  const { stdout } = await run(process.execPath, [path.join(ROOT, "bin/parley.mjs"), "tamper-demo"]);
  for (const id of ["a", "b", "c", "d", "e"]) assert.match(stdout, new RegExp(`\\(${id}\\)[^\\n]*\\n\\s+→ REFUTED`));
  assert.match(stdout, /Every attack was detected/);
});

test("parley verify: usage errors exit 3", async () => {
  assert.equal((await cliVerify("/nonexistent.json")).code, 3);
  const notBundle = path.join(tempDir(), "x.json");
  fs.writeFileSync(notBundle, "{}");
  assert.equal((await cliVerify(notBundle)).code, 3);
});
