import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import type { Clock } from "../../lib/services/context";
import type { RunningServer } from "../../server";
import { startTestServer } from "./server";

/** Real headless Chromium: $CHROMIUM_PATH, Debian's /usr/bin/chromium, or @sparticuz/chromium. */
export async function launchChromium(): Promise<Browser> {
  const executablePath =
    process.env.CHROMIUM_PATH ||
    (fs.existsSync("/usr/bin/chromium") ? "/usr/bin/chromium" : await (await import("@sparticuz/chromium")).default.executablePath());
  return chromium.launch({
    executablePath,
    headless: true,
    // This machine has no network but loopback: keep Chromium from reaching out at start.
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

const ROOT = path.resolve(import.meta.dirname, "../..");

/** A real server with the pages on a free port (building them first if there is no build). */
export async function startPagesServer(opts: { clock?: Clock } = {}): Promise<RunningServer> {
  if (!fs.existsSync(path.join(ROOT, ".next", "BUILD_ID"))) {
    const build = spawnSync("npx", ["next", "build"], { cwd: ROOT, stdio: ["ignore", process.stderr, process.stderr] });
    if (build.status !== 0) throw new Error("next build failed");
  }
  return startTestServer({}, { pages: true, clock: opts.clock });
}
