/**
 * Turns mode figures (issue 6), with the server in a child process as in production:
 * - the claim + reply round trip of one agent pair over HTTP (p50/p99, round trips/s), and the same
 *   claimTurn + replyTurn called in-process as the local limit;
 * - 100 turns rooms × 2 scripted agents (200 concurrent loops of my_turn long-poll with claim →
 *   reply: two requests a turn), 20 rounds each, until every room is blocked by max_rounds: wall
 *   time, turns, errors and the turn latency, on a server warmed by the same run once before, in
 *   RUNS runs (the median run's figures);
 *   the agents run in a process of their own (scriptedRoomsApart).
 * `turnFigures(report)` is called by tests/bench/run.ts; standalone:
 *   node --import tsx tests/bench/turns.ts
 */
import http from "node:http";
import os from "node:os";
import { PerformanceObserver } from "node:perf_hooks";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { createRoom } from "../../lib/services/rooms";
import { claimTurn, currentTurn, replyTurn } from "../../lib/services/turns";
import { createRoomBody } from "../../lib/schemas/rooms";
import { inProcessServices, percentile, startServerChild } from "./common";
import { forkClient, sendToParent } from "./ipc";
import { countFromEnv, cpuSeconds, fmtSigned, machineBusySeconds, runQueueSeconds, signatures } from "./load";

type Report = (name: string, value: string) => void;

/** Claim + reply round trips timed for one agent pair (after a warm-up). */
const TRIPS = Number(process.env.BENCH_TURN_TRIPS ?? 1000);
const WARMUP = 50;
/** Rooms of the scripted run, two agents each, ROUNDS rounds each. */
const ROOMS = Number(process.env.BENCH_TURN_ROOMS ?? 100);
const ROUNDS = 20;
/**
 * Measured runs of the rooms (BENCH_TURN_RUNS); the figure is the run of the median p99. One run
 * is 2–3 s, a single sample of a machine that slows by half for tens of seconds at a time
 * (docs/BENCHMARKS.md, thirty-second round).
 */
const RUNS = countFromEnv("BENCH_TURN_RUNS", 3);
/** The scripted run gives up (and counts what is unfinished as errors) after this long. */
const DEADLINE_MS = 90_000;
/** BENCH_TURN_COLD=1: no warm-up run and no connections opened before the clock starts. */
const COLD = process.env.BENCH_TURN_COLD === "1";
/** BENCH_TURN_SCRIPTED_ONLY=1: standalone, only the rooms run (no round-trip figures). */
const SCRIPTED_ONLY = process.env.BENCH_TURN_SCRIPTED_ONLY === "1";
const PAIR = ["a", "b"] as const;

interface Answer {
  status: number;
  body: any;
}

/**
 * A small JSON client on node:http with keep-alive sockets (lighter than fetch, so the load
 * generator, which shares the two cores with the server, takes less of them).
 */
