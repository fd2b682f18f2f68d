/**
 * The final table: figure | SQLite | PostgreSQL | ceiling | ratio | target, each target marked met or
 * not met per backend. A rate's ratio is taken against the trivial Hono ceiling measured by the
 * same generator just before and just after it (the mean of the two); a target is met only if both
 * generators say so (the lower ratio, the higher p99, the errors of both runs and the server's
 * non-2xx).
 */
import os from "node:os";
import { verifyTime, type CoreFigures, type Delivery, type RateFigure, type VerifyFigure } from "./core";
import type { GrowthFigures, GrowthPoint } from "./growth";
import { medianRatio, num, pairsText, rateText, type ClientView, type LoadResult, type Pair } from "./load";
import type { TurnFigures } from "./turns";
import { fmtWakeUp, type WakeUp } from "./wakeup";

export interface BackendFigures extends CoreFigures {
  growth?: GrowthFigures;
  turns?: TurnFigures;
}

export interface Ceilings {
  /** With `samples`: the mean of the start's and the end's rates (meanCeiling). */
  node?: Ceiling;
  hono?: Ceiling;
  /** The same delivery, from a node:http server that does only its I/O. */
  delivery?: { sse: Delivery; polls: Delivery };
  /** What waking a sleeping process costs here (tests/bench/wakeup.ts). */
  wakeUp?: WakeUp;
}

type Ceiling = LoadResult & { samples?: [start: LoadResult, end: LoadResult] };

/** The ceiling of the start and of the end of the run as one: each generator's mean rate. */
export function meanCeiling(start: LoadResult, end: LoadResult): Ceiling {
  const mean = (a: ClientView, b: ClientView | undefined): ClientView => (b ? { ...a, rate: (a.rate + b.rate) / 2 } : a);
  return { ...start, ac: mean(start.ac, end.ac), ...(start.wrk ? { wrk: mean(start.wrk, end.wrk) } : {}), samples: [start, end] };
}

type Verdict = boolean | undefined;
type Judge = (f: BackendFigures) => Verdict;

interface Row {
  figure: string;
  cell: (f: BackendFigures) => string | undefined;
  ceiling: string;
  ratio?: (f: BackendFigures) => string | undefined;
  target?: string;
  judge?: Judge;
}

const msText = (x: number) => (x >= 100 ? num(x) : x >= 10 ? num(x, 1) : num(x, 2));
const rates = (r: LoadResult) => [r.wrk?.rate, r.ac.rate].filter((x): x is number => x !== undefined);
/** The worse p99 of the two generators (raw, per request sent). */
export const p99Of = (r: LoadResult) => Math.max(r.ac.p99, r.wrk?.p99 ?? -Infinity);
const errorsOf = (r: LoadResult) => r.ac.errors + (r.wrk?.errors ?? 0) + (r.acServer?.errors ?? 0) + (r.wrkServer?.errors ?? 0);

/** "wrk 1,234/s p99 12 ms · autocannon 1,100/s p99 15 ms · server p99 3.1 ms" */
export function loadCell(r: LoadResult | undefined): string | undefined {
  if (!r) return undefined;
  const parts: string[] = [];
  if (r.wrk) parts.push(`wrk ${num(r.wrk.rate)}/s p99 ${msText(r.wrk.p99)} ms`);
  parts.push(`autocannon ${num(r.ac.rate)}/s p99 ${msText(r.ac.p99)} ms`);
  const server = r.wrkServer ?? r.acServer;
  if (server) parts.push(`server p99 ${msText(server.p99)} ms`);
  const errors = errorsOf(r);
  if (errors) parts.push(`${num(errors)} errors`);
  const cpu = r.wrkCpu ?? r.acCpu;
  return parts.join(" · ") + (cpu ? ` (${busyText(cpu.mainThread, cpu.mainWaiting, cpu.machine)})` : "");
}

/**
 * How near its limit the server ran: its main thread (where every request is handled) busy and
 * waiting for a core, in cores, and the machine's cores busy. A main thread busy or waiting about
 * one core and a machine about all its cores busy is a figure at this machine's limit.
 */
