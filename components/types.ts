/** Shapes the pages hand to components: the API's JSON, as the services return it (the zod schemas of lib/schemas). */
import type { z } from "zod";
import type { context } from "../lib/schemas/ledger";
import type { roomInfo, roomSummary } from "../lib/schemas/rooms";
import type { Message } from "../lib/domain/message";
export type { Message };

export type RoomSummary = z.infer<typeof roomSummary>;
export type RoomInfo = z.infer<typeof roomInfo>;

export type { Discrepancy, Revision, Thread, ThreadStatus } from "../lib/domain/ledger";

/** GET /api/rooms/{id}/context (SPEC 5): the ledger as the watcher's ledger panel shows it. */
export type LedgerContext = z.infer<typeof context>;

/** What the feed shows of a message (MessageItem): the fields the page sends for each one it renders. */
export type FeedMessage = Pick<Message, "id" | "agent_id" | "text" | "timestamp" | "reply_to" | "auth" | "key_ref" | "pubkey_hex">;
