// Builds what `npm start` runs when it is missing or older than its sources: the Next.js pages
// (next build) and the compiled server (dist/server.mjs, one esbuild bundle of server.ts and the
// code under it; the packages stay in node_modules). Production runs that file, without a
// TypeScript loader thread.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { build } from "esbuild";

const root = path.resolve(import.meta.dirname, "..");

function newestMtime(p) {
  const full = path.join(root, p);
  if (!fs.existsSync(full)) return 0;
  const stat = fs.statSync(full);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...fs.readdirSync(full).map((name) => newestMtime(path.join(p, name))));
}

const builtAt = (file) => (fs.existsSync(path.join(root, file)) ? fs.statSync(path.join(root, file)).mtimeMs : 0);
const stale = (file, sources) => builtAt(file) === 0 || Math.max(...sources.map(newestMtime)) > builtAt(file);

const pages = ".next/BUILD_ID";
if (stale(pages, ["app", "components", "lib", "next.config.mjs", "package-lock.json"])) {
  console.log(builtAt(pages) === 0 ? "No build yet: building the pages (next build)…" : "Page sources changed: rebuilding (next build)…");
  execFileSync(process.execPath, [path.join(root, "node_modules", "next", "dist", "bin", "next"), "build"], { cwd: root, stdio: "inherit" });
}

export const SERVER_BUNDLE = "dist/server.mjs";
if (stale(SERVER_BUNDLE, ["server.ts", "api", "lib", "mcp", "a2a", "package-lock.json", "scripts/ensure-build.mjs"])) {
  console.log(`Compiling the server (${SERVER_BUNDLE})…`);
  await build({
    absWorkingDir: root,
    entryPoints: ["server.ts"],
    outfile: SERVER_BUNDLE,
    bundle: true,
    packages: "external",
    platform: "node",
    format: "esm",
    target: "node20",
    sourcemap: "linked",
    logLevel: "warning",
  });
}
