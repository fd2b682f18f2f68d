/**
 * Growth: do the POST and idle-poll rates hold as data grows? On a fresh API-only server child of
 * the backend: rates with 10, 1,000 and 10,000 rooms on the server (polls over all of them, posts
 * into 10 spread over them), and into rooms of 10, 1,000 and 100,000 events (bigEvents); the large room
 * is also verified online and offline. Each point is measured with both load generators, each on a
 * room of its own where the size matters (the posts of one run would grow the other's room); a
 * room grows by what BENCH_GROWTH_SECONDS of posts add while its POST rate is measured.
 *
 * Each point has a reference measured in turn with it: the same load on a server of its own that
 * has the smallest number of rooms (`refEnv`: its own database), or into fresh rooms of the
 * smallest size on the same server. The point and its reference run in PAIRS pairs, each pair
 * back to back (the small rooms filled afresh for every run), and the figure judged is the median
 * of the pairs' ratios. The machine's speed drifted by half within one run (the trivial Hono
 * ceiling 28,941/s at a run's start, 43,929/s at its end), and two identical servers measured one
 * after the other differed by up to 2.5 times at one core each, so rates minutes apart, or single
 * runs, compared the machine with itself. The smallest point over its own reference shows the
 * noise that is left. Before each point the bench also waits until the machine is quiet
 * (waitForQuiet).
 */
import { startServerChild } from "./common";
import { fillRoom, fmtVerify, headOf, newRoom, postRequests, verifyOffline, verifyOnline, type Backend, type Report, type VerifyFigure } from "./core";
import { countFromEnv, describe, inPair, medianRatio, num, pairsText, waitForQuiet, type LoadResult, type Ratio, type Req, type Side } from "./load";

const SECONDS = Number(process.env.BENCH_GROWTH_SECONDS ?? 1);
export const ROOM_COUNTS = [10, 1_000, 10_000];
/**
 * The large room: 100,000 events on both backends (BENCH_BIG_EVENTS, BENCH_BIG_EVENTS_PG). On
 * PostgreSQL a batch of posts into one room is four statements, so it fills at a few thousand a
 * second here (3,800/s on 2026-12-01), in under a minute.
 */
export const bigEvents = (backend: Backend) =>
  backend === "sqlite" ? Number(process.env.BENCH_BIG_EVENTS ?? 100_000) : Number(process.env.BENCH_BIG_EVENTS_PG ?? 100_000);
export const roomSizes = (backend: Backend) => [10, 1_000, bigEvents(backend)];

const POST_ROUTE = "POST /api/rooms/:id/messages";
const READ_ROUTE = "GET /api/rooms/:id/messages";

export interface GrowthPoint {
  n: number;
  post: LoadResult;
  idle: LoadResult;
  /** The same loads at the smallest size, measured in turn with these, and the median ratios of the pairs. */
  ref?: { post: LoadResult; idle: LoadResult; ratio: { post: Ratio; idle: Ratio } };
}

export interface GrowthFigures {
  sizes: GrowthPoint[];
  rooms: GrowthPoint[];
  verifyBigOnline?: VerifyFigure;
  verifyBigOffline?: VerifyFigure;
}

/** `count` rooms created `inFlight` at a time; their ids. */
async function createRooms(base: string, count: number, inFlight = 32): Promise<string[]> {
  const out: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) {
        next++;
        out.push(await newRoom(base));
      }
    }),
  );
  return out;
}

/** Per generator, the run with the higher rate (with the server's view and the CPU of that run). */
function betterOf(a: LoadResult, b: LoadResult): LoadResult {
  const ac = b.ac.rate > a.ac.rate ? b : a;
  const wrk = (b.wrk?.rate ?? 0) > (a.wrk?.rate ?? 0) ? b : a;
  return { ac: ac.ac, acServer: ac.acServer, acCpu: ac.acCpu, wrk: wrk.wrk, wrkServer: wrk.wrkServer, wrkCpu: wrk.wrkCpu };
}

/**
 * Pairs of a point's run and its reference's (BENCH_GROWTH_PAIRS), each run BENCH_GROWTH_SECONDS
 * long: eight of 1 s rather than four of 2 s, the same seconds of load. Single pairs read 66–148 %
 * where point and reference were alike, sometimes several in a row; with four pairs, points
 * identical to their reference read up to 121 %, and with eight, every median lay within 81–113 %
 * in the seven runs of a backend taken (docs/BENCHMARKS.md, thirty-third and thirty-fourth rounds).
 */
