import { z } from "zod";
import { clipStorable } from "./common";

/** Model output is clamped to the ledger's limits and to what the log can hold, rather than refused. */
const clamp = (max: number) => z.string().transform((s) => clipStorable(s.trim(), max));
const msgId = z.coerce.number().int().min(1);

/** What the arbiter model must answer (SPEC 5.3); missing arrays mean empty. */
export const arbiterOutput = z.object({
  threads: z
    .array(z.object({ subject: clamp(200).pipe(z.string().min(1)), subject_key: clamp(60).optional(), value: clamp(500).pipe(z.string().min(1)), source_msg_id: msgId, quote: clamp(300).default("") }))
    .default([]),
  revisions: z
    .array(
      z.object({
        thread_id: z.coerce.number().int().min(1),
        kind: z.enum(["update", "confirm", "contradict", "retract"]),
        value: clamp(500).optional(),
        source_msg_id: msgId,
        quote: clamp(300).default(""),
      }),
    )
    .default([]),
  discrepancies: z
    .array(
      z.object({
        description: clamp(500).pipe(z.string().min(1)),
        severity: z.enum(["low", "medium", "high"]).catch("medium"),
        thread_id: z.coerce.number().int().min(1).optional(),
        source_msg_id: msgId,
      }),
    )
    .default([]),
});
export type ArbiterOutput = z.infer<typeof arbiterOutput>;
