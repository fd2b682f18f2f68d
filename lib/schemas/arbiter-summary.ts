import { z } from "zod";

/** What one arbiter run did (SPEC 5.3): the cost, and why items were not applied. */
export const extractionSummary = z.object({
  full: z.boolean(),
  /** Messages read in this run (after the watermark, or all for a full rescan). */
  messages: z.number().int(),
  from_msg_id: z.number().int().nullable(),
  to_msg_id: z.number().int().nullable(),
  /** Batches whose answer was applied. */
  batches: z.number().int(),
  calls: z.number().int(),
  tokens: z.number().int(),
  applied: z.number().int(),
  skipped: z.number().int(),
  /** Why items were not applied (at most 50 listed). */
  skipped_items: z.array(z.object({ item: z.string(), reason: z.string() })),
  /** Messages that kept failing and were skipped (recorded as arbiter.failed). */
  failed_messages: z.array(z.number().int()),
  /** Answers fixed by the corrective retry, and answers repaired after being cut short. */
  corrected: z.number().int(),
  salvaged: z.number().int(),
  /** The room's watermark after the run. */
  last_extracted_msg_id: z.number().int(),
});
export type ExtractionSummary = z.infer<typeof extractionSummary>;
