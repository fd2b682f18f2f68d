/**
 * The machine's cost of waking a sleeping process: two processes hand one byte back and forth
 * over a pair of FIFOs with blocking reads and writes, each round trip two wake-ups. Measured with
 * the two on different cores and on the same core (taskset). Every HTTP load here is such an
 * exchange between the load generator and the server, and every delivery one between the server
 * and its readers: when one side sleeps waiting for the other, each answer pays a wake-up.
 *
 * Back to back, the cores never rest. A lone write after a quiet spell (a delivery round's post,
 * a quiet room's post to PostgreSQL) wakes processes that have slept for milliseconds, which costs
 * far more on some machines (a virtual CPU that halts): so the round trip is also measured after
 * QUIET_MS of quiet before each.
 *
 * As a child: node wakeup.ts ping|pong <fifo a> <fifo b> <round trips> [quiet ms]
 * (ping prints the mean round trip in µs and its own CPU time a round trip; after quiet, the
 * median round trip only).
 */
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { median } from "./load";

const ROUND_TRIPS = 20_000;
/** The quiet before each of QUIET_ROUND_TRIPS: the delivery rounds' gap between posts. */
const QUIET_MS = 150;
const QUIET_ROUND_TRIPS = 30;

export interface WakeUp {
  /** Mean round trip, µs, the two processes on different cores. */
  across: number;
  /** The pinging process's CPU time a round trip, µs (waking the other, and being woken). */
  acrossCpu: number;
  /** The same on one core. */
  same: number;
  sameCpu: number;
  /** Median round trip, µs, across the cores, each after QUIET_MS with both processes asleep. */
  acrossQuiet: number;
}

/** Runs the two processes pinned to `cores` (ping's, pong's); resolves with ping's figures (cpu NaN after quiet). */
async function pingPong(cores: [number, number], quietMs = 0): Promise<{ rtt: number; cpu: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-bench-wakeup-"));
  try {
    const [a, b] = [path.join(dir, "a"), path.join(dir, "b")];
    execFileSync("mkfifo", [a, b]);
    const run = (role: string, core: number) =>
      new Promise<string>((resolve, reject) => {
        const rounds = quietMs > 0 ? QUIET_ROUND_TRIPS : ROUND_TRIPS;
        const child = spawn("taskset", ["-c", String(core), process.execPath, "--import", "tsx", import.meta.filename, role, a, b, String(rounds), String(quietMs)], { stdio: ["ignore", "pipe", "inherit"] });
        let out = "";
        child.stdout.on("data", (d: Buffer) => (out += d.toString()));
        child.on("error", reject);
        child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`wake-up ${role} exited ${code}`))));
      });
    const [out] = await Promise.all([run("ping", cores[0]), run("pong", cores[1])]);
    const [rtt, cpu] = out.trim().split(" ").map(Number);
    return { rtt: rtt!, cpu: cpu ?? NaN };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The wake-up round trip across the two cores and on one; undefined when taskset or a second core is missing. */
export async function wakeUpCost(): Promise<WakeUp | undefined> {
  if (os.cpus().length < 2) return undefined;
  try {
    execFileSync("taskset", ["-c", "0", "true"]);
  } catch {
    return undefined;
  }
  const across = await pingPong([0, 1]);
  const same = await pingPong([0, 0]);
  const quiet = await pingPong([0, 1], QUIET_MS);
  return { across: across.rtt, acrossCpu: across.cpu, same: same.rtt, sameCpu: same.cpu, acrossQuiet: quiet.rtt };
}

export const fmtWakeUp = (w: WakeUp) =>
  `across the two cores ${w.across.toFixed(1)} µs (${w.acrossCpu.toFixed(1)} µs of one side's CPU), on one core ${w.same.toFixed(1)} µs (${w.sameCpu.toFixed(1)} µs); ` +
  `across the cores after ${QUIET_MS} ms of quiet each, ${w.acrossQuiet.toFixed(0)} µs (median of ${QUIET_ROUND_TRIPS})`;

if (process.argv[2] === "ping" || process.argv[2] === "pong") {
  const [role, a, b, n, quiet] = process.argv.slice(2);
  const rounds = Number(n);
  const quietMs = Number(quiet ?? 0);
  // Both open a, then b (an open blocks until the other end is opened too): ping writes a, pong reads it.
  let into: number, from: number;
  if (role === "ping") {
    into = fs.openSync(a!, "w");
    from = fs.openSync(b!, "r");
  } else {
    from = fs.openSync(a!, "r");
    into = fs.openSync(b!, "w");
  }
  const byte = Buffer.alloc(1);
  // One exchange: ping hands the byte over and waits for it back, pong waits for it and hands it back.
  const exchange =
    role === "ping"
      ? () => {
          fs.writeSync(into, byte);
          fs.readSync(from, byte);
        }
      : () => {
          fs.readSync(from, byte);
          fs.writeSync(into, byte);
        };
  if (quietMs > 0) {
    // Each round trip after a quiet spell (ping sleeps; pong waits in its read), one warm-up first.
    const pause = new Int32Array(new SharedArrayBuffer(4));
    const rtts: number[] = [];
    for (let i = 0; i <= rounds; i++) {
      if (role === "ping") Atomics.wait(pause, 0, 0, quietMs);
      const t = performance.now();
      exchange();
      if (i > 0) rtts.push((performance.now() - t) * 1000);
    }
    if (role === "ping") console.log(String(median(rtts)));
  } else {
    // A warm-up of a tenth, unmeasured.
    const warm = Math.ceil(rounds / 10);
    let t0 = 0;
    let cpu0 = process.cpuUsage();
    for (let i = 0; i < warm + rounds; i++) {
      if (i === warm) {
        t0 = performance.now();
        cpu0 = process.cpuUsage();
      }
      exchange();
    }
    if (role === "ping") {
      const cpu = process.cpuUsage(cpu0);
      console.log(`${((performance.now() - t0) * 1000) / rounds} ${(cpu.user + cpu.system) / rounds}`);
    }
  }
}
