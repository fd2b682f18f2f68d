import { z } from "zod";
import { agentId, int, leaseToken, messageText, queryInt, str } from "./common";
import { message, receipt, signatureV1 } from "./messages";
import { TURNS_DEFAULTS, TURNS_LIMITS, turnsConfigProblems } from "../domain/turns";

const limited = (name: string, [min, max]: readonly [number, number]) => int(name, min, max);

/** The `turns` object of POST /api/rooms with mode "turns". */
export const turnsConfigBody = z
  .object({
    participants: z
      .array(agentId, { error: "must be an array of agent_ids" })
      .min(TURNS_LIMITS.participants[0], `must list at least ${TURNS_LIMITS.participants[0]} agents`)
      .max(TURNS_LIMITS.participants[1], `must list at most ${TURNS_LIMITS.participants[1]} agents`),
    first: agentId.optional(),
    max_rounds: limited("a whole number", TURNS_LIMITS.max_rounds).optional().default(TURNS_DEFAULTS.max_rounds),
    turn_timeout_s: limited("a whole number of seconds", TURNS_LIMITS.turn_timeout_s).optional().default(TURNS_DEFAULTS.turn_timeout_s),
    delay_s: limited("a whole number of seconds", TURNS_LIMITS.delay_s).optional().default(TURNS_DEFAULTS.delay_s),
    policy: z.enum(["consensus", "supervisor"], { error: 'must be "consensus" or "supervisor"' }).optional().default(TURNS_DEFAULTS.policy),
    supervisor: agentId.optional(),
    absent_after: limited("a whole number", TURNS_LIMITS.absent_after).optional().default(TURNS_DEFAULTS.absent_after),
  }, { error: (iss) => (iss.code === "invalid_type" ? "must be an object" : undefined) })
  .strict()
  .superRefine((t, ctx) => {
    for (const p of turnsConfigProblems(t)) ctx.addIssue({ code: "custom", message: p.message, path: [p.field] });
  });
export type TurnsConfigInput = z.infer<typeof turnsConfigBody>;

export const turnResult = z.enum(["continue", "complete", "pass", "blocked"], { error: "must be one of continue, complete, pass, blocked" });

export const claimTurnBody = z.object({ agent_id: agentId, sig: signatureV1.optional() });
export type ClaimTurnInput = z.infer<typeof claimTurnBody>;

/** The longest my_turn wait, in seconds. */
export const MY_TURN_MAX_WAIT_S = 30;
const myTurnWait = int("a whole number of seconds", 0, MY_TURN_MAX_WAIT_S);
const claimFlag = z.boolean({ error: "must be true or false" });

/**
 * A reply, and with `my_next` then my_turn for the replying agent's next turn in the same request
 * (`wait`, and `claim` to take it): an agent's loop is one request a turn. Its claim is unsigned,
 * so a signed reply (its agent's key is pinned) cannot ask for one.
 */
export const replyTurnBody = z.object({
  agent_id: agentId,
  lease_token: leaseToken,
  text: messageText,
  result: turnResult,
  sig: signatureV1.optional(),
  my_next: z.object({ wait: myTurnWait.optional(), claim: claimFlag.optional() }, { error: "must be an object" }).strict().optional(),
});
export type ReplyTurnInput = z.infer<typeof replyTurnBody>;

export const skipTurnBody = z.object({ agent_id: agentId.optional(), sig: signatureV1.optional() });
export type SkipTurnInput = z.infer<typeof skipTurnBody>;

export const myTurnQuery = z.object({ agent_id: agentId, wait: queryInt(0, MY_TURN_MAX_WAIT_S).optional() });
export type MyTurnInput = z.infer<typeof myTurnQuery>;
/**
 * POST /turns/mine: my_turn in a body, and with `claim: true` the turn taken in the same request
 * (one round trip instead of two); `sig` signs the claim (`{turn_id}`), so it fits a turn already seen.
 */
export const myTurnBody = z.object({
  agent_id: agentId,
  wait: myTurnWait.optional(),
  claim: claimFlag.optional(),
  sig: signatureV1.optional(),
});
export type MyTurnBody = z.infer<typeof myTurnBody>;

export const cancelTurnsBody = z.object({ reason: str().trim().max(500, "must be at most 500 characters").optional() });
export const raiseRoundsBody = z.object({ max_rounds: limited("a whole number", TURNS_LIMITS.max_rounds) });
export const reinstateBody = z.object({ agent_id: agentId });
export const moderatorNoteBody = z.object({ text: messageText });

// ---- responses ----

const turnStatus = z.enum(["ready", "claimed", "done", "skipped", "cancelled"]);
export const turn = z.object({
  id: z.number().int(),
  round: z.number().int(),
  slot: z.number().int(),
  agent_id: z.string(),
  phase: z.enum(["dialogue", "confirm"]),
  status: turnStatus,
  available_at: z.string(),
  claim_by: z.string(),
  lease_until: z.string().nullable(),
  result: turnResult.nullable(),
  reason: z.string().nullable(),
  message_id: z.number().int().nullable(),
  opened_at: z.string(),
  closed_at: z.string().nullable(),
});

export const turnsState = z.object({
  status: z.enum(["active", "completed", "blocked", "cancelled"]),
  reason: z.string().nullable(),
  round: z.number().int(),
  max_rounds: z.number().int(),
  policy: z.enum(["consensus", "supervisor"]),
  supervisor: z.string().nullable(),
  turn_timeout_s: z.number().int(),
  delay_s: z.number().int(),
  absent_after: z.number().int(),
  participants: z.array(z.object({ agent_id: z.string(), slot: z.number().int(), status: z.enum(["active", "absent"]), timeouts: z.number().int() })),
  proposal: z.object({ by: z.string(), turn_id: z.number().int(), pending: z.array(z.string()), confirmed: z.array(z.string()) }).nullable(),
  current: turn.nullable(),
});

export const turnsOverview = turnsState.extend({ turns: z.array(turn) });
export const myTurn = z.object({
  turn: turn.nullable(),
  input_messages: z.array(message),
  room_status: turnsState.shape.status,
  detail: z.string(),
});
/** my_turn with claim: the turn and, once taken, its lease as claim gives it. */
export const takenTurn = myTurn.extend({ lease_token: z.string().optional(), lease_until: z.string().optional(), receipt: receipt.nullable().optional() });
export const claimedTurn = z.object({ turn, lease_token: z.string(), lease_until: z.string(), input_messages: z.array(message), receipt: receipt.nullable() });
export const repliedTurn = z.object({
  message_id: z.number().int(),
  turn,
  next: turn.nullable(),
  room_status: turnsState.shape.status,
  receipt,
  /** With my_next in the body: my_turn's answer for the replying agent's next turn. */
  my_next: takenTurn.optional(),
});
export const turnsActionResult = turnsState.extend({ receipt: receipt.nullable() });
export const healthAlert = z.object({ type: z.string(), detail: z.string() }).catchall(z.unknown());
export const turnsHealth = z.object({ status: turnsState.shape.status, round: z.number().int(), max_rounds: z.number().int(), current: turn.nullable(), alerts: z.array(healthAlert) });
