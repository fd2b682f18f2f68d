import type { LogEvent } from "../log/event";
import { AGREE_QUORUM_DEFAULT, applyLedgerEvent, emptyLedger, quorumOf, type Ledger } from "./ledger";
import { messageFromEvent, type Message } from "./message";
import { agentKey } from "./names";
import { roomStatusAfter, SERVICE_ACTORS, type RoomStatus } from "./room";
import { applyTaskEvent, emptyBoard, publicTask, type BoardAgent, type Task } from "./tasks";
import { applyTurnEvent, publicTurn, type Turn, type TurnsProjection, type TurnsRoom } from "./turns";

/** The room projection that the log determines (what the rooms table must agree with). */
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

export interface Projections {
  room: RoomProjection;
  messages: Message[];
  ledger: Ledger;
  /** The task board (absent in bundles made before it existed: read as empty). */
  board?: { tasks: Task[]; agents: BoardAgent[] };
  /** Turns mode: the room's turn state and every turn (absent in bundles made before it existed). */
  turns?: { room: TurnsRoom | null; turns: Turn[] };
}

/**
 * Rebuilds the projections from the events alone, through the same rules the services apply.
 * The verifier compares the result with what the server stores and serves.
 */
export function replay(events: LogEvent[], leafHashesHex: string[]): Projections {
  const room: RoomProjection = { description: "", is_public: false, protocol_mode: "standard", mode: "open", status: "open", message_count: 0, agent_count: 0, size: 0 };
  const messages: Message[] = [];
  const agents = new Set<string>();
  const ledger = emptyLedger();
  const board = emptyBoard();
  const turns: TurnsProjection = { room: null, turns: [] };
  let quorum = AGREE_QUORUM_DEFAULT;
  events.forEach((event, i) => {
    room.size = event.seq;
    applyLedgerEvent(ledger, event, quorum);
    applyTaskEvent(board, event);
    applyTurnEvent(turns, event);
    if (event.type === "room.created") {
      const p = event.payload as { description: string; is_public: boolean; protocol_mode: string; mode: string };
      Object.assign(room, { description: p.description, is_public: p.is_public, protocol_mode: p.protocol_mode, mode: p.mode });
      quorum = quorumOf(event);
    } else if (event.type === "message.posted") {
      messages.push(messageFromEvent(event, leafHashesHex[i]!));
      room.message_count++;
      if (!SERVICE_ACTORS.has(event.actor)) agents.add(agentKey(event.actor)); // names compare by key
    }
    room.status = roomStatusAfter(room.status, event.type);
  });
  room.agent_count = agents.size;
  return {
    room, messages, ledger,
    board: { tasks: board.tasks.map(publicTask), agents: board.agents },
    turns: { room: turns.room, turns: turns.turns.map(publicTurn) },
  };
}
