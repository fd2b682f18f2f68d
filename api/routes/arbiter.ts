import { z } from "zod";
import { refreshContext } from "../../lib/arbiter";
import type { Services } from "../../lib/services/context";
import { extractionSummary } from "../../lib/schemas/arbiter-summary";
import { context } from "../../lib/schemas/ledger";
import { bearer, doc, queryOf, type App } from "../http";

const refreshQuery = z.object({
  full: z.enum(["true", "false", "1", "0"]).optional().describe("true: rescan every message (room owner only)"),
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
