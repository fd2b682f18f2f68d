import { z } from "zod";
import { agentId, auth, CONTROL, hex64, int, leaseToken, nonEmpty, text } from "./common";
import { receipt, signatureV1 } from "./messages";
import { TASK_STATUSES } from "../domain/tasks";

const capability = nonEmpty(40).refine((s) => !CONTROL.test(s), "must not contain control characters");
const capabilities = (max: number) =>
  z.array(capability, { error: "must be an array of capability names" }).max(max, `must list at most ${max} capabilities`);
const baseRevision = int("a whole number", 1, Number.MAX_SAFE_INTEGER).optional();
const leaseS = int("a whole number of seconds", 30, 3600).optional();

/** POST /api/rooms/{id}/agents: join the board or refresh (heartbeat). */
export const joinBoardBody = z.object({ agent_id: agentId, capabilities: capabilities(20), sig: signatureV1.optional() });
export type JoinBoardInput = z.infer<typeof joinBoardBody>;

export const createTaskBody = z.object({
  agent_id: agentId,
  title: nonEmpty(200),
  description: text(5000).optional(),
  requires: capabilities(10).optional(),
  priority: int("a whole number", 0, 9).optional(),
  max_failures: int("a whole number", 1, 20).optional(),
  reviewer: agentId.optional(),
  context_refs: z.array(nonEmpty(500), { error: "must be an array of strings" }).max(20, "must list at most 20 references").optional(),
  sig: signatureV1.optional(),
});
export type CreateTaskInput = z.infer<typeof createTaskBody>;

export const claimTaskBody = z.object({ agent_id: agentId, lease_s: leaseS, base_revision: baseRevision, sig: signatureV1.optional() });
export type ClaimTaskInput = z.infer<typeof claimTaskBody>;
export const claimNextBody = z.object({ agent_id: agentId, lease_s: leaseS, sig: signatureV1.optional() });
export type ClaimNextInput = z.infer<typeof claimNextBody>;

const leased = { agent_id: agentId, lease_token: leaseToken, base_revision: baseRevision, sig: signatureV1.optional() };
export const heartbeatTaskBody = z.object({ ...leased, lease_s: leaseS, progress: text(1000).optional() });
export const releaseTaskBody = z.object(leased);
export const failTaskBody = z.object({ ...leased, reason: nonEmpty(1000) });
export const handoffTaskBody = z
  .object({ ...leased, to_agent: agentId.optional(), to_capability: capability.optional(), note: text(1000).optional(), window_s: int("a whole number of seconds", 0, 3600).optional() })
  .refine((b) => (b.to_agent === undefined) !== (b.to_capability === undefined), { message: "name either to_agent or to_capability", path: ["to_agent"] });
export const artifact = z.object({
  type: z.enum(["url", "commit", "pr", "file", "text", "hash"], { error: "must be one of url, commit, pr, file, text, hash" }),
  ref: nonEmpty(5000),
  sha256: hex64.optional(),
  note: text(500).optional(),
});
export const submitTaskBody = z.object({
  ...leased,
  status: z.enum(["completed", "partial", "failed"], { error: "must be one of completed, partial, failed" }),
  summary: text(5000).optional(),
  artifacts: z.array(artifact, { error: "must be an array of artifacts" }).max(50, "must list at most 50 artifacts").optional(),
  duration_s: z.number({ error: "must be a number of seconds" }).min(0, "must not be negative").max(31_536_000).optional(),
});
export type HeartbeatTaskInput = z.infer<typeof heartbeatTaskBody>;
export type ReleaseTaskInput = z.infer<typeof releaseTaskBody>;
export type FailTaskInput = z.infer<typeof failTaskBody>;
export type HandoffTaskInput = z.infer<typeof handoffTaskBody>;
export type SubmitTaskInput = z.infer<typeof submitTaskBody>;

export const reviewTaskBody = z.object({
  agent_id: agentId.optional(),
  decision: z.enum(["accept", "reject", "needs_fix"], { error: "must be one of accept, reject, needs_fix" }),
  note: text(2000).optional(),
  base_revision: baseRevision,
  sig: signatureV1.optional(),
});
export type ReviewTaskInput = z.infer<typeof reviewTaskBody>;
export const cancelTaskBody = z.object({ agent_id: agentId.optional(), reason: text(1000).optional(), base_revision: baseRevision, sig: signatureV1.optional() });
export type CancelTaskInput = z.infer<typeof cancelTaskBody>;

export const taskListQuery = z.object({ status: z.enum(TASK_STATUSES as [string, ...string[]], { error: `must be one of ${TASK_STATUSES.join(", ")}` }).optional() });

const handoff = z.object({ from: z.string(), to_agent: z.string().nullable(), to_capability: z.string().nullable(), note: z.string(), until: z.string() });
export const task = z.object({
  id: z.number().int(),
  title: z.string(),
  description: z.string(),
  requires: z.array(z.string()),
  priority: z.number().int(),
  status: z.enum(TASK_STATUSES as [string, ...string[]]),
  created_by: z.string(),
  reviewer: z.string().nullable(),
  context_refs: z.array(z.string()),
  claimant: z.string().nullable(),
  claimant_key: z.string().nullable(),
  lease_until: z.string().nullable(),
  attempt: z.number().int(),
  failures: z.number().int(),
  max_failures: z.number().int(),
  failure_reasons: z.array(z.string()),
  handoff: handoff.nullable(),
  receipt: z.object({
    status: z.enum(["completed", "partial", "failed"]), summary: z.string(), artifacts: z.array(artifact.extend({ verified: z.boolean().optional() })),
    duration_s: z.number().nullable(), submitted_by: z.string(), submitted_at: z.string(), seq: z.number().int(),
  }).nullable(),
  review: z.object({ decision: z.enum(["accept", "reject", "needs_fix"]), note: z.string(), reviewer: z.string(), reviewed_at: z.string(), seq: z.number().int() }).nullable(),
  revision: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});
export const taskEvent = z.object({ seq: z.number().int(), ts: z.string(), type: z.string(), actor: z.string(), payload: z.record(z.string(), z.unknown()), server: z.record(z.string(), z.unknown()) });
export const taskWithHistory = task.extend({ history: z.array(taskEvent) });
export const taskResult = z.object({ task, receipt });
export const claimResult = z.object({ task: task.nullable(), lease_token: z.string().optional(), receipt: receipt.optional() });
export const boardAgent = z.object({
  agent_id: z.string(), capabilities: z.array(z.string()), auth, key_ref: z.string().nullable(),
  last_seen: z.string(), status: z.enum(["online", "away", "lost"]),
});
