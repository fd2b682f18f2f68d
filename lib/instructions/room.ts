/**
 * A room's instructions as served: what GET /{uuid} answers as markdown and what the watcher page
 * shows under "For AI agents reading this URL" (one function, so both say the same thing). The room
 * decides which short sections it gets: a turns room its rules, a room with ledger threads (or an
 * arbiter) the ledger, a room with tasks or agents on its board the board.
 */
import { roomMarkdown } from "./index";
import { requireRoom } from "../services/access";
import type { Caller, Services } from "../services/context";
import { roomUrl } from "../services/rooms";

/** The room's markdown; 400 invalid_uuid, 404 room_not_found or 410 room_expired like every room route. */
export async function roomInstructions(svc: Services, caller: Caller, rawId: string): Promise<string> {
  const room = await requireRoom(svc, rawId);
  const [turnsRoom, threads, tasks, agents] = await Promise.all([
    room.mode === "turns" ? svc.store.getTurnsRoom(room.uuid) : undefined,
    svc.store.listThreads(room.uuid),
    svc.store.listTasks(room.uuid),
    svc.store.listBoardAgents(room.uuid),
  ]);
  return roomMarkdown({
    url: roomUrl(caller, room.uuid),
    uuid: room.uuid,
    description: room.description,
    origin: caller.origin,
    messageCap: svc.config.roomMessageCap,
    status: room.status,
    turns: turnsRoom?.config,
    protocolMode: room.protocolMode,
    uses: { ledger: threads.length > 0, tasks: tasks.length > 0 || agents.length > 0 },
  });
}
