/**
 * The projector: the one place that writes projections. appendEvent (lib/services/events.ts) calls
 * it inside the append's transaction with the new event; it runs the catalogue's reducers for the
 * event's type (the same reducers the verifier replays, lib/domain/catalogue.ts) and persists what
 * they changed. The caller passes the parts of state it has already loaded for its rule checks
 * (the thread being revised, the task being claimed, the turns room); a part not given starts
 * empty, which is what an event that creates its item needs.
 */
import { arbiterFeature } from "../domain/arbiter";
import { reducersFor } from "../domain/catalogue";
import type { ReduceContext } from "../domain/event-kind";
import { emptyLedger, ledgerFeature, quorumOf, type Ledger } from "../domain/ledger";
import { messagesFeature, type Message } from "../domain/message";
import { agentKey } from "../domain/names";
import { roomStatusAfter, SERVICE_ACTORS, type RoomStatus } from "../domain/room";
import { boardFeature, emptyBoard, type Board } from "../domain/tasks";
import { turnsFeature, type TurnsProjection } from "../domain/turns";
import type { LogEvent } from "../log/event";
import { eventFromRow, messageToRow } from "../store/rows";
import type { RoomRow, StoreReader, StoreWriter } from "../store/types";

/** What the caller has loaded of the state the event changes. */
export interface Parts {
  ledger?: Partial<Ledger>;
  /** The key of the thread's opener, stored with the thread (who may update or retract it). */
  openerKey?: string | null;
  board?: Partial<Board>;
  /** The turns room with the turns the event touches (mutated in place, so a caller can chain events). */
  turns?: TurnsProjection;
}

/** The projections after the event, for the features it changed. */
export interface Projected {
  message?: Message;
  ledger?: Ledger;
  board?: Board;
  turns?: TurnsProjection;
}

/** The quorum the room was created with, as the log records it (what the verifier replays with). */
export async function roomQuorum(reader: Pick<StoreReader, "listEvents">, room: string): Promise<number> {
  const created = (await reader.listEvents(room, 0, 1))[0];
  return quorumOf(created && eventFromRow(created));
}

/**
 * Runs the reducers for `event` and writes what they changed. Returns the room row's part of the
 * projection (status and counts, written with the new head; the arbiter's progress) and the
 * changed projections.
 */
export async function project(tx: StoreWriter, room: RoomRow, event: LogEvent, leafHash: string, parts: Parts): Promise<{ patch: Partial<RoomRow>; projected: Projected }> {
  const patch: Partial<RoomRow> = {};
  const projected: Projected = {};
  const ctx: ReduceContext = { leafHash, quorum: 0 };
  for (const feature of reducersFor(event.type)) {
    switch (feature.name) {
      case "room": {
        const status = roomStatusAfter(room.status as RoomStatus, event.type);
        if (status !== room.status) patch.status = status;
        if (event.type === "message.posted") {
          // The service's own notes (kickoff card, moderator) do not count as an agent of the room.
          const isNewAgent = !SERVICE_ACTORS.has(event.actor) && (await tx.addAgent(room.uuid, agentKey(event.actor), event.seq));
          patch.messageCount = room.messageCount + 1;
          patch.agentCount = room.agentCount + (isNewAgent ? 1 : 0);
        }
        break;
      }
      case "messages": {
        const messages = messagesFeature.empty();
        messagesFeature.apply(messages, event, ctx);
        projected.message = messages[0]!;
        await tx.insertMessage(messageToRow(room.uuid, projected.message));
        break;
      }
      case "ledger": {
        const ledger: Ledger = { ...emptyLedger(), ...structuredClone(parts.ledger ?? {}) };
        const before = { revisions: ledger.revisions.length, handshakes: ledger.handshakes.length };
        ledgerFeature.apply(ledger, event, { ...ctx, quorum: event.type === "thread.revised" ? await roomQuorum(tx, room.uuid) : ctx.quorum });
        for (const t of ledger.threads) await tx.saveThread(room.uuid, t, parts.openerKey ?? null);
        for (const r of ledger.revisions.slice(before.revisions)) await tx.insertRevision(room.uuid, r);
        for (const d of ledger.discrepancies) await tx.saveDiscrepancy(room.uuid, d);
        for (const h of ledger.handshakes.slice(before.handshakes)) await tx.insertHandshake(room.uuid, h);
        projected.ledger = ledger;
        break;
      }
      case "board": {
        const board: Board = { ...emptyBoard(), ...structuredClone(parts.board ?? {}) };
        boardFeature.apply(board, event, ctx);
        for (const t of board.tasks) await tx.saveTask(room.uuid, t);
        for (const a of board.agents) await tx.saveBoardAgent(room.uuid, a);
        projected.board = board;
        break;
      }
      case "turns": {
        const proj = parts.turns ?? turnsFeature.empty();
        turnsFeature.apply(proj, event, ctx);
        if (proj.room) {
          await tx.saveTurnsRoom(room.uuid, proj.room);
          for (const t of proj.turns) await tx.saveTurn(room.uuid, t);
        }
        projected.turns = proj;
        break;
      }
      case "arbiter": {
        const progress = { watermark: room.arbiterWatermark, items: room.arbiterItems };
        arbiterFeature.apply(progress, event, ctx);
        Object.assign(patch, { arbiterWatermark: progress.watermark, arbiterItems: progress.items });
        await tx.updateArbiterState(room.uuid, { arbiterWatermark: progress.watermark, arbiterItems: progress.items });
        break;
      }
    }
  }
  return { patch, projected };
}
