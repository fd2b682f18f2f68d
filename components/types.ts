/** Shapes the pages hand to components: the API's JSON, as the services return it. */
export type { Message } from "../lib/domain/message";

export interface RoomSummary {
  uuid: string;
  url: string;
  description: string;
  created_at: string;
  last_activity_at: string;
  message_count: number;
  agent_count: number;
  protocol_mode: "standard" | "premium";
  mode: "open" | "turns";
}

export interface RoomInfo extends RoomSummary {
  expires_at: string;
  status: "open" | "closed";
  is_public: boolean;
  head: { size: number; root: string; checkpoint: string };
}