export const busyText = (main: number, waiting: number, machine: number) =>
  `server's main thread ${num(main, 2)} of a core busy${Number.isNaN(waiting) ? "" : `, ${num(waiting, 2)} waiting for one`}; machine ${num(machine, 2)} of ${os.cpus().length} cores busy`;

/** Ratios to the same generator's ceiling; the lower one decides. */
function ratios(r: LoadResult | undefined, c: LoadResult | undefined): { text: string; low: number } | undefined {
  if (!r || !c) return undefined;
  const pairs: [string, number][] = [];
  if (r.wrk && c.wrk) pairs.push(["wrk", r.wrk.rate / c.wrk.rate]);
  pairs.push(["autocannon", r.ac.rate / c.ac.rate]);
  return { text: pairs.map(([t, x]) => `${t} ${(x * 100).toFixed(1)} %`).join(" · "), low: Math.min(...pairs.map(([, x]) => x)) };
}

/** The lower of the two generators' medians of the pairs' ratios: the one that decides. */
const lowerMedian = (pairs: readonly Pair[]) => {
  const { ac, wrk } = medianRatio(pairs);
  return Math.min(ac, wrk ?? ac);
};

const deliveryCell = (d: Delivery | undefined) => (d ? `p50 ${msText(d.p50)} ms, p99 ${msText(d.p99)} ms, ${num(d.delivered)}/${num(d.expected)}, ${d.lost} lost` : undefined);
const verifyCell = (v: VerifyFigure | undefined, rss = false) => (v ? `${verifyTime(v)} ${v.verdict}${rss ? `, peak RSS ${num(v.rssMb)} MB` : ""}` : undefined);
const ceilingCell = (r: Ceiling | undefined, what: string) => (r ? `${what}: ${rateText(r)}` : "—");
/** The ceiling rows also say what the mean is of. */
const ceilingSamplesCell = (r: Ceiling | undefined, what: string) =>
  r?.samples ? `${ceilingCell(r, what)} (the mean of the run's start, ${rateText(r.samples[0])}, and end, ${rateText(r.samples[1])})` : ceilingCell(r, what);

type Tool = "wrk" | "ac";
const rateOf = (r: LoadResult, tool: Tool) => (tool === "wrk" ? r.wrk?.rate : r.ac.rate);
/** A point's rate over its reference's (the median of the pairs measured in turn) when it has one, else its rate. */
const relative = (p: GrowthPoint, which: "post" | "idle", tool: Tool): number | undefined =>
  p.ref ? p.ref.ratio[which][tool] : rateOf(p[which], tool);

