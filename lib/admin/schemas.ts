// The admin API's inputs (/api/admin/*); the console's forms carry the same fields.
import { z } from "zod";
import { pageLimit, queryInt, str } from "../schemas/common";

/** An optional sentence: trimmed, 0 to 500 characters; empty means none. */
const note = str()
  .trim()
  .max(500, "must be at most 500 characters")
  .optional()
  .transform((s) => (s ? s : undefined));

export const adminRoomsQuery = z.object({
  q: str().trim().max(200, "must be at most 200 characters").optional().transform((s) => (s ? s : undefined)),
  sort: z.enum(["active", "new", "messages", "events", "agents", "status"], { error: "must be one of active, new, messages, events, agents, status" }).optional().default("active"),
  status: z.enum(["open", "closed"], { error: "must be open or closed" }).optional(),
  visibility: z.enum(["public", "private", "hidden"], { error: "must be public, private or hidden" }).optional(),
  limit: pageLimit(200, 50),
  offset: queryInt(0).optional().default(0),
});
export type AdminRoomsQuery = z.infer<typeof adminRoomsQuery>;

export const reportsQuery = z.object({
  status: z.enum(["open", "resolved"], { error: "must be open or resolved" }).optional(),
  limit: pageLimit(200, 50),
  offset: queryInt(0).optional().default(0),
});

export const auditQuery = z.object({ limit: pageLimit(500, 100) });

/** Close, reopen, hide, unhide, delete: the reason is optional, and logged (except a deletion's, which the audit keeps). */
export const actionBody = z.object({ reason: note });

export const resolveBody = z.object({ resolution: note });

/** The console's login form. */
export const loginForm = z.object({ token: z.string().max(1000) });
