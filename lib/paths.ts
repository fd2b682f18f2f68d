// Where the project's files are: from the sources (lib/) and from the compiled server (dist/) alike.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

function findRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, "package.json"))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
  return dir;
}

/** The directory of package.json: the drizzle migrations, the skill pack and the Next.js build are read from here. */
export const PROJECT_ROOT = findRoot();