const PAIRS = countFromEnv("BENCH_GROWTH_PAIRS", 8);

/**
 * A load and its reference in PAIRS pairs (inPair: A B B A per generator, the sides' order
 * alternating): per generator, the better run of each (for the rates shown) and the median of the
 * pairs' ratios, point over reference (the figure judged). This machine changes speed within
 * seconds (the same server's CPU per idle poll 0.036 ms, then 0.058–0.064 ms, in runs one after
 * the other), so the two runs a ratio compares are as near in time as they can be, two to three
 * seconds apart (they were five to six when each side ran both generators in turn).
 */
async function inTurn(point: Side, ref: Side): Promise<{ point: LoadResult; ref: LoadResult; ratio: Ratio }> {
  const points: LoadResult[] = [];
  const refs: LoadResult[] = [];
  for (let i = 0; i < PAIRS; i++) {
    const [p, r] = await inPair(point, ref, i);
    points.push(p);
    refs.push(r);
  }
  const pairs = points.map((p, i) => [p, refs[i]!] as const);
  console.log(`  (point over reference, ${pairsText(pairs)})`);
  return { point: points.reduce(betterOf), ref: refs.reduce(betterOf), ratio: medianRatio(pairs) };
}

/** A cursor past every head: the same indexed read as since = last, without reading 10,000 heads first. */
const PAST_THE_HEAD = 1_000_000_000;

function logPoint(report: Report, name: string, p: GrowthPoint): void {
  for (const [what, r] of [["POST", p.post], ["idle poll", p.idle]] as const) {
    const [first, ...rest] = describe(r);
    report(`${name} ${num(p.n)}: ${what}`, first!);
    for (const line of rest) report("", line);
  }
  if (!p.ref) return;
  for (const [what, r] of [["POST", p.ref.post], ["idle poll", p.ref.idle]] as const) {
    const [first, ...rest] = describe(r);
    report(`  beside it, the reference: ${what}`, first!);
    for (const line of rest) report("", line);
  }
}

