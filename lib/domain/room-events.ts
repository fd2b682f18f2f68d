/** The room's own events and its projection (what the rooms table must agree with). */
import { z } from "zod";
import type { LogEvent } from "../log/event";
import { as, defineEvents, isoTime, type Feature } from "./event-kind";
import { agentKey } from "./names";
import { roomStatusAfter, SERVICE_ACTORS, type RoomStatus } from "./room";
import { turnsConfigSchema } from "./turns";

export const ROOM_EVENTS = defineEvents("room", {
  "room.created": {
    payload: z.looseObject({
      description: z.string(),
      is_public: z.boolean(),
      protocol_mode: z.string(),
      mode: z.string(),
      turns: turnsConfigSchema.optional(),
    }),
    server: z.looseObject({ expires_at: isoTime.optional(), agree_quorum: z.number().int().positive().optional() }),
  },
  // By the owner, or by the operator (actor "admin", with the reason it gave).
  "room.closed": { payload: z.looseObject({ reason: z.string().optional() }) },
  "room.reopened": { payload: z.looseObject({ reason: z.string().optional() }) },
  // The operator takes a room off the public list, or puts it back; the room itself is unchanged.
  "room.hidden": { payload: z.looseObject({ reason: z.string().optional() }) },
  "room.unhidden": { payload: z.looseObject({ reason: z.string().optional() }) },
});

/** The room projection that the log determines. */
export interface RoomProjection {
  description: string;
  is_public: boolean;
  protocol_mode: string;
  mode: string;
  status: RoomStatus;
  message_count: number;
  agent_count: number;
  size: number;
}

/** The room's fields, counts and status; the agents it has seen (by agentKey) are kept aside. */
export const roomFeature: Feature<RoomProjection & { agents: Set<string> }> = {
  name: "room",
  kinds: Object.values(ROOM_EVENTS),
  // Every event moves the size; messages move the counts; a turns room's end closes it.
  reads: ["*"],
  empty: () => ({ description: "", is_public: false, protocol_mode: "standard", mode: "open", status: "open", message_count: 0, agent_count: 0, size: 0, agents: new Set() }),
  apply(room, event: LogEvent) {
    room.size = event.seq;
    if (event.type === "room.created") {
      const p = as(ROOM_EVENTS["room.created"], event).payload;
      Object.assign(room, { description: p.description, is_public: p.is_public, protocol_mode: p.protocol_mode, mode: p.mode });
    } else if (event.type === "message.posted") {
      room.message_count++;
      if (!SERVICE_ACTORS.has(event.actor)) room.agents.add(agentKey(event.actor)); // names compare by key
      room.agent_count = room.agents.size;
    }
    room.status = roomStatusAfter(room.status, event.type);
  },
};
