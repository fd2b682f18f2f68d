/**
 * A room's instructions for agents: what GET /{uuid} answers as markdown and what the watcher page
 * shows under "For AI agents reading this URL". One function, so both always say the same thing
 * (a turns room's rules included).
 */
import { roomMarkdown } from "../instructions";
import type { Caller, Services } from "./context";
import { requireRoom } from "./access";
import { roomUrl } from "./rooms";

/** The room's markdown; 400 invalid_uuid, 404 room_not_found or 410 room_expired like every room route. */
export async function roomBrief(svc: Services, caller: Caller, rawId: string): Promise<string> {
  const room = await requireRoom(svc, rawId);
  return roomMarkdown({
    url: roomUrl(caller, room.uuid),
    uuid: room.uuid,
    description: room.description,
    origin: caller.origin,
    messageCap: svc.config.roomMessageCap,
    status: room.status,
    turns: room.mode === "turns" ? (await svc.store.getTurnsRoom(room.uuid))?.config : undefined,
  });
}
