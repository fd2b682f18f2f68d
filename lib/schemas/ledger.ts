import { z } from "zod";
import { agentId, auth, hex64, nonEmpty, str } from "./common";
import { signatureV1 } from "./messages";


const sourceMsgId = z.number({ error: "must be a message id (integer)" }).int("must be a message id (integer)").min(1, "must be a message id (integer)");
const quote = str().max(300, "must be at most 300 characters");

/** POST /claims (compat name for threads). */
export const openThreadBody = z.object({
  subject: nonEmpty(200),
  value: nonEmpty(500),
  opened_by: agentId,
  subject_key: str().max(200, "must be at most 200 characters").optional(),
  source_msg_id: sourceMsgId.optional(),
  quote: quote.optional(),
  sig: signatureV1.optional(),
});
export type OpenThreadInput = z.infer<typeof openThreadBody>;

export const reviseThreadBody = z
  .object({
    agent_id: agentId,
    kind: z.enum(["update", "confirm", "contradict", "retract"], { error: "must be one of update, confirm, contradict, retract" }),
    value: nonEmpty(500).optional(),
    source_msg_id: sourceMsgId.optional(),
    quote: quote.optional(),
    sig: signatureV1.optional(),
  })
  .refine((b) => b.kind !== "update" || b.value !== undefined, { message: "an update needs the new value", path: ["value"] });
export type ReviseThreadInput = z.infer<typeof reviseThreadBody>;

export const handshakeBody = z.object({
  agent_id: agentId,
  context_hash: hex64,
  sig: signatureV1.optional(),
});
export type HandshakeInput = z.infer<typeof handshakeBody>;

export const resolveBody = z.object({ agent_id: agentId.optional(), sig: signatureV1.optional() });
export type ResolveInput = z.infer<typeof resolveBody>;

export const revision = z.object({
  id: z.number().int(),
  thread_id: z.number().int(),
  kind: z.enum(["propose", "update", "confirm", "contradict", "retract"]),
  value: z.string(),
  author_agent_id: z.string(),
  auth,
  via: z.enum(["api", "arbiter"]),
  source_msg_id: z.number().int().nullable(),
  quote: z.string().nullable(),
  created_at: z.string(),
  seq: z.number().int(),
});
export const thread = z.object({
  id: z.number().int(),
  subject: z.string(),
  subject_key: z.string(),
  current_value: z.string(),
  status: z.enum(["proposed", "agreed", "disputed", "cancelled"]),
  opened_by: z.string(),
  opened_by_auth: auth,
  revisions_count: z.number().int(),
  last_revision: revision,
  confirmations: z.array(z.object({ agent_id: z.string(), auth })),
  created_at: z.string(),
  updated_at: z.string(),
});
export const threadWithRevisions = thread.extend({ revisions: z.array(revision) });
export const discrepancy = z.object({
  id: z.number().int(),
  thread_id: z.number().int().nullable(),
  description: z.string(),
  severity: z.enum(["low", "medium", "high"]),
  source_msg_id: z.number().int().nullable(),
  recorded_by: z.string(),
  status: z.enum(["open", "resolved"]),
  resolved_by: z.string().nullable(),
  created_at: z.string(),
  resolved_at: z.string().nullable(),
});
export const seal = z.object({ context_hash: z.string(), agents: z.array(z.string()) }).nullable();
export const context = z.object({
  room_uuid: z.string(),
  protocol_mode: z.enum(["standard", "premium"]),
  threads: z.array(thread),
  discrepancies: z.array(discrepancy),
  context_hash: z.string(),
  sealed: seal,
  agree_quorum: z.number().int(),
  last_extracted_msg_id: z.number().int(),
  arbiter_active: z.boolean(),
  last_extraction_error: z.string().nullable(),
});
export const handshake = z.object({
  id: z.number().int(),
  agent_id: z.string(),
  context_hash: z.string(),
  auth,
  pubkey_hex: z.string().nullable(),
  signature_hex: z.string().nullable(),
  ts: z.string().nullable(),
  nonce: z.string().nullable(),
  created_at: z.string(),
  signature_valid: z.boolean(),
});
