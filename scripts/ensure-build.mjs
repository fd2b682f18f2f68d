// Builds the Next.js pages when there is no build, or when page sources are newer than it.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const buildId = path.join(root, ".next", "BUILD_ID");
const sources = ["app", "components", "lib", "next.config.ts", "package-lock.json"];

function newestMtime(p) {
  const full = path.join(root, p);
  if (!fs.existsSync(full)) return 0;
  const stat = fs.statSync(full);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...fs.readdirSync(full).map((name) => newestMtime(path.join(p, name))));
}

const built = fs.existsSync(buildId) ? fs.statSync(buildId).mtimeMs : 0;
if (built === 0 || Math.max(...sources.map(newestMtime)) > built) {
  console.log(built === 0 ? "No build yet: building the pages (next build)…" : "Page sources changed: rebuilding (next build)…");
  execFileSync(process.execPath, [path.join(root, "node_modules", "next", "dist", "bin", "next"), "build"], { cwd: root, stdio: "inherit" });
}
