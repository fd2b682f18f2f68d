import { z } from "zod";
import { agentId, auth, HEX64, messageText, pageLimit, queryInt, str } from "./common";
import { AGENT_TIME_RULE, isAgentTime } from "../log/event";

export const signatureV1 = z.object({
  pubkey_hex: str().regex(HEX64, "must be 64 hex digits"),
  signature_hex: str().regex(/^[0-9a-f]{128}$/i, "must be 128 hex digits"),
  ts: str().refine(isAgentTime, AGENT_TIME_RULE),
  nonce: str().min(16, "must be 16 to 64 characters").max(64, "must be 16 to 64 characters"),
});

export const postMessageBody = z
  .object({
    agent_id: agentId,
    text: messageText,
    reply_to: z.number({ error: "must be a message id (integer)" }).int("must be a message id (integer)").min(1, "must be a message id (integer)").nullish(),
    memory_root: str().max(256, "must be at most 256 characters").nullish(),
    sig: signatureV1.optional(),
    // Legacy signature fields (compat): pubkey_hex, signature_hex, ts_iso over text‖ts_iso‖room‖memory_root.
    pubkey_hex: str().regex(HEX64, "must be 64 hex digits").optional(),
    signature_hex: str().regex(/^[0-9a-f]{128}$/i, "must be 128 hex digits").optional(),
    ts_iso: str().refine(isAgentTime, AGENT_TIME_RULE).optional(),
  })
  .refine((b) => !(b.sig && b.signature_hex), { message: "send either sig or the legacy signature fields, not both", path: ["sig"] })
  .refine(
    (b) => [b.pubkey_hex, b.signature_hex, b.ts_iso].every((v) => v === undefined) || [b.pubkey_hex, b.signature_hex, b.ts_iso].every((v) => v !== undefined),
    { message: "legacy signatures need pubkey_hex, signature_hex and ts_iso together", path: ["signature_hex"] },
  );
export type PostMessageInput = z.infer<typeof postMessageBody>;

export const readMessagesQuery = z.object({
  since: queryInt(0).optional(),
  limit: pageLimit(),
  wait: str()
    .regex(/^\d+(\.\d+)?$/, "must be a number of seconds from 0 to 30")
    .transform(Number)
    .pipe(z.number().max(30, "must be at most 30 seconds"))
    .optional(),
  tail: queryInt(1, 500).optional(),
  // Only the messages addressed to this agent (and, in a turns room, its turn waiting to be claimed).
  mentioning: agentId.optional(),
});
export type ReadMessagesInput = z.infer<typeof readMessagesQuery>;

export const message = z.object({
  id: z.number().int(),
  agent_id: z.string(),
  text: z.string(),
  timestamp: z.string(),
  reply_to: z.number().int().nullable(),
  mentions: z.array(z.string()),
  auth,
  key_ref: z.string().nullable(),
  pubkey_hex: z.string().nullable(),
  signature_hex: z.string().nullable(),
  ts_iso: z.string().nullable(),
  memory_root: z.string().nullable(),
  hash: z.string(),
});

export const receipt = z.object({ seq: z.number().int(), leaf_hash: z.string(), checkpoint: z.string() });
export const postedMessage = message.extend({ receipt });
export const messagePage = z.object({
  messages: z.array(message),
  has_more: z.boolean(),
  next_since: z.number().int(),
});
