import type { LogEvent } from "../log/event";
import type { ArbiterProgress } from "./arbiter";
import { FEATURES, reducersFor } from "./catalogue";
import type { FeatureName, ReduceContext } from "./event-kind";
import { AGREE_QUORUM_DEFAULT, quorumOf, type Ledger } from "./ledger";
import type { Message } from "./message";
import type { RoomProjection } from "./room-events";
import { publicTask, type Board, type BoardAgent, type Task } from "./tasks";
import { publicTurn, type Turn, type TurnsProjection, type TurnsRoom } from "./turns";

export type { RoomProjection } from "./room-events";

export interface Projections {
  room: RoomProjection;
  messages: Message[];
  ledger: Ledger;
  /** The task board (absent in bundles made before it existed: read as empty). */
  board?: { tasks: Task[]; agents: BoardAgent[] };
  /** Turns mode: the room's turn state and every turn (absent in bundles made before it existed). */
  turns?: { room: TurnsRoom | null; turns: Turn[] };
}

/** What each feature's reducer builds over a whole log. */
interface States {
  room: RoomProjection & { agents: Set<string> };
  messages: Message[];
  ledger: Ledger;
  board: Board;
  turns: TurnsProjection;
  arbiter: ArbiterProgress;
}

/**
 * Rebuilds the projections from the events alone, through the reducers of the event catalogue:
 * the same ones the projector runs at append. The verifier compares the result with what the
 * server stores and serves.
 */
export function replay(events: LogEvent[], leafHashesHex: string[]): Projections {
  const r = new Replayer();
  events.forEach((event, i) => r.add(event, leafHashesHex[i]!));
  return r.result();
}

/** replay fed one event at a time (the verifier's way: it keeps no event, only what the reducers build). */
export class Replayer {
  private readonly states = Object.fromEntries(FEATURES.map((f) => [f.name, f.empty()])) as unknown as States;
  private readonly ctx: ReduceContext = { leafHash: "", quorum: AGREE_QUORUM_DEFAULT };

  add(event: LogEvent, leafHashHex: string): void {
    const { states, ctx } = this;
    ctx.leafHash = leafHashHex;
    if (event.type === "room.created") ctx.quorum = quorumOf(event);
    for (const feature of reducersFor(event.type)) feature.apply(states[feature.name as FeatureName], event, ctx);
  }

  result(): Projections {
    const states = this.states;
    const { agents: _agents, ...room } = states.room;
    return {
      room,
      messages: states.messages,
      ledger: states.ledger,
      board: { tasks: states.board.tasks.map(publicTask), agents: states.board.agents },
      turns: { room: states.turns.room, turns: states.turns.turns.map(publicTurn) },
    };
  }
}