export async function growthFigures(opts: { backend: Backend; env: Record<string, string>; refEnv: Record<string, string>; report: Report; verify: boolean }): Promise<GrowthFigures> {
  const { report } = opts;
  const label = opts.backend === "sqlite" ? "SQLite" : "PostgreSQL";
  const server = await startServerChild({ prefix: `parley-bench-growth-${opts.backend}-`, apiOnly: true, env: opts.env });
  const { base } = server;
  const pid = server.child.pid!;
  const out: GrowthFigures = { sizes: [], rooms: [] };
  // The reference of the rooms' points: a server that keeps the smallest number of rooms.
  const refServer = await startServerChild({ prefix: `parley-bench-growth-ref-${opts.backend}-`, apiOnly: true, env: opts.refEnv }).catch(async (err) => {
    await server.close();
    throw err;
  });
  try {
    const refRooms = await createRooms(refServer.base, ROOM_COUNTS[0]!);
    const refPolls: Req[] = refRooms.map((r) => ({ method: "GET", path: `/api/rooms/${r}/messages?since=${PAST_THE_HEAD}` }));
    const atRef = { base: refServer.base, pid: refServer.child.pid!, connections: 64, seconds: SECONDS };
    // Rooms on the server: a fresh one, so that the first point has exactly 10.
    const rooms: string[] = [];
    for (const n of ROOM_COUNTS) {
      const t0 = performance.now();
      rooms.push(...(await createRooms(base, n - rooms.length)));
      console.log(`  (${num(n)} rooms on the server; ${num((performance.now() - t0) / 1000, 1)} s to create them; the machine quiet after ${num(await waitForQuiet(), 1)} s)`);
      // Polls spread over every room; posts into 10 rooms spread over them (10 at every point, so
      // that the posts contend for rooms alike and only the data around them grows).
      const polls: Req[] = rooms.map((r) => ({ method: "GET", path: `/api/rooms/${r}/messages?since=${PAST_THE_HEAD}` }));
      const targets = Array.from({ length: 10 }, (_, k) => rooms[Math.floor((k * rooms.length) / 10)]!);
      const first = n === ROOM_COUNTS[0];
      const warmup = (i: number) => (first && i === 0 ? undefined : false);
      // The polls are warmed before every run, as every read load of the bench is: a server keeps
      // a room's row for 15 to 30 s (lib/services/cache.ts), so a run after the reference's would
      // otherwise begin by reading again every row that expired meanwhile (up to 10,000, where a
      // server polled without pause reads about one in 22 each second): the bench's own pauses.
      const idle = await inTurn(
        () => ({ base, pid, connections: 64, seconds: SECONDS, requests: polls, route: READ_ROUTE }),
        () => ({ ...atRef, requests: refPolls, route: READ_ROUTE }),
      );
      const post = await inTurn(
        (i) => ({ base, pid, connections: 64, seconds: SECONDS, warmup: warmup(i), requests: postRequests(targets), route: POST_ROUTE }),
        (i) => ({ ...atRef, warmup: warmup(i), requests: postRequests(refRooms), route: POST_ROUTE }),
      );
      const point = { n, post: post.point, idle: idle.point, ref: { post: post.ref, idle: idle.ref, ratio: { post: post.ratio, idle: idle.ratio } } };
      out.rooms.push(point);
      logPoint(report, `${label}: growth, rooms on the server`, point);
    }

    // Events in a room: a room (two below the largest size: one per generator) filled to each size.
    for (const n of roomSizes(opts.backend)) {
      const big = n === bigEvents(opts.backend);
      const t0 = performance.now();
      const fill = async (size: number) => {
        const room = await newRoom(base);
        await fillRoom(base, room, size - (await headOf(base, room)), (i) => `growth message ${i}`);
        return room;
      };
      const fillPair = async (size = n) => {
        const acRoom = await fill(size);
        return { acRoom, wrkRoom: size === bigEvents(opts.backend) ? acRoom : await fill(size) };
      };
      const pairs = [await fillPair()];
      console.log(`  (room(s) of ${num(n)} events; ${num((performance.now() - t0) / 1000, 1)} s to fill)`);
      if (big && opts.verify) {
        out.verifyBigOnline = await verifyOnline(server, pairs[0]!.acRoom);
        report(`${label}: Verify online (POST /verify), ${num(n)} events`, fmtVerify(out.verifyBigOnline));
        out.verifyBigOffline = await verifyOffline(base, pairs[0]!.acRoom);
        report(`${label}: Verify offline (parley verify), ${num(n)} events`, fmtVerify(out.verifyBigOffline));
      }
      // The later runs: the large room again (a little larger each time), the small ones afresh;
      // the references, rooms of the smallest size, fresh for each run.
      while (pairs.length < PAIRS) pairs.push(big ? pairs[0]! : await fillPair());
      const refPairs: typeof pairs = [];
      while (refPairs.length < PAIRS) refPairs.push(await fillPair(roomSizes(opts.backend)[0]));
      console.log(`  (the machine quiet after ${num(await waitForQuiet(), 1)} s)`);
      const idleOf = async (room: string): Promise<Req[]> => [{ method: "GET", path: `/api/rooms/${room}/messages?since=${await headOf(base, room)}` }];
      // Each generator loads a room of its own (the large room excepted); no warm-up (the path is
      // warm from the rooms above): it would grow the room first.
      const roomOf = (pair: { acRoom: string; wrkRoom: string }, tool: "ac" | "wrk") => (tool === "ac" ? pair.acRoom : pair.wrkRoom);
      const at = { base, pid, connections: 64, seconds: SECONDS, warmup: false } as const;
      const idleIn = (of: typeof pairs): Side => async (i, tool) => ({ ...at, requests: await idleOf(roomOf(of[i]!, tool)), route: READ_ROUTE });
      const postIn = (of: typeof pairs): Side => (i, tool) => ({ ...at, requests: postRequests([roomOf(of[i]!, tool)]), route: POST_ROUTE });
      const idle = await inTurn(idleIn(pairs), idleIn(refPairs));
      const post = await inTurn(postIn(pairs), postIn(refPairs));
      const point = { n, post: post.point, idle: idle.point, ref: { post: post.ref, idle: idle.ref, ratio: { post: post.ratio, idle: idle.ratio } } };
      out.sizes.push(point);
      logPoint(report, `${label}: growth, events in the room`, point);
    }
  } finally {
    await Promise.all([server.close(), refServer.close()]);
  }
  return out;
}
