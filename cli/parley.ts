/**
 * The `parley` command. `parley verify <bundle.json | room URL> [--checkpoint saved.txt] [--key hex]`
 * checks a room bundle with the shared verifier (no network for a file); `parley tamper-demo`
 * shows each attack of SPEC 4.6 being caught. `--help`, `-h` and `help [command]` print the usage.
 */
import fs from "node:fs";
import { roomIdFromArgument } from "../mcp/room-arg";
import { ed25519VerifyAsync } from "../lib/services/server-key";
import { BUNDLE_FORMAT, type VerifyReport } from "../lib/log/verify";
import { BundleFormatError, verifyBundleStream } from "../lib/log/bundle-stream";
import { parseRoomId } from "../lib/services/access";

const EXIT = { CLEAN: 0, REFUTED: 1, INCONCLUSIVE: 2, USAGE: 3 } as const;
const EXIT_CODES = "exit codes: 0 CLEAN, 1 REFUTED, 2 INCONCLUSIVE, 3 usage or input error (a file that cannot be read, a room that cannot be fetched)";

/** Each command's help: its synopsis line, then what it does and its options. */
const COMMANDS = {
  verify: {
    synopsis: "parley verify <bundle.json | room URL> [--checkpoint saved.txt] [--key <server pubkey hex>] [--json]",
    help: `Checks a room's history with the shared verifier: a bundle file (GET /api/rooms/{id}/export) offline,
or a room URL (its export is fetched). Prints the verdict and what was checked.

options:
  --checkpoint <file>  a checkpoint you kept (any write's receipt.checkpoint): proves the history you saw
                       was not rewritten or cut since
  --key <hex>          the server's Ed25519 public key (64 hex digits) to trust, instead of the bundle's own
  --json               print the whole report as JSON
  -h, --help           this help

${EXIT_CODES}`,
  },
  "tamper-demo": {
    synopsis: "parley tamper-demo",
    help: `Builds demo rooms on temporary databases, performs each attack on the log (SPEC 4.6) and shows the
verifier catching every one. Exit 0 when every attack is detected and the honest room is CLEAN, 1 otherwise.

options:
  -h, --help           this help`,
  },
} as const;
type CommandName = keyof typeof COMMANDS;
const isCommand = (name: string | undefined): name is CommandName => name !== undefined && Object.hasOwn(COMMANDS, name);

const USAGE = `usage:
${Object.values(COMMANDS).map((c) => `  ${c.synopsis}`).join("\n")}
  parley help [command]        (or --help, -h; parley <command> --help)

${EXIT_CODES}`;

const commandHelp = (name: CommandName) => `usage: ${COMMANDS[name].synopsis}\n\n${COMMANDS[name].help}`;
const wantsHelp = (args: string[]) => args.some((a) => a === "--help" || a === "-h");

/** Anything that stops a check before it starts: exit 3, never 1 (REFUTED says the log was tampered with). */
class UsageError extends Error {}

const messageOf = (err: unknown) => (err as { cause?: { message?: string } })?.cause?.message ?? (err instanceof Error ? err.message : String(err));