function client(base: string) {
  const { hostname, port } = new URL(base);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024 });
  const call = (method: string, url: string, body?: unknown) =>
    new Promise<Answer>((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = http.request(
        { host: hostname, port, path: url, method, agent, headers: data === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(data) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              /* not JSON: keep the text */
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(data);
    });
  return {
    get: (url: string) => call("GET", url),
    post: (url: string, body: unknown = {}) => call("POST", url, body),
    close: () => agent.destroy(),
  };
}
type Client = ReturnType<typeof client>;

async function ok(answer: Promise<Answer>, what: string): Promise<any> {
  const a = await answer;
  if (a.status < 200 || a.status >= 300) throw new Error(`${what}: ${a.status} ${JSON.stringify(a.body).slice(0, 300)}`);
  return a.body;
}

const turnsRoomBody = (maxRounds: number) => ({ mode: "turns", turns: { participants: [...PAIR], max_rounds: maxRounds } });

const ms = (x: number) => `${x.toFixed(1)} ms`;

/**
 * CPU time (user + system) a process has used so far, in ms (Linux /proc, load.ts's cpuSeconds);
 * with `mainThread`, only its main thread's (the JavaScript, without GC helpers and the WAL worker).
 */
const cpuMsOf = (pid: number, mainThread = false) => cpuSeconds(pid, mainThread) * 1000;
const ownCpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const sleep = (t: number) => new Promise((r) => setTimeout(r, t));

/**
 * One agent pair, one turn at a time: the assigned agent claims the open turn and replies
 * "continue"; the reply names the next turn (the other agent's), claimed at once. Timed from
 * sending the claim to holding the reply's answer. Rooms of 200 rounds, a new one when one ends.
 */
async function httpRoundTrip(api: Client, report: Report): Promise<void> {
  const times: number[] = [];
  let n = 0;
  while (times.length < TRIPS) {
    const room = (await ok(api.post("/api/rooms", turnsRoomBody(200)), "create room")).uuid as string;
    let turn = (await ok(api.get(`/api/rooms/${room}/turns/current`), "current turn")).current;
    while (turn && times.length < TRIPS) {
      const t0 = performance.now();
      const claim = await ok(api.post(`/api/rooms/${room}/turns/${turn.id}/claim`, { agent_id: turn.agent_id }), "claim");
      const reply = await ok(
        api.post(`/api/rooms/${room}/turns/${turn.id}/reply`, { agent_id: turn.agent_id, lease_token: claim.lease_token, text: `round trip ${n}`, result: "continue" }),
        "reply",
      );
      if (n++ >= WARMUP) times.push(performance.now() - t0);
      turn = reply.next;
    }
  }
  const total = times.reduce((a, b) => a + b, 0) / 1000;
  report(`claim + reply round trip over HTTP, 1 agent pair, ${TRIPS.toLocaleString("en")} turns`, `p50 ${ms(percentile(times, 50))}, p99 ${ms(percentile(times, 99))}, ${Math.round(TRIPS / total).toLocaleString("en")} round trips/s`);
}

/** The same claim + reply through the service functions, without HTTP: the local limit. */
async function inProcessRoundTrip(report: Report): Promise<void> {
  const local = inProcessServices("parley-bench-turns-local-");
  try {
    const { svc } = local;
    const caller = { ip: "local", origin: "http://localhost" };
    const claimTimes: number[] = [];
    const replyTimes: number[] = [];
    const times: number[] = [];
    let n = 0;
    while (times.length < TRIPS) {
      const room = (await createRoom(svc, caller, createRoomBody.parse(turnsRoomBody(200)))).uuid;
      let turn = (await currentTurn(svc, room)).current;
      while (turn && times.length < TRIPS) {
        const t0 = performance.now();
        const claim = await claimTurn(svc, room, String(turn.id), { agent_id: turn.agent_id });
        const t1 = performance.now();
        const reply = await replyTurn(svc, caller, room, String(turn.id), { agent_id: turn.agent_id, lease_token: claim.lease_token, text: `round trip ${n}`, result: "continue" });
        const t2 = performance.now();
        if (n++ >= WARMUP) {
          times.push(t2 - t0);
          claimTimes.push(t1 - t0);
          replyTimes.push(t2 - t1);
        }
        turn = reply.next;
      }
    }
    const total = times.reduce((a, b) => a + b, 0) / 1000;
    report(
      "claimTurn + replyTurn in-process (no HTTP): local limit",
      `p50 ${ms(percentile(times, 50))} (claim ${ms(percentile(claimTimes, 50))}, reply ${ms(percentile(replyTimes, 50))}), p99 ${ms(percentile(times, 99))}, ${Math.round(TRIPS / total).toLocaleString("en")} round trips/s`,
    );
  } finally {
    await local.close();
  }
}

/**
 * Opens `count` keep-alive connections before the clock starts. Node (libuv ≥ 1.45) accepts one
 * connection per event-loop iteration, so 200 agents connecting at once to a server already busy
 * with the first rooms' turns wait in the listen queue for seconds (tens of seconds measured here);
 * BENCH_TURN_COLD=1 skips this to see it.
 */
async function openConnections(api: Client, count: number): Promise<void> {
  await Promise.all(Array.from({ length: count }, () => ok(api.get("/health"), "health")));
}

/**
 * ROOMS rooms × 2 agents, all loops at once, until each room is no longer active (blocked by
 * max_rounds after ROUNDS rounds). How an agent takes its turns (BENCH_TURN_LOOP):
 * - "reply-next" (the default, one request a turn): POST turns/mine {wait: 30, claim: true} for
 *   the first turn, then each reply carries my_next {wait: 30, claim: true}, and its answer is the
 *   agent's next turn, claimed;
 * - "mine-claim" (two): POST turns/mine {wait: 30, claim: true}, then the reply;
 * - "separate-claim" (three): POST turns/mine {wait: 30}, POST …/claim, then the reply.
 * Turn latency (the figure judged), by this client's clock: from the agent sending its reply until
 * the turn that follows is in its agent's hands (or the reply that ended the room is answered):
 * what the conversation waits on the server for at each turn. With agents that answer at once, a
 * room's turns tile its time (printed: their sum over the rooms' time, about 100 %).
 * Also printed, the measure of the sixth and seventh rounds: from the turn's opening on the server
 * (its `opened_at`, the time of the group-commit transaction of the reply before it, which began
 * before that reply was written) until the turn after it is handed over. It spans the turn's own
 * handing over too, so consecutive turns overlap (their sum is about 1.5 × the rooms' time).
 */
export interface TurnFigures {
  /** Turn latency (reply sent → the next turn handed over), ms. */
  p50: number;
  p99: number;
  /** The overlapping measure (opened on the server → the next turn handed over), ms. */
  openedP50: number;
  openedP99: number;
  turns: number;
  expected: number;
  errors: number;
  wallSeconds: number;
  /** The server's main thread during the run, in cores: busy, and waiting for a core (NaN without a server process); the machine's cores busy. */
  serverMain: number;
  serverWaiting: number;
  machine: number;
  /** Each measured run's p99 (the figure is the median run's), ms. */
  runsP99?: number[];
}

type Loop = "reply-next" | "mine-claim" | "separate-claim";
const LOOPS: Record<Loop, number> = { "reply-next": 1, "mine-claim": 2, "separate-claim": 3 };
const LOOP = (process.env.BENCH_TURN_LOOP ?? "reply-next") as Loop;
if (!(LOOP in LOOPS)) throw new Error(`BENCH_TURN_LOOP: one of ${Object.keys(LOOPS).join(", ")}`);
const MY_NEXT = { wait: 30, claim: true };
/** What the agents read of a turn handed to them. */
type HandedTurn = { id: number; round: number; opened_at: string };

async function scriptedRooms(api: Client, report: Report, label = "", serverPid?: number): Promise<TurnFigures> {
  const rooms: string[] = [];
  for (let i = 0; i < ROOMS; i += 20) {
    const batch = await Promise.all(Array.from({ length: Math.min(20, ROOMS - i) }, () => ok(api.post("/api/rooms", turnsRoomBody(ROUNDS)), "create room")));
    rooms.push(...batch.map((r) => r.uuid as string));
  }
  if (!COLD) await openConnections(api, ROOMS * PAIR.length + 20);
  const latencies: number[] = [];
  const fromOpened: number[] = [];
  const requestTimes: number[] = [];
  const errors = new Map<string, number>();
  const fail = (what: string) => errors.set(what, (errors.get(what) ?? 0) + 1);
  let requests = 0;
  const timed = async (p: Promise<Answer>) => {
    const t0 = performance.now();
    const a = await p;
    requestTimes.push(performance.now() - t0);
    requests++;
    return a;
  };

  const startWall = Date.now();
  // Each room's open turn, by when it opened; its reply, by when it was sent; the room's time, from
  // its first turn handed over to its last.
  const openedAt = new Map(rooms.map((room) => [room, { id: 0, at: startWall }]));
  const replySent = new Map<string, { id: number; at: number }>();
  const span = new Map<string, { from: number; to: number }>();
  const handedOver = (room: string, turn?: HandedTurn) => {
    const open = openedAt.get(room)!;
    if (turn && turn.id <= open.id) return; // the same turn again
    const now = Date.now();
    const sent = replySent.get(room);
    if (open.id !== 0 && sent?.id === open.id) {
      latencies.push(now - sent.at);
      fromOpened.push(now - open.at);
    }
    const s = span.get(room);
    if (s) s.to = now;
    else span.set(room, { from: now, to: now });
    if (turn) openedAt.set(room, { id: turn.id, at: Math.max(Date.parse(turn.opened_at), startWall) });
  };
  const serverCpu0 = serverPid === undefined ? 0 : cpuMsOf(serverPid);
  const serverMain0 = serverPid === undefined ? 0 : cpuMsOf(serverPid, true);
  const serverWaited0 = serverPid === undefined ? NaN : runQueueSeconds(serverPid);
  const clientCpu0 = ownCpuMs();
  // This client's own pauses, which hold its agents (and so count as turn latency).
  const gc = { ms: 0, longest: 0 };
  const gcWatch = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gc.ms += e.duration;
      gc.longest = Math.max(gc.longest, e.duration);
    }
  });
  gcWatch.observe({ entryTypes: ["gc"] });
  const signed0 = signatures((await api.get("/metrics")).body as string);
  const machine0 = machineBusySeconds();
  const t0 = performance.now();
  const deadline = t0 + DEADLINE_MS;
  const agentLoop = async (room: string, agent: string): Promise<void> => {
    /** The next turn a reply's my_next handed over, claimed. */
    let held: { turn: HandedTurn; leaseToken: string } | undefined;
    while (performance.now() < deadline) {
      let turn: HandedTurn;
      let leaseToken: string | undefined;
      try {
        if (held) {
          ({ turn, leaseToken } = held);
          held = undefined;
        } else {
          const mine = await timed(api.post(`/api/rooms/${room}/turns/mine`, { agent_id: agent, wait: 30, claim: LOOP !== "separate-claim" }));
          if (mine.status !== 200) {
            fail(`my_turn ${mine.status} ${mine.body?.code ?? ""}`);
            continue;
          }
          if (!mine.body.turn) {
            if (mine.body.room_status !== "active") return;
            continue; // the wait ran out: ask again
          }
          turn = mine.body.turn;
          leaseToken = mine.body.lease_token;
          if (LOOP === "separate-claim") {
            const claim = await timed(api.post(`/api/rooms/${room}/turns/${turn.id}/claim`, { agent_id: agent }));
            if (claim.status !== 200) {
              fail(`claim ${claim.status} ${claim.body?.code ?? ""}`);
              continue;
            }
            leaseToken = claim.body.lease_token;
          } else if (!leaseToken) {
            fail("my_turn answered a turn without claiming it");
            continue;
          }
          handedOver(room, turn);
        }
        replySent.set(room, { id: turn.id, at: Date.now() });
        const body = { agent_id: agent, lease_token: leaseToken, text: `${agent}: round ${turn.round}`, result: "continue", ...(LOOP === "reply-next" ? { my_next: MY_NEXT } : {}) };
        const reply = await timed(api.post(`/api/rooms/${room}/turns/${turn.id}/reply`, body));
        if (reply.status !== 200) {
          fail(`reply ${reply.status} ${reply.body?.code ?? ""}`);
          continue;
        }
        if (reply.body.room_status !== "active") return handedOver(room);
        const next = reply.body.my_next;
        if (next?.turn && next.lease_token) {
          held = { turn: next.turn, leaseToken: next.lease_token };
          handedOver(room, next.turn);
        } else if (next && next.room_status !== "active") return;
      } catch (err) {
        fail(`${(err as Error).message}`);
        await sleep(100); // the server may be gone: do not spin until the deadline
      }
    }
    fail("deadline reached");
  };
  await Promise.all(rooms.flatMap((room) => PAIR.map((agent) => agentLoop(room, agent))));
  const wall = (performance.now() - t0) / 1000;
  const serverCpu = serverPid === undefined ? NaN : cpuMsOf(serverPid) - serverCpu0;
  const serverMain = serverPid === undefined ? NaN : cpuMsOf(serverPid, true) - serverMain0;
  const serverWaited = serverPid === undefined ? NaN : runQueueSeconds(serverPid) - serverWaited0;
  const clientCpu = ownCpuMs() - clientCpu0;
  gcWatch.disconnect();
  const machine = (machineBusySeconds() - machine0) / wall;
  const signed1 = signatures((await api.get("/metrics")).body as string);

  // Every room must have ended as scripted (blocked by max_rounds after ROUNDS × 2 replies), and
  // its log must verify: events, checkpoints and the replayed turn projections.
  let ended = 0;
  let clean = 0;
  for (const room of rooms) {
    const state = await ok(api.get(`/api/rooms/${room}/turns/current`), "current turn");
    if (state.status === "blocked" && state.reason === "max_rounds" && state.round === ROUNDS) ended++;
    else fail(`room ended ${state.status} (${state.reason}) in round ${state.round}`);
    const verified = await ok(api.post(`/api/rooms/${room}/verify`, {}), "verify");
    if (verified.verdict === "CLEAN") clean++;
    else fail(`verify ${verified.verdict}: ${verified.explanation}`);
  }
  const expected = ROOMS * ROUNDS * PAIR.length;
  const errorCount = [...errors.values()].reduce((a, b) => a + b, 0);

  report(
    `${label}${ROOMS} turns rooms × 2 scripted agents × ${ROUNDS} rounds, concurrently, ${LOOP} (${LOOPS[LOOP]} request${LOOPS[LOOP] > 1 ? "s" : ""} a turn)${COLD ? " (cold: no warm-up, connections not opened first)" : ""}`,
    `wall ${wall.toFixed(1)} s, ${latencies.length.toLocaleString("en")}/${expected.toLocaleString("en")} turns (${Math.round(latencies.length / wall)} turns/s, ${Math.round(requests / wall)} req/s), errors ${errorCount}`,
  );
  const roomTime = [...span.values()].reduce((sum, s) => sum + s.to - s.from, 0);
  const share = (xs: number[]) => `${Math.round((100 * xs.reduce((a, b) => a + b, 0)) / Math.max(1, roomTime))} % of the rooms' time`;
  report("  turn latency (reply sent → the next turn handed over)", `p50 ${percentile(latencies, 50)} ms, p99 ${percentile(latencies, 99)} ms, max ${percentile(latencies, 100)} ms; sum ${share(latencies)}`);
  report("  overlapping: opened on the server → the next turn handed over", `p50 ${percentile(fromOpened, 50)} ms, p99 ${percentile(fromOpened, 99)} ms, max ${percentile(fromOpened, 100)} ms; sum ${share(fromOpened)}`);
  report("  one request under that load (with my_next: until the next turn)", `p50 ${ms(percentile(requestTimes, 50))}, p99 ${ms(percentile(requestTimes, 99))}`);
  const turns = Math.max(1, latencies.length);
  report(
    "  CPU per turn: server (its main thread) / this client (requests per turn)",
    `${(serverCpu / turns).toFixed(2)} ms (${(serverMain / turns).toFixed(2)} ms) / ${(clientCpu / turns).toFixed(2)} ms (${(requests / turns).toFixed(2)}); ` +
      `server ${Math.round(serverCpu / 10 / wall)} % of a core (main thread ${Math.round(serverMain / 10 / wall)} %${Number.isNaN(serverWaited) ? "" : `, and ${Math.round((100 * serverWaited) / wall)} % waiting for a core`}), client ${Math.round(clientCpu / 10 / wall)} %` +
      fmtSigned({ signer: signed1.signer - signed0.signer, main: signed1.main - signed0.main }),
  );
  report("  this client's garbage collector during the run (it holds the agents)", `${Math.round(gc.ms)} ms in all, longest pause ${ms(gc.longest)}`);
  report("  rooms ended blocked (max_rounds) / verified CLEAN", `${ended}/${ROOMS} / ${clean}/${ROOMS}`);
  for (const [what, count] of errors) console.log(`    error × ${count}: ${what}`);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), openedP50: percentile(fromOpened, 50), openedP99: percentile(fromOpened, 99), turns: latencies.length, expected, errors: errorCount, wallSeconds: wall, serverMain: serverMain / 1000 / wall, serverWaiting: serverWaited / wall, machine };
}

