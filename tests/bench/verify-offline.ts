/**
 * Offline verification as `parley verify <bundle.json>` does it (node:crypto Ed25519), in a process
 * of its own so that its time and peak memory are its own:
 *   node --import tsx tests/bench/verify-offline.ts <bundle.json> [--parse]
 * Prints one JSON line: { events, readMs, verifyMs, verdict, maxRssMb, cpuMs }. As the CLI does, the
 * file is streamed through the verifier (lib/log/bundle-stream.ts): verifyMs is reading, parsing
 * and verifying in one pass, readMs 0. With --parse the file is read and JSON.parse'd whole first,
 * then verifyBundle runs (the browser's way): readMs is the read and parse, verifyMs the rest.
 * maxRssMb: the process's peak resident memory; cpuMs: its user + system CPU time while verifying
 * (above verifyMs when Ed25519 checks ran on the thread pool beside the hashing).
 */
import fs from "node:fs";
import { verifyBundle, type RoomBundle, type VerifyReport } from "../../lib/log/verify";
import { verifyBundleStream } from "../../lib/log/bundle-stream";
// server-key.ts installs node:crypto's SHA-256, as it does for the CLI (cli/parley.ts).
import { ed25519VerifyAsync } from "../../lib/services/server-key";

/** The file a MiB at a time, read synchronously as the CLI does: the thread pool is left to Ed25519. */
async function* readChunks(path: string): AsyncGenerator<Uint8Array> {
  const fd = fs.openSync(path, "r");
  try {
    const buf = new Uint8Array(1 << 20);
    for (let n; (n = fs.readSync(fd, buf)) > 0; ) yield buf.subarray(0, n);
  } finally {
    fs.closeSync(fd);
  }
}

const file = process.argv[2];
if (!file) {
  console.error("usage: verify-offline.ts <bundle.json> [--parse]");
  process.exit(2);
}
let readMs = 0;
let report: VerifyReport;
let t0 = performance.now();
const cpu0 = process.cpuUsage();
if (process.argv.includes("--parse")) {
  const bundle = JSON.parse(fs.readFileSync(file, "utf8")) as RoomBundle;
  readMs = performance.now() - t0;
  t0 = performance.now();
  report = await verifyBundle(bundle, { verify: ed25519VerifyAsync });
} else {
  report = await verifyBundleStream(readChunks(file), { verify: ed25519VerifyAsync });
}
const verifyMs = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
// The peak of this process's own memory (VmHWM, Linux): getrusage's maxRSS also counts the forked
// copy of the bench process from before exec, so it reported the bench's size (460 MB) there.
const peakKb = Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync("/proc/self/status", "utf8"))?.[1] ?? process.resourceUsage().maxRSS);
console.log(JSON.stringify({ events: report.details.events, readMs, verifyMs, verdict: report.verdict, maxRssMb: peakKb / 1024, cpuMs: (cpu.user + cpu.system) / 1000 }));
