import fs from "node:fs";
import { chromium, type Browser } from "playwright-core";

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
