/**
 * GET /api/rooms/{id}/export as a stream: the same bytes as JSON.stringify(exportRoom(...)) (the
 * bundle of lib/services/verify.ts readBundle), written a page of events, checkpoints or messages
 * at a time, each page only when the client has taken the previous one. An 11 MB room costs a
 * page in memory per export, not the room twice over.
 *
 * Consistent as the one-pass read: the small projections (room, ledger, board, turns) and the tree
 * size are read together at the start; events and messages are append-only, so those up to that
 * size read later are the ones that were there. A room deleted meanwhile ends the stream with an
 * error (the client gets a cut body, never a bundle that does not hold together).
 */
import { publicTask } from "../domain/tasks";
import { publicTurn } from "../domain/turns";
import { BUNDLE_FORMAT } from "../log/verify";
import type { RoomRow } from "../store/types";
import type { Services } from "./context";
import { eventFromRow } from "./events";
import { messageFromRow } from "./messages";
import { requireRoom } from "./rooms";

/** Rows per page (a row of a long message is tens of KiB). */
const PAGE = 64;

const encoder = new TextEncoder();

/** The bundle's JSON text up to `events`, and the projections around `messages`, read now. */
function snapshot(svc: Services, room: RoomRow) {
  const head = {
    format: BUNDLE_FORMAT,
    origin: `${svc.originHost}/room/${room.uuid}`,
    room: room.uuid,
    server_key: { key_name: svc.key.keyName, pubkey_hex: svc.key.pubkeyHex },
  };
  const projectedRoom = {
    description: room.description,
    is_public: room.isPublic,
    protocol_mode: room.protocolMode,
    mode: room.mode,
    status: room.status as "open" | "closed",
    message_count: room.messageCount,
    agent_count: room.agentCount,
    size: room.headSize,
  };
  const rest = {
    ledger: {
      threads: svc.store.listThreads(room.uuid),
      revisions: svc.store.listRevisions(room.uuid),
      discrepancies: svc.store.listDiscrepancies(room.uuid),
      handshakes: svc.store.listHandshakes(room.uuid),
    },
    board: {
      tasks: svc.store.listTasks(room.uuid).map(publicTask),
      agents: svc.store.listBoardAgents(room.uuid),
    },
    turns: { room: svc.store.getTurnsRoom(room.uuid) ?? null, turns: svc.store.listTurns(room.uuid).map(publicTurn) },
  };
  // `{"format":…,"server_key":{…}` without its closing brace; the rest without its opening one.
  const opening = JSON.stringify(head).slice(0, -1);
  const closing = JSON.stringify(rest).slice(1);
  return { opening, projectedRoom, closing };
}

/** A page of a list after `after`: its items' JSON texts, the last seq, and whether the list ends here. */
type Pager = (after: number) => { items: string[]; last: number; done: boolean };

/** The bundle as a byte stream; `room` is the normalised id (for the file name). */
export function exportStream(svc: Services, rawRoomId: string): { room: string; body: ReadableStream<Uint8Array> } {
  const room = requireRoom(svc, rawRoomId);
  const size = room.headSize;
  const { opening, projectedRoom, closing } = snapshot(svc, room);

  // Rows past the snapshot's size were appended during the export: they are not in this bundle.
  const page = <R extends { seq: number }>(rows: R[], item: (row: R) => unknown) => {
    const kept = rows.filter((r) => r.seq <= size);
    return { items: kept.map((r) => JSON.stringify(item(r))), last: kept.at(-1)?.seq ?? size, done: rows.length < PAGE || kept.length < rows.length };
  };
  const events: Pager = (after) => page(svc.store.listEvents(room.uuid, after, PAGE), eventFromRow);
  const checkpoints: Pager = (after) => page(svc.store.listEvents(room.uuid, after, PAGE), (r) => r.checkpoint);
  const messages: Pager = (after) => page(svc.store.listMessages(room.uuid, after, PAGE), messageFromRow);

  // The parts in order: fixed text, or a list read page by page (`expected`: its exact length, if known).
  const parts: (string | { pager: Pager; expected?: number })[] = [
    `${opening},"events":[`,
    { pager: events, expected: size },
    `],"checkpoints":[`,
    { pager: checkpoints, expected: size },
    `],"projections":{"room":${JSON.stringify(projectedRoom)},"messages":[`,
    { pager: messages },
    `],${closing}}`,
  ];
  let part = 0;
  let after = 0;
  let seen = 0;

  const body = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        const current = parts[part];
        if (current === undefined) return controller.close();
        if (typeof current === "string") {
          part++;
          return controller.enqueue(encoder.encode(current));
        }
        const { items, last, done } = current.pager(after);
        if (items.length > 0) controller.enqueue(encoder.encode((seen > 0 ? "," : "") + items.join(",")));
        seen += items.length;
        after = last;
        if (!done) return;
        if (current.expected !== undefined && seen !== current.expected) {
          return controller.error(new Error(`room ${room.uuid} went away during its export (${seen} of ${current.expected} events)`));
        }
        part++;
        after = 0;
        seen = 0;
      },
    },
    { highWaterMark: 1 },
  );
  return { room: room.uuid, body };
}