/**
 * The scripted rooms' agents, warm-up run and measured run, in a process of their own (forked with
 * an IPC channel, as the delivery readers are), fresh for each server. In the bench process, after
 * the figures before them, their garbage collector paused up to 19 ms in a turns run and 109 ms in
 * all (8–11 ms and 38–49 ms when the turns ran alone); a pause holds all 200 agents at once, and it
 * was counted as the server's turn latency, at the p99.
 */
function scriptedRoomsApart(base: string, serverPid: number | undefined, label: string, report: Report): Promise<TurnFigures> {
  const child = forkClient(import.meta.filename, ["agents", base, String(serverPid ?? ""), label]);
  return new Promise((resolve, reject) => {
    child.on("message", (m: { report?: [string, string]; figures?: TurnFigures }) => {
      if (m.report) report(...m.report);
      if (m.figures) resolve(m.figures);
    });
    child.once("exit", (code, signal) => reject(new Error(`the turn agents' process exited (${signal ?? code}) without its figures`)));
  });
}

/** The forked side of scriptedRoomsApart: reports and figures go back over the IPC channel. */
async function agentsProcess(base: string, serverPid: number | undefined, label: string): Promise<void> {
  const report: Report = (name, value) => void sendToParent({ report: [name, value] });
  const api = client(base);
  try {
    // As every HTTP load of the bench, the rooms are measured on a warm server: the same run once
    // before, on rooms of its own, reported (a server just started answers its first turns at
    // half speed while V8 compiles the hot paths) but not taken as the figure.
    if (!COLD) await scriptedRooms(api, report, `${label}warm-up (first run on the fresh server, not the figure): `, serverPid);
    const runs: TurnFigures[] = [];
    for (let i = 0; i < RUNS; i++) runs.push(await scriptedRooms(api, report, `${label}run ${i + 1} of ${RUNS}: `, serverPid));
    // The median run by p99; the errors of every run count.
    const figure = [...runs].sort((a, b) => a.p99 - b.p99)[Math.floor((RUNS - 1) / 2)]!;
    await sendToParent({ figures: { ...figure, errors: runs.reduce((n, r) => n + r.errors, 0), runsP99: runs.map((r) => r.p99) } });
  } finally {
    api.close();
  }
  process.disconnect();
}