/** A bundle file a MiB at a time. Read synchronously: the thread pool is left to the Ed25519 checks. */
async function* fileChunks(file: string): AsyncGenerator<Uint8Array> {
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${messageOf(err)}`);
  }
  try {
    const buf = new Uint8Array(1 << 20);
    for (;;) {
      let n: number;
      try {
        n = fs.readSync(fd, buf);
      } catch (err) {
        throw new UsageError(`cannot read ${file}: ${messageOf(err)}`);
      }
      if (n === 0) return;
      yield buf.subarray(0, n); // the verifier copies what it keeps before the next read
    }
  } finally {
    fs.closeSync(fd);
  }
}

/** The bundle's bytes, from a file or a room's export, for the verifier to read as they come. */
async function bundleSource(target: string): Promise<AsyncIterable<Uint8Array>> {
  if (/^https?:\/\//.test(target)) {
    let id: string;
    try {
      id = parseRoomId(roomIdFromArgument(target));
    } catch {
      throw new UsageError(`${target} is not a room URL`);
    }
    const url = `${new URL(target).origin}/api/rooms/${id}/export`;
    const fetchError = (err: unknown) => new UsageError(`could not fetch the room bundle from ${url}: ${messageOf(err)}`);
    let body: AsyncIterable<Uint8Array>;
    try {
      const res = await fetch(url);
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      body = res.body as unknown as AsyncIterable<Uint8Array>;
    } catch (err) {
      throw fetchError(err);
    }
    // A connection lost in the middle of the body is a fetch that failed, not a verdict.
    return (async function* () {
      try {
        yield* body;
      } catch (err) {
        throw fetchError(err);
      }
    })();
  }
  if (!fs.existsSync(target)) throw new UsageError(`no such file: ${target}`);
  return fileChunks(target);
}

function readCheckpoint(file: string | undefined): string {
  if (!file) throw new UsageError("--checkpoint needs a file");
  try {
    return fs.readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(`cannot read the checkpoint file ${file}: ${messageOf(err)}`);
  }
}

function printReport(report: VerifyReport): void {
  const d = report.details;
  console.log(`${report.verdict}: ${report.explanation}`);
  console.log(`  events ${d.events}, prev links ${d.prev_links}, checkpoints ${d.checkpoints}, agent signatures ${d.agent_signatures}` +
    `, projections ${d.projections ? `${d.projections.messages} messages` : "not checked"}` +
    `, kept checkpoint ${d.caller_checkpoint ? `size ${d.caller_checkpoint.size} ${d.caller_checkpoint.consistent ? "consistent" : "NOT consistent"}` : "none"}`);
  console.log(`  head size ${d.head.size}, root ${d.head.root}, server key ${d.server_key.key_name} ${d.server_key.pubkey_hex.slice(0, 16)}…`);
  for (const f of report.failures.slice(0, 20)) console.log(`  ✗ ${f.seq ?? "-"} ${f.type}: ${f.detail}`);
}

async function verifyCommand(args: string[]): Promise<number> {
  let target: string | undefined;
  let checkpoint: string | undefined;
  let key: string | undefined;
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--checkpoint") checkpoint = readCheckpoint(args[++i]);
    else if (a === "--key") key = args[++i] ?? "";
    else if (a === "--json") json = true;
    else if (!target && !a.startsWith("--")) target = a;
    else throw new UsageError(`unknown argument ${a}`);
  }
  if (!target) throw new UsageError("verify needs a bundle file or a room URL");
  if (key !== undefined && !/^[0-9a-f]{64}$/i.test(key)) throw new UsageError("--key must be 64 hex digits");
  // Streamed through the verifier as it is read: a large room is never in memory as text and objects at once.
  let report: VerifyReport;
  try {
    report = await verifyBundleStream(await bundleSource(target), (head) => ({
      verify: ed25519VerifyAsync,
      checkpoint,
      trustedKey: key ? { key_name: head.server_key.key_name, pubkey_hex: key.toLowerCase() } : undefined,
    }));
  } catch (err) {
    if (err instanceof BundleFormatError) throw new UsageError(err.syntax ? `${target} is not JSON` : `${target} is not a ${BUNDLE_FORMAT} file: ${err.message}`);
    throw err;
  }
  if (json) console.log(JSON.stringify(report, null, 2));
  else {
    printReport(report);
    if (!key) console.log("  (the server key was taken from the bundle; pass --key or a kept --checkpoint to pin it)");
  }
  return EXIT[report.verdict];
}

async function tamperDemo(): Promise<number> {
  // Loaded here: the demo builds whole services on SQLite, which help and verify do not need.
  const { ATTACKS, buildDemoRoom } = await import("./tamper");
  const { verifyRoom } = await import("../lib/services/verify");
  let undetected = 0;
  const honest = await buildDemoRoom();
  const clean = await verifyRoom(honest.svc, honest.room, { checkpoint: honest.keptCheckpoint });
  console.log(`honest room: ${clean.verdict}`);
  await honest.close();
  if (clean.verdict !== "CLEAN") undetected++;
  for (const attack of ATTACKS) {
    const demo = await buildDemoRoom();
    attack.run(demo);
    const report = await verifyRoom(demo.svc, demo.room, attack.withKeptCheckpoint ? { checkpoint: demo.keptCheckpoint } : {});
    const caught = report.verdict === "REFUTED";
    if (!caught) undetected++;
    const kinds = [...new Set(report.failures.map((f) => f.type))].join(", ");
    console.log(`(${attack.id}) ${attack.title}\n    → ${report.verdict}${caught ? ` (${kinds})` : " — NOT DETECTED"}; expected to be caught by ${attack.caughtBy}`);
    await demo.close();
  }
  console.log(undetected === 0 ? "Every attack was detected and the honest room is CLEAN." : `${undetected} case(s) went wrong.`);
  return undetected === 0 ? 0 : 1;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined) throw new UsageError("no command");
    if (command === "--help" || command === "-h" || command === "help") {
      const topic = rest.find((a) => !a.startsWith("-"));
      if (topic !== undefined && !isCommand(topic)) throw new UsageError(`no help for ${topic}: unknown command`);
      console.log(topic ? commandHelp(topic) : `parley: check Parley rooms' histories\n\n${USAGE}`);
      return 0;
    }
    if (isCommand(command) && wantsHelp(rest)) {
      console.log(commandHelp(command));
      return 0;
    }
    if (command === "verify") return await verifyCommand(rest);
    if (command === "tamper-demo") return await tamperDemo();
    throw new UsageError(`unknown command ${command}`);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`parley: ${err.message}\n${USAGE}`);
      return EXIT.USAGE;
    }
    // A bundle the verifier cannot even read: still not a verdict.
    console.error(`parley: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return EXIT.USAGE;
  }
}
