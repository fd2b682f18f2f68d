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
import { eventFromRow, messageFromRow } from "../store/rows";
import { BUNDLE_FORMAT } from "../log/verify";
import type { Services } from "./context";
import { requireRoom } from "./access";
import { readProjections } from "./verify";

/** Rows per page (a row of a long message is tens of KiB). */
const PAGE = 64;

const encoder = new TextEncoder();

/** The bundle's JSON text up to `events`, and the projections around `messages`, read in one snapshot. */
async function snapshot(svc: Services, rawRoomId: string) {
  return svc.store.snapshot(async (reader) => {
    const room = await requireRoom(svc, rawRoomId, reader);
    const head = {
      format: BUNDLE_FORMAT,
      origin: `${svc.originHost}/room/${room.uuid}`,
      room: room.uuid,
      server_key: { key_name: svc.key.keyName, pubkey_hex: svc.key.pubkeyHex },
    };
    const { room: projectedRoom, messages: _none, ...rest } = await readProjections(reader, room, []);
    // `{"format":…,"server_key":{…}` without its closing brace; the rest without its opening one.
    const opening = JSON.stringify(head).slice(0, -1);
    const closing = JSON.stringify(rest).slice(1);
    return { room, opening, projectedRoom, closing };
  });
}

/** A page of a list after `after`: its items' JSON texts, the last seq, and whether the list ends here. */
type Pager = (after: number) => Promise<{ items: string[]; last: number; done: boolean }>;

/** The bundle as a byte stream; `room` is the normalised id (for the file name). */
export async function exportStream(svc: Services, rawRoomId: string): Promise<{ room: string; body: ReadableStream<Uint8Array> }> {
  const { room, opening, projectedRoom, closing } = await snapshot(svc, rawRoomId);
  const size = room.headSize;

  // Rows past the snapshot's size were appended during the export: they are not in this bundle.
  const page = <R extends { seq: number }>(rows: R[], item: (row: R) => unknown, keep: (row: R) => boolean = () => true) => {
    const kept = rows.filter((r) => r.seq <= size);
    return { items: kept.filter(keep).map((r) => JSON.stringify(item(r))), last: kept.at(-1)?.seq ?? size, done: rows.length < PAGE || kept.length < rows.length };
  };
  const events: Pager = async (after) => page(await svc.store.listEvents(room.uuid, after, PAGE), eventFromRow);
  // One checkpoint per committed batch: the events inside a batch carry none.
  const checkpoints: Pager = async (after) => page(await svc.store.listEvents(room.uuid, after, PAGE), (r) => r.checkpoint, (r) => r.checkpoint !== "");
  const messages: Pager = async (after) => page(await svc.store.listMessages(room.uuid, after, PAGE), messageFromRow);

  // The parts in order: fixed text, or a list read page by page (`expected`: its exact length, if known).
  const parts: (string | { pager: Pager; expected?: number })[] = [
    `${opening},"events":[`,
    { pager: events, expected: size },
    `],"checkpoints":[`,
    { pager: checkpoints },
    `],"projections":{"room":${JSON.stringify(projectedRoom)},"messages":[`,
    { pager: messages },
    `],${closing}}`,
  ];
  let part = 0;
  let after = 0;
  let seen = 0;

  const body = new ReadableStream<Uint8Array>(
    {
      // Every pull enqueues a chunk or ends the stream: a pull that enqueued nothing would not be
      // called again, and the response would hang (an empty list, a list of exactly whole pages).
      async pull(controller) {
        for (;;) {
          const current = parts[part];
          if (current === undefined) return controller.close();
          if (typeof current === "string") {
            part++;
            return controller.enqueue(encoder.encode(current));
          }
          const { items, last, done } = await current.pager(after);
          if (items.length > 0) controller.enqueue(encoder.encode((seen > 0 ? "," : "") + items.join(",")));
          seen += items.length;
          after = last;
          if (done) {
            if (current.expected !== undefined && seen !== current.expected) {
              return controller.error(new Error(`room ${room.uuid} went away during its export (${seen} of ${current.expected} events)`));
            }
            part++;
            after = 0;
            seen = 0;
          }
          if (items.length > 0) return;
        }
      },
    },
    { highWaterMark: 1 },
  );
  return { room: room.uuid, body };
}
