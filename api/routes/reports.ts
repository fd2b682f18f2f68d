import { reportAccepted, reportBody, reportRoom } from "../../lib/admin/reports";
import { parseRoomId } from "../../lib/services/access";
import type { Services } from "../../lib/services/context";
import { doc, jsonBody, type App } from "../http";

export function reportRoutes(app: App, svc: Services): void {
  doc({ method: "post", path: "/api/rooms/:id/report", tag: "rooms", summary: "Report the room (or one of its messages) to the operator: {reason, message_id?} → 202 {id}", body: reportBody, response: reportAccepted, status: 202 });
  app.post("/api/rooms/:id/report", async (c) => {
    const id = parseRoomId(c.req.param("id"));
    const input = await jsonBody(c, reportBody);
    return c.json(await reportRoom(svc, c.get("caller"), id, input), 202);
  });
}