/**
 * The turns figures on a server of their own (`env`: e.g. a PostgreSQL database); with
 * `scriptedOnly`, only the 100-rooms run (the round trips are SQLite-only figures of the old table).
 */
export async function turnFigures(report: Report, opts: { env?: Record<string, string>; label?: string; scriptedOnly?: boolean } = {}): Promise<TurnFigures> {
  const { base, child, close } = await startServerChild({ prefix: "parley-bench-turns-", apiOnly: true, env: opts.env });
  let figures: TurnFigures;
  try {
    if (!opts.scriptedOnly) {
      const api = client(base);
      try {
        await httpRoundTrip(api, report);
      } finally {
        api.close();
      }
    }
    figures = await scriptedRoomsApart(base, child.pid, opts.label ?? "", report);
  } finally {
    await close();
  }
  if (!opts.scriptedOnly) await inProcessRoundTrip(report);
  return figures;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const [mode, base, pid, label] = process.argv.slice(2);
  if (mode === "agents") await agentsProcess(base!, pid ? Number(pid) : undefined, label ?? "");
  else {
    console.log(`Parley turns benchmark — ${new Date().toISOString()} — ${os.cpus().length} cores, Node ${process.version}`);
    await turnFigures((name, value) => console.log(`${name.padEnd(70)} ${value}`), { scriptedOnly: SCRIPTED_ONLY });
  }
}
