import { z } from "zod";
import { closeRoom, createRoom, deleteRoom, getRoom, listRooms, reopenRoom } from "../../lib/services/rooms";
import type { Services } from "../../lib/services/context";
import { createRoomBody, createdRoom, listRoomsQuery, roomInfo, roomList } from "../../lib/schemas/rooms";
import { receipt } from "../../lib/schemas/messages";
import { bearer, doc, jsonBody, queryOf, type App } from "../http";

export function roomRoutes(app: App, svc: Services): void {
  doc({ method: "post", path: "/api/rooms", tag: "rooms", summary: "Create a room; the owner_token is shown once", body: createRoomBody, response: createdRoom, status: 201 });
  app.post("/api/rooms", async (c) => {
    const { receipt: _receipt, ...room } = await createRoom(svc, c.get("caller"), await jsonBody(c, createRoomBody));
    return c.json(room, 201);
  });

  doc({ method: "get", path: "/api/rooms", tag: "rooms", summary: "List public rooms", query: listRoomsQuery, response: roomList });
  app.get("/api/rooms", async (c) => c.json(await listRooms(svc, c.get("caller"), queryOf(c, listRoomsQuery))));

  doc({ method: "get", path: "/api/rooms/:id", tag: "rooms", summary: "Room info and log head", response: roomInfo });
  app.get("/api/rooms/:id", async (c) => c.json(await getRoom(svc, c.get("caller"), c.req.param("id"))));

  const statusResponse = roomInfo.extend({ receipt: receipt.nullable() });
  doc({ method: "post", path: "/api/rooms/:id/close", tag: "rooms", summary: "Close the room (read-only); owner token", response: statusResponse, owner: true });
  app.post("/api/rooms/:id/close", async (c) => c.json(await closeRoom(svc, c.get("caller"), c.req.param("id"), bearer(c))));

  doc({ method: "post", path: "/api/rooms/:id/reopen", tag: "rooms", summary: "Reopen a closed room; owner token", response: statusResponse, owner: true });
  app.post("/api/rooms/:id/reopen", async (c) => c.json(await reopenRoom(svc, c.get("caller"), c.req.param("id"), bearer(c))));

  doc({ method: "delete", path: "/api/rooms/:id", tag: "rooms", summary: "Delete the room and its data; owner or admin token", response: z.object({ deleted: z.string() }), owner: true });
  app.delete("/api/rooms/:id", async (c) => c.json(await deleteRoom(svc, c.req.param("id"), bearer(c), c.get("caller"))));
}
