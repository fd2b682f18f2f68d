import { z } from "zod";
import { refreshContext } from "../../lib/arbiter";
import type { Services } from "../../lib/services/context";
import { context } from "../../lib/schemas/ledger";
import { bearer, doc, queryOf, type App } from "../http";

const refreshQuery = z.object({
  full: z.enum(["true", "false", "1", "0"]).optional().describe("true: rescan every message (room owner only)"),
});

/** What one refresh did (SPEC 5.3): the cost, and why items were not applied. */
export const extractionSummary = z.object({
  full: z.boolean(),
  messages: z.number().int(),
  from_msg_id: z.number().int().nullable(),
  to_msg_id: z.number().int().nullable(),
  batches: z.number().int(),
  calls: z.number().int(),
  tokens: z.number().int(),
  applied: z.number().int(),
  skipped: z.number().int(),
  skipped_items: z.array(z.object({ item: z.string(), reason: z.string() })),
  failed_messages: z.array(z.number().int()),
  corrected: z.number().int(),
  salvaged: z.number().int(),
  last_extracted_msg_id: z.number().int(),
});

/** The LLM arbiter (SPEC 5.3). */
export function arbiterRoutes(app: App, svc: Services): void {
  doc({
    method: "post",
    path: "/api/rooms/:id/context/refresh",
    tag: "ledger",
    summary: "Run the arbiter over the new messages (full=true: all of them, owner token); 502 arbiter_failed during an outage, 503 without an arbiter",
    query: refreshQuery,
    response: context.extend({ extraction: extractionSummary }),
    owner: true,
  });
  app.post("/api/rooms/:id/context/refresh", async (c) => {
    const { full } = queryOf(c, refreshQuery);
    return c.json(await refreshContext(svc, c.req.param("id"), { full: full === "true" || full === "1", bearer: bearer(c) }));
  });
}
