export {};
/**
 * A separate OS process that races claims on turns:
 * node --import tsx tests/helpers/turn-claimers.ts <base> <room> <n>
 * Prints "ready", then for every line "<turn_id> <agent_id>" on stdin fires n concurrent claims of
 * that turn as that agent and prints the JSON array of [status, lease_token | code] on a line.
 */
import readline from "node:readline";

const [base, room, n] = process.argv.slice(2);
process.stdout.write("ready\n");
for await (const line of readline.createInterface({ input: process.stdin })) {
  const [turn, agent_id] = line.trim().split(" ");
  if (!turn) continue;
  const results = await Promise.all(
    Array.from({ length: Number(n) }, async () => {
      const res = await fetch(`${base}/api/rooms/${room}/turns/${turn}/claim`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ agent_id }),
      });
      const body = (await res.json()) as { lease_token?: string; code?: string };
      return [res.status, body.lease_token ?? body.code ?? null];
    }),
  );
  process.stdout.write(`${JSON.stringify(results)}\n`);
}
