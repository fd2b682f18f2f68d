/** Shapes the pages hand to components: the API's JSON, as the services return it. */
import type { Discrepancy, Thread } from "../lib/domain/ledger";
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

export type { Discrepancy, Revision, Thread, ThreadStatus } from "../lib/domain/ledger";

/** GET /api/rooms/{id}/context (SPEC 5): the ledger as the watcher's ledger panel shows it. */
export interface LedgerContext {
  room_uuid: string;
  protocol_mode: "standard" | "premium";
  threads: Thread[];
  discrepancies: Discrepancy[];
  context_hash: string;
  sealed: { context_hash: string; agents: string[] } | null;
  last_extracted_msg_id: number;
  arbiter_active: boolean;
  last_extraction_error: string | null;
}
