import { z } from "zod";
import { agentId, str } from "../schemas/common";
import { eventPatternProblem } from "./filter";
import { MAX_URL_LENGTH } from "./ssrf";

export const MAX_EVENT_PATTERNS = 50;

export const registerWebhookBody = z
  .object({
    url: str("must be the URL that receives the deliveries, such as https://example.com/hooks/parley")
      .trim()
      .min(1, "must not be empty")
      .max(MAX_URL_LENGTH, `must be at most ${MAX_URL_LENGTH} characters`)
      .refine((u) => URL.canParse(u), "must be an absolute http(s) URL such as https://example.com/hooks/parley"),
    kind: z.enum(["events", "alerts"], { error: 'must be "events" (the room\'s events) or "alerts" (the owner\'s alerts; owner token)' }).optional().default("events"),
    events: z
      .array(str("must be an event type such as message.posted, or a family such as task.*"), { error: "must be a list of event types" })
      .min(1, "must name at least one event type; leave it out for every event")
      .max(MAX_EVENT_PATTERNS, `must name at most ${MAX_EVENT_PATTERNS} event types`)
      .superRefine((list, ctx) => {
        for (const [i, pattern] of list.entries()) {
          const problem = eventPatternProblem(pattern);
          if (problem) ctx.addIssue({ code: "custom", message: problem, path: [i] });
        }
      })
      .transform((list) => [...new Set(list)])
      .optional(),
    format: z.enum(["json", "slack"], { error: 'must be "json" or "slack"' }).optional().default("json"),
    mentioning: agentId.optional(),
  })
  .refine((b) => b.kind === "events" || b.events === undefined, { message: 'is for kind "events"; an alerts webhook gets the owner\'s alerts', path: ["events"] })
  .refine((b) => b.kind === "events" || b.mentioning === undefined, { message: 'is for kind "events"; an alerts webhook gets the owner\'s alerts', path: ["mentioning"] });
export type RegisterWebhookInput = z.infer<typeof registerWebhookBody>;

const webhookFields = {
  id: z.string(),
  room: z.string(),
  kind: z.enum(["events", "alerts"]),
  url: z.string(),
  events: z.array(z.string()).nullable(),
  format: z.enum(["json", "slack"]),
  mentioning: z.string().nullable(),
  created_at: z.string(),
};

export const registeredWebhook = z.object({ ...webhookFields, secret: z.string() });

const deliveryStatus = z.enum(["pending", "retrying", "delivered", "dead"]);

export const deliveryView = z.object({
  id: z.string(),
  event: z.string(),
  seq: z.number().int().nullable(),
  status: deliveryStatus,
  attempts: z.number().int(),
  last_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  next_attempt_at: z.string().nullable(),
  created_at: z.string(),
  delivered_at: z.string().nullable(),
});

export const webhookView = z.object({
  ...webhookFields,
  status: z.enum(["active", "disabled"]),
  disabled_at: z.string().nullable(),
  disabled_reason: z.string().nullable(),
  consecutive_dead: z.number().int(),
  counts: z.object({ pending: z.number().int(), retrying: z.number().int(), delivered: z.number().int(), dead: z.number().int() }),
  deliveries: z.array(deliveryView),
});

export const webhookList = z.object({ webhooks: z.array(webhookView.omit({ deliveries: true })) });
