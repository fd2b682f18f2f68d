export {};
/**
 * A separate OS process that fires concurrent claims at one task:
 * node --import tsx tests/helpers/claimers.ts <base> <room> <task> <agent-prefix> <n>
 * Prints "ready" once loaded, waits for a line on stdin (the go signal), then prints the JSON array
 * of [agent_id, status, code] on a line of its own once every request answered.
 */
const [base, room, task, prefix, n] = process.argv.slice(2);
const agents = Array.from({ length: Number(n) }, (_, i) => `${prefix}-${i}`);
// Say so, then wait for the parent's go signal (a line on stdin) so both processes fire together.
process.stdout.write("ready\n");
await new Promise<void>((resolve) => process.stdin.once("data", () => resolve()));
const results = await Promise.all(
  agents.map(async (agent_id) => {
    const res = await fetch(`${base}/api/rooms/${room}/tasks/${task}/claim`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ agent_id, lease_s: 600 }),
    });
    const body = (await res.json()) as { code?: string };
    return [agent_id, res.status, body.code ?? null];
  }),
);
process.stdout.write(`${JSON.stringify(results)}\n`);
process.stdin.destroy();
