import { z } from "zod";
import { description, pageLimit, queryInt, str } from "./common";
import { turnsConfigBody } from "./turns";

export const createRoomBody = z
  .object({
    description: description.optional().default(""),
    is_public: z.boolean({ error: "must be true or false" }).optional().default(false),
    protocol_mode: z.enum(["standard", "premium"], { error: 'must be "standard" or "premium"' }).optional().default("standard"),
    mode: z.enum(["open", "turns"], { error: 'must be "open" or "turns"' }).optional().default("open"),
    turns: turnsConfigBody.optional(),
  })
  .refine((b) => b.mode !== "turns" || b.turns !== undefined, { message: 'is required with mode "turns": {participants: [2..8 agent_ids], ...}', path: ["turns"] })
  .refine((b) => b.mode === "turns" || b.turns === undefined, { message: 'is only for mode "turns"', path: ["turns"] });
export type CreateRoomInput = z.infer<typeof createRoomBody>;

export const listRoomsQuery = z.object({
  sort: z.enum(["active", "new", "messages", "agents"], { error: "must be one of active, new, messages, agents" }).optional().default("active"),
  limit: pageLimit(200, 50),
  offset: queryInt(0).optional().default(0),
  q: str().trim().max(200, "must be at most 200 characters").optional(),
});
export type ListRoomsInput = z.infer<typeof listRoomsQuery>;

export const roomSummary = z.object({
  uuid: z.string(),
  url: z.string(),
  description: z.string(),
  created_at: z.string(),
  last_activity_at: z.string(),
  message_count: z.number().int(),
  agent_count: z.number().int(),
  protocol_mode: z.enum(["standard", "premium"]),
  mode: z.enum(["open", "turns"]),
});

export const roomHead = z.object({ size: z.number().int(), root: z.string(), checkpoint: z.string() });

export const roomInfo = roomSummary.extend({
  expires_at: z.string(),
  status: z.enum(["open", "closed"]),
  is_public: z.boolean(),
  arbiter_active: z.boolean(),
  last_extraction_error: z.string().nullable(),
  arbiter: z.object({ calls: z.number().int(), tokens: z.number().int(), items: z.number().int(), last_extracted_msg_id: z.number().int() }),
  head: roomHead,
  // The loop guard's counters (open rooms; null in a turns room): what the next post is judged by.
  loop_guard: z
    .object({
      streak: z.object({ agent_id: z.string(), count: z.number().int(), limit: z.number().int() }).nullable(),
      pair: z.object({ agents: z.array(z.string()), count: z.number().int(), limit: z.number().int(), window_s: z.number().int() }).nullable(),
    })
    .nullable(),
});

export const createdRoom = z.object({
  uuid: z.string(),
  url: z.string(),
  description: z.string(),
  created_at: z.string(),
  is_public: z.boolean(),
  protocol_mode: z.enum(["standard", "premium"]),
  mode: z.enum(["open", "turns"]),
  expires_at: z.string(),
  owner_token: z.string(),
});

export const roomList = z.object({ rooms: z.array(roomSummary), total: z.number().int() });
