import { z } from "zod";
import { queryInt, str } from "./common";

export const verifyBody = z.object({
  checkpoint: str("must be the text of a signed checkpoint").max(8192, "must be at most 8192 characters").optional(),
});

export const inclusionQuery = z.object({ seq: queryInt(1), size: queryInt(1).optional() });
export const consistencyQuery = z.object({ from: queryInt(1), to: queryInt(1).optional() });

export const verifyReport = z.object({
  verdict: z.enum(["CLEAN", "REFUTED", "INCONCLUSIVE"]),
  explanation: z.string(),
  details: z.record(z.string(), z.unknown()),
  failures: z.array(z.object({ seq: z.number().int().nullable(), type: z.string(), detail: z.string() })),
});

export const inclusionProof = z.object({
  seq: z.number().int(),
  size: z.number().int(),
  leaf_index: z.number().int(),
  leaf_hash: z.string(),
  proof: z.array(z.string()),
  root: z.string(),
  /** The checkpoint signed at `size`; null for a size inside a committed batch (none was signed there). */
  checkpoint: z.string().nullable(),
});

export const consistencyProof = z.object({
  from: z.number().int(),
  to: z.number().int(),
  proof: z.array(z.string()),
  from_root: z.string(),
  to_root: z.string(),
});