/** Lowest over highest among the points (of the rates over their references, where measured), per generator; the lower one decides. */
function flatness(points: GrowthPoint[] | undefined, which: "post" | "idle"): { text: string; low: number } | undefined {
  if (!points?.length) return undefined;
  const of = (tool: Tool) => {
    const xs = points.map((p) => relative(p, which, tool)).filter((x): x is number => x !== undefined);
    return xs.length === points.length ? Math.min(...xs) / Math.max(...xs) : undefined;
  };
  const pairs = (["wrk", "ac"] as const).map((t) => [t, of(t)] as const).filter((p): p is readonly [Tool, number] => p[1] !== undefined);
  return { text: pairs.map(([t, x]) => `${t === "ac" ? "autocannon" : t} ${(x * 100).toFixed(0)} %`).join(" · "), low: Math.min(...pairs.map(([, x]) => x)) };
}
const growthCell = (points: GrowthPoint[] | undefined, which: "post" | "idle") => {
  if (!points?.length) return undefined;
  const tool: Tool = points[0]![which].wrk ? "wrk" : "ac";
  const point = (p: GrowthPoint) => {
    const ref = p.ref && rateOf(p.ref[which], tool);
    return `${num(p.n)}: ${num(rateOf(p[which], tool) ?? NaN)}/s${ref === undefined ? "" : ` (beside ${num(ref)}/s; pairs' median ${Math.round(100 * relative(p, which, tool)!)} %)`}`;
  };
  return points.map(point).join(" · ") + (tool === "wrk" ? " (wrk)" : " (autocannon)");
};

export function rows(c: Ceilings): Row[] {
  const hono = c.hono;
  /** The ceiling a rate figure is judged against: the trivial Hono route just before and after it, else the run's. */
  const besideOf = (f: BackendFigures, key: RateFigure): Ceiling | undefined => {
    const pair = f.beside?.[key];
    return pair ? meanCeiling(...pair) : hono;
  };
  const rateRatio = (f: BackendFigures, key: RateFigure) => {
    const ceiling = besideOf(f, key);
    const r = ratios(f[key], ceiling);
    return r && f.beside?.[key] ? `${r.text} (beside it: ${rateText(ceiling!)})` : r?.text;
  };
  const besideCeiling = `trivial Hono, the mean of its runs just before and after each figure (in the ratio cell); the run's: ${hono ? rateText(hono) : "—"}`;
  const rateRow = (figure: string, key: RateFigure, share: number, extra?: string, judgeMore?: Judge): Row => ({
    figure,
    cell: (f) => loadCell(f[key]),
    ceiling: besideCeiling,
    ratio: (f) => rateRatio(f, key),
    target: `≥ ${share} % of the trivial Hono rate${extra ? `; ${extra}` : ""}`,
    judge: (f) => {
      const r = ratios(f[key], besideOf(f, key));
      if (!r) return undefined;
      const more = judgeMore ? judgeMore(f) : true;
      return more === undefined ? undefined : r.low >= share / 100 && more;
    },
  });
  return [
    { figure: "Ceiling: empty node:http server, 64 connections", cell: () => undefined, ceiling: ceilingSamplesCell(c.node, "node:http") },
    { figure: "Ceiling: trivial Hono route (@hono/node-server), 64 connections", cell: () => undefined, ceiling: ceilingSamplesCell(hono, "trivial Hono") },
    { figure: "Ceiling: a wake-up round trip between two processes (blocking pipe)", cell: () => undefined, ceiling: c.wakeUp ? fmtWakeUp(c.wakeUp) : "—" },
    {
      figure: "  the server's floor: GET /api/server-key (a route that does nothing), 64 connections",
      cell: (f) => loadCell(f.trivialRoute),
      ceiling: besideCeiling,
      ratio: (f) => rateRatio(f, "trivialRoute"),
    },
    rateRow("Idle poll (since = last), 64 connections", "idle", 40),
    rateRow("GET a page of 100 messages, 64 connections", "page", 20),
    rateRow("POST message, 64 connections, 50 rooms", "post", 10, "p99 < 50 ms, 0 errors", (f) => (f.post ? p99Of(f.post) < 50 && errorsOf(f.post) === 0 : undefined)),
    {
      figure: "POST message over HTTP / in-process append (64 in flight)",
      cell: (f) => f.postPairs?.map(([post, local]) => `${num(post.wrk?.rate ?? post.ac.rate)}/s over ${num(local)}`).join("; ").concat(" appends/s"),
      ceiling: "the in-process append of each backend, measured just before each HTTP load (pairs)",
      ratio: (f) => f.postPairs && pairsText(f.postPairs),
      target: "≥ 60 %",
      judge: (f) => (f.postPairs ? lowerMedian(f.postPairs) >= 0.6 : undefined),
    },
    rateRow("POST agent-signed message, 64 connections, 50 rooms", "signed", 5, "p99 < 80 ms, 0 errors", (f) => (f.signed ? p99Of(f.signed) < 80 && errorsOf(f.signed) === 0 : undefined)),
    {
      figure: "Delivery POST → 1,000 SSE watchers (separate reader process)",
      cell: (f) => deliveryCell(f.sse),
      ceiling: c.delivery ? `node:http, no store: ${deliveryCell(c.delivery.sse)}` : "—",
      target: "p99 < 25 ms, nothing lost",
      judge: (f) => (f.sse ? f.sse.p99 < 25 && f.sse.lost === 0 : undefined),
    },
    {
      figure: "Delivery POST → 100 long-pollers (separate reader process)",
      cell: (f) => deliveryCell(f.polls),
      ceiling: c.delivery ? `node:http, no store: ${deliveryCell(c.delivery.polls)}` : "—",
      target: "p99 < 25 ms",
      judge: (f) => (f.polls ? f.polls.p99 < 25 : undefined),
    },
    { figure: "Delivery POST → 1 SSE watcher", cell: (f) => deliveryCell(f.oneWatcher), ceiling: "" },
    { figure: "Delivery POST on instance B → 1 SSE watcher on instance A", cell: (f) => deliveryCell(f.crossInstance), ceiling: "" },
    {
      figure: "Watcher page, 1,000-message room, 16 connections",
      cell: (f) => loadCell(f.watcher),
      ceiling: "trivial Next page (GET /) of the same server",
      ratio: (f) => f.watcherPairs && pairsText(f.watcherPairs),
      target: "≥ 200/s or ≥ 50 % of the trivial Next page",
      judge: (f) => (f.watcher && f.watcherPairs ? Math.min(...rates(f.watcher)) >= 200 || lowerMedian(f.watcherPairs) >= 0.5 : undefined),
    },
    { figure: "  trivial Next page (GET /), 16 connections", cell: (f) => loadCell(f.home), ceiling: "" },
    { figure: "Verify online (POST /verify), 10,000 events", cell: (f) => verifyCell(f.verify10kOnline), ceiling: "", target: "< 0.4 s", judge: (f) => (f.verify10kOnline ? f.verify10kOnline.ms < 400 && f.verify10kOnline.verdict === "CLEAN" : undefined) },
    { figure: "Verify offline (parley verify), 10,000 events", cell: (f) => verifyCell(f.verify10kOffline, true), ceiling: "", target: "< 0.4 s", judge: (f) => (f.verify10kOffline ? f.verify10kOffline.ms < 400 && f.verify10kOffline.verdict === "CLEAN" : undefined) },
    {
      figure: "Verify online, the large room (server's peak RSS, API only)",
      cell: (f) => (f.growth?.verifyBigOnline ? `${num(f.growth.verifyBigOnline.events)} events: ${verifyCell(f.growth.verifyBigOnline, true)}` : undefined),
      ceiling: "",
      target: "100,000 events < 4 s, RSS < 400 MB",
      judge: (f) => bigVerdict(f.growth?.verifyBigOnline),
    },
    {
      figure: "Verify offline (parley verify), the large room",
      cell: (f) => (f.growth?.verifyBigOffline ? `${num(f.growth.verifyBigOffline.events)} events: ${verifyCell(f.growth.verifyBigOffline, true)}` : undefined),
      ceiling: "",
      target: "100,000 events < 4 s, RSS < 400 MB",
      judge: (f) => bigVerdict(f.growth?.verifyBigOffline),
    },
    {
      figure: "Verify in Chromium (watcher page), 10,000 events",
      cell: (f) => (f.chromium10k ? `${num(f.chromium10k.ms)} ms ${f.chromium10k.verdict} (${f.chromium10k.impl})` : undefined),
      ceiling: "",
      target: "< 1 s",
      judge: (f) => (f.chromium10k ? f.chromium10k.ms < 1000 && f.chromium10k.verdict === "CLEAN" : undefined),
    },
    {
      figure: "Turns: 100 rooms × 2 scripted agents × 20 rounds (reply with my_next: one request a turn), turn latency (reply sent → next turn handed over), warm server",
      cell: (f) =>
        f.turns
          ? `p50 ${num(f.turns.p50)} ms, p99 ${num(f.turns.p99)} ms${f.turns.runsP99 ? ` (the median of ${f.turns.runsP99.length} runs' p99: ${f.turns.runsP99.map((x) => num(x)).join(" / ")} ms)` : ""}, ${num(f.turns.turns)}/${num(f.turns.expected)} turns in ${num(f.turns.wallSeconds, 1)} s, ${f.turns.errors} errors ` +
            `(overlapping, opened → next handed over: p50 ${num(f.turns.openedP50)} ms, p99 ${num(f.turns.openedP99)} ms; ` +
            `${busyText(f.turns.serverMain, f.turns.serverWaiting, f.turns.machine)})`
          : undefined,
      ceiling: "",
      target: "p99 < 100 ms, 0 errors",
      judge: (f) => (f.turns ? f.turns.p99 < 100 && f.turns.errors === 0 : undefined),
    },
    { figure: "RSS idle (after start, with the pages)", cell: (f) => (f.rssIdle === undefined ? undefined : `${num(f.rssIdle)} MB`), ceiling: "", target: "< 150 MB", judge: (f) => (f.rssIdle === undefined ? undefined : f.rssIdle < 150) },
    {
      figure: "RSS with 1,000 SSE streams open",
      cell: (f) => (f.rssSse === undefined ? undefined : `${num(f.rssSse)} MB (${num(f.rssBeforeSse ?? NaN)} MB just before)`),
      ceiling: "",
      target: "< 300 MB",
      judge: (f) => (f.rssSse === undefined ? undefined : f.rssSse < 300),
    },
    growthRow("Growth: POST rate, events in the room", (f) => f.growth?.sizes, "post"),
    growthRow("Growth: idle-poll rate, events in the room", (f) => f.growth?.sizes, "idle"),
    growthRow("Growth: POST rate, rooms on the server", (f) => f.growth?.rooms, "post"),
    growthRow("Growth: idle-poll rate, rooms on the server", (f) => f.growth?.rooms, "idle"),
  ];
}

function bigVerdict(v: VerifyFigure | undefined): Verdict {
  if (!v) return undefined;
  // Measured on a smaller room (BENCH_BIG_EVENTS): the time target scales with the events.
  return v.verdict === "CLEAN" && v.ms < 4000 * (v.events / 100_000) && v.rssMb < 400;
}

function growthRow(figure: string, pick: (f: BackendFigures) => GrowthPoint[] | undefined, which: "post" | "idle"): Row {
  return {
    figure,
    cell: (f) => growthCell(pick(f), which),
    ceiling: "the rate at the smallest size, measured in turn with each point",
    ratio: (f) => {
      const r = flatness(pick(f), which);
      return r ? `lowest/highest of point/beside: ${r.text}` : undefined;
    },
    target: "flat within 20 %",
    judge: (f) => {
      const r = flatness(pick(f), which);
      return r ? r.low >= 0.8 : undefined;
    },
  };
}

const mark = (v: Verdict) => (v === undefined ? "not measured" : v ? "met" : "NOT met");

/** The table as markdown (what docs/BENCHMARKS.md holds), and how many targets each backend met. */
export function finalTable(c: Ceilings, sqlite: BackendFigures | undefined, postgres: BackendFigures | undefined): string {
  const cellOr = (s: string | undefined) => (s ?? "—").replace(/\|/g, "\\|");
  const lines = ["| figure | SQLite | PostgreSQL | ceiling | ratio (SQLite / PostgreSQL) | target |", "|---|---|---|---|---|---|"];
  const met = { sqlite: [0, 0], postgres: [0, 0] };
  for (const row of rows(c)) {
    const ratio = row.ratio ? [sqlite && row.ratio(sqlite), postgres && row.ratio(postgres)].map((x) => x ?? "—").join(" / ") : "";
    let target = row.target ?? "";
    if (row.judge) {
      const vs = { sqlite: sqlite ? row.judge(sqlite) : undefined, postgres: postgres ? row.judge(postgres) : undefined };
      for (const k of ["sqlite", "postgres"] as const) {
        if (vs[k] === undefined) continue;
        met[k][1]++;
        if (vs[k]) met[k][0]++;
      }
      target += `: SQLite ${mark(vs.sqlite)}, PostgreSQL ${mark(vs.postgres)}`;
    }
    lines.push(`| ${row.figure} | ${cellOr(sqlite && row.cell(sqlite))} | ${cellOr(postgres && row.cell(postgres))} | ${cellOr(row.ceiling)} | ${cellOr(ratio)} | ${cellOr(target)} |`);
  }
  lines.push("", `Targets met: SQLite ${met.sqlite[0]} of ${met.sqlite[1]}, PostgreSQL ${met.postgres[0]} of ${met.postgres[1]}.`);
  return lines.join("\n");
}
