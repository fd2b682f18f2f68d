import type { Discrepancy, Handshake, Revision, Thread } from "../domain/ledger";
import type { BoardAgent, TaskState, TaskStatus } from "../domain/tasks";
import type { TurnState, TurnsRoom } from "../domain/turns";
import type { rooms, events, messages } from "./schema";

export type RoomRow = typeof rooms.$inferSelect;
export type EventRow = typeof events.$inferSelect;
export type MessageRow = typeof messages.$inferSelect;
/** The columns an append changes: the log head and the room's projection. */
export type RoomAfterAppend = Pick<
  RoomRow,
  "headSize" | "headLeaf" | "headRoot" | "frontier" | "checkpoint" | "status" | "messageCount" | "agentCount" | "lastActivityAt" | "expiresAt"
>;

export type RoomSort = "active" | "new" | "messages" | "agents";

export interface RoomListQuery {
  sort: RoomSort;
  limit: number;
  offset: number;
  q?: string;
  now: string;
}

/** Reads, available inside and outside a write transaction. */
export interface StoreReader {
  getRoom(uuid: string): RoomRow | undefined;
  listPublicRooms(query: RoomListQuery): { rows: RoomRow[]; total: number };
  /** Messages with seq > since, oldest first. */
  listMessages(room: string, since: number, limit: number): MessageRow[];
  /** The newest `limit` messages, oldest first. */
  tailMessages(room: string, limit: number): MessageRow[];
  hasMessage(room: string, seq: number): boolean;
  /** Events with seq > since, oldest first. */
  listEvents(room: string, since: number, limit: number): EventRow[];
  /** Leaf hashes (hex) of events after..size (exclusive, inclusive), in order. */
  leafHashes(room: string, size: number, after?: number): string[];
  /** The signed checkpoint of the tree of `size` events. */
  checkpointAt(room: string, size: number): string | undefined;
  agentKey(room: string, agentId: string): { pubkeyHex: string | null } | undefined;
  ping(): void;
  counts(): { rooms: number; events: number };
  /** A thread and the key its opener signed with (null when unsigned). */
  getThread(room: string, id: number): { thread: Thread; openerKey: string | null } | undefined;
  listThreads(room: string): Thread[];
  listRevisions(room: string, threadId?: number): Revision[];
  listDiscrepancies(room: string): Discrepancy[];
  listHandshakes(room: string): Handshake[];
  // ---- task board (issue 7) ----
  getTask(room: string, id: number): TaskState | undefined;
  /** A room's tasks, oldest first; only those with this status when given. */
  listTasks(room: string, status?: TaskStatus): TaskState[];
  /** Open tasks of one priority, oldest first, a page at a time (claim-next; served by the index alone). */
  openTasksAtPriority(room: string, priority: number, limit: number, offset: number): TaskState[];
  listBoardAgents(room: string): BoardAgent[];
  getBoardAgent(room: string, agentId: string): BoardAgent | undefined;
  /** Claimed tasks whose lease ran out at `now` (any open room): [room, task id]. */
  expiredLeases(now: string, limit: number): { room: string; id: number }[];
  /** Agents not marked lost whose last heartbeat is at or before `cutoff` (any open room). */
  silentAgents(cutoff: string, now: string, limit: number): { room: string; agentId: string }[];
  // ---- turns mode (issue 6) ----
  getTurnsRoom(room: string): TurnsRoom | undefined;
  getTurn(room: string, id: number): TurnState | undefined;
  /** A room's turns, oldest first. */
  listTurns(room: string): TurnState[];
  /** The newest `limit` turns, oldest first. */
  lastTurns(room: string, limit: number): TurnState[];
  /** Open turns past their deadline at `now` (any open room): [room, turn id]. */
  dueTurns(now: string, limit: number): { room: string; id: number }[];
}

/** Writes: only reachable through Store.write, so every write is inside one transaction. */
export interface StoreWriter extends StoreReader {
  insertRoom(row: RoomRow): void;
  updateRoomAfterAppend(uuid: string, room: RoomAfterAppend): void;
  insertEvent(row: EventRow): void;
  insertMessage(row: MessageRow): void;
  /** Records an agent in a room; true when it is new there. */
  addAgent(room: string, agentId: string, seq: number): boolean;
  /** Records a signature nonce; false when this (pubkey, nonce) was already used in the room. */
  useNonce(room: string, pubkeyHex: string, nonce: string, seq: number): boolean;
  pinAgentKey(room: string, agentId: string, pubkeyHex: string): void;
  saveThread(room: string, thread: Thread, openerKey: string | null): void;
  updateArbiterState(room: string, state: Partial<Pick<RoomRow, "arbiterWatermark" | "arbiterCalls" | "arbiterTokens" | "arbiterItems" | "lastExtractionError">>): void;
  insertRevision(room: string, revision: Revision): void;
  saveDiscrepancy(room: string, discrepancy: Discrepancy): void;
  insertHandshake(room: string, handshake: Handshake): void;
  /** Removes every row of a room; keeps a tombstone row when `tombstone` is set. */
  deleteRoomData(uuid: string, keepTombstone: boolean): void;
  /** Rooms past their expiry that still hold data. */
  expiredRooms(now: string, limit: number): string[];
  // ---- task board (issue 7) ----
  saveTask(room: string, task: TaskState): void;
  saveBoardAgent(room: string, agent: BoardAgent): void;
  // ---- turns mode (issue 6) ----
  saveTurnsRoom(room: string, turnsRoom: TurnsRoom): void;
  saveTurn(room: string, turn: TurnState): void;
}

/**
 * The repository the services use. Synchronous because the embedded SQLite driver is, and a
 * synchronous immediate transaction is what serialises appends per room for free.
 */
export interface Store extends StoreReader {
  write<T>(fn: (tx: StoreWriter) => T): T;
  close(): void;
}
