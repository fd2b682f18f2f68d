/** `parley --help`, `-h`, `help [command]` and `<command> --help`: usage on stdout, exit 0 (spawning the real bin). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";

const BIN = path.resolve(import.meta.dirname, "../../bin/parley.mjs");

function parley(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [BIN, ...args], (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") return reject(err);
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

test("parley --help, -h and help print the usage of every command on stdout and exit 0", async () => {
  for (const args of [["--help"], ["-h"], ["help"]]) {
    const r = await parley(args);
    assert.equal(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr, "", args.join(" "));
    assert.match(r.stdout, /^usage:$/m, args.join(" "));
    assert.match(r.stdout, /^ {2}parley verify <bundle\.json \| room URL>/m);
    assert.match(r.stdout, /^ {2}parley tamper-demo$/m);
    assert.match(r.stdout, /exit codes: 0 CLEAN, 1 REFUTED, 2 INCONCLUSIVE, 3 usage/);
  }
});

test("parley <command> --help and help <command> describe that command and exit 0, without running it", async () => {
  for (const args of [["verify", "--help"], ["verify", "-h"], ["help", "verify"], ["verify", "/nonexistent.json", "--help"]]) {
    const r = await parley(args);
    assert.equal(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stdout, /^usage: parley verify /, args.join(" "));
    for (const option of ["--checkpoint", "--key", "--json"]) assert.ok(r.stdout.includes(option), `${args.join(" ")} names ${option}`);
    assert.doesNotMatch(r.stdout, /CLEAN:|REFUTED:|no such file/, "nothing was verified");
  }
  for (const args of [["tamper-demo", "--help"], ["tamper-demo", "-h"], ["help", "tamper-demo"]]) {
    const r = await parley(args);
    assert.equal(r.code, 0, args.join(" "));
    assert.match(r.stdout, /^usage: parley tamper-demo$/m, args.join(" "));
    assert.doesNotMatch(r.stdout, /honest room:/, "the demo did not run");
  }
});

test("an unknown command, no command or help for an unknown command: usage on stderr, exit 3", async () => {
  for (const [args, message] of [
    [["frobnicate"], /unknown command frobnicate/],
    [[], /no command/],
    [["help", "frobnicate"], /unknown command/],
    [["--bogus"], /unknown command --bogus/],
  ] as const) {
    const r = await parley([...args]);
    assert.equal(r.code, 3, args.join(" "));
    assert.equal(r.stdout, "", args.join(" "));
    assert.match(r.stderr, message);
    assert.match(r.stderr, /usage:/);
  }
});
