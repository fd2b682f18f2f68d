/**
 * Offline verification as `parley verify <bundle.json>` does it (node:crypto Ed25519), in a process
 * of its own so that its time and peak memory are its own:
 *   node --import tsx tests/bench/verify-offline.ts <bundle.json>
 * Prints one JSON line: { events, readMs, verifyMs, verdict, maxRssMb } (maxRssMb: the process's
 * peak resident memory, the bundle held in memory included).
 */
import fs from "node:fs";
import { verifyBundle, type RoomBundle } from "../../lib/log/verify";
import { ed25519VerifyAsync } from "../../lib/services/server-key";

const file = process.argv[2];
if (!file) {
  console.error("usage: verify-offline.ts <bundle.json>");
  process.exit(2);
}
let t0 = performance.now();
const bundle = JSON.parse(fs.readFileSync(file, "utf8")) as RoomBundle;
const readMs = performance.now() - t0;
t0 = performance.now();
const report = await verifyBundle(bundle, { verify: ed25519VerifyAsync });
const verifyMs = performance.now() - t0;
console.log(JSON.stringify({ events: bundle.events.length, readMs, verifyMs, verdict: report.verdict, maxRssMb: process.resourceUsage().maxRSS / 1024 }));
