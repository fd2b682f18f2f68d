/**
 * The machine's cost of waking a sleeping process: two processes hand one byte back and forth
 * over a pair of FIFOs with blocking reads and writes, each round trip two wake-ups. Measured with
 * the two on different cores and on the same core (taskset). Every HTTP load here is such an
 * exchange between the load generator and the server, and every delivery one between the server
 * and its readers: when one side sleeps waiting for the other, each answer pays a wake-up.
 *
 * As a child: node wakeup.ts ping|pong <fifo a> <fifo b> <round trips>
 * (ping prints the mean round trip in µs, and its own CPU time a round trip).
 */
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const ROUND_TRIPS = 20_000;

export interface WakeUp {
  /** Mean round trip, µs, the two processes on different cores. */
  across: number;
  /** The pinging process's CPU time a round trip, µs (waking the other, and being woken). */
  acrossCpu: number;
  /** The same on one core. */
  same: number;
  sameCpu: number;
}

/** Runs the two processes pinned to `cores` (ping's, pong's); resolves with ping's figures. */
async function pingPong(cores: [number, number]): Promise<{ rtt: number; cpu: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-bench-wakeup-"));
  try {
    const [a, b] = [path.join(dir, "a"), path.join(dir, "b")];
    execFileSync("mkfifo", [a, b]);
    const run = (role: string, core: number) =>
      new Promise<string>((resolve, reject) => {
        const child = spawn("taskset", ["-c", String(core), process.execPath, "--import", "tsx", import.meta.filename, role, a, b, String(ROUND_TRIPS)], { stdio: ["ignore", "pipe", "inherit"] });
        let out = "";
        child.stdout.on("data", (d: Buffer) => (out += d.toString()));
        child.on("error", reject);
        child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`wake-up ${role} exited ${code}`))));
      });
    const [out] = await Promise.all([run("ping", cores[0]), run("pong", cores[1])]);
    const [rtt, cpu] = out.trim().split(" ").map(Number);
    return { rtt: rtt!, cpu: cpu! };
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
  return { across: across.rtt, acrossCpu: across.cpu, same: same.rtt, sameCpu: same.cpu };
}

export const fmtWakeUp = (w: WakeUp) =>
  `across the two cores ${w.across.toFixed(1)} µs (${w.acrossCpu.toFixed(1)} µs of one side's CPU), on one core ${w.same.toFixed(1)} µs (${w.sameCpu.toFixed(1)} µs)`;

if (process.argv[2] === "ping" || process.argv[2] === "pong") {
  const [role, a, b, n] = process.argv.slice(2);
  const rounds = Number(n);
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
  // A warm-up of a tenth, unmeasured.
  const warm = Math.ceil(rounds / 10);
  let t0 = 0;
  let cpu0 = process.cpuUsage();
  for (let i = 0; i < warm + rounds; i++) {
    if (i === warm && role === "ping") {
      t0 = performance.now();
      cpu0 = process.cpuUsage();
    }
    if (role === "ping") {
      fs.writeSync(into, byte);
      fs.readSync(from, byte);
    } else {
      fs.readSync(from, byte);
      fs.writeSync(into, byte);
    }
  }
  if (role === "ping") {
    const cpu = process.cpuUsage(cpu0);
    console.log(`${((performance.now() - t0) * 1000) / rounds} ${(cpu.user + cpu.system) / rounds}`);
  }
}
