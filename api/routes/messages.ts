import { z } from "zod";
import type { Services } from "../../lib/services/context";
import { postMessage, readMessagesJson } from "../../lib/services/messages";
import { requireRoom } from "../../lib/services/access";
import { messagePage, postedMessage, postMessageBody, readMessagesQuery } from "../../lib/schemas/messages";
import { agentId, queryInt } from "../../lib/schemas/common";
import { turn } from "../../lib/schemas/turns";
import { agentKey } from "../../lib/domain/names";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import { roomEventStream, serveRoomEvents, SSE_HEADERS } from "../../lib/realtime/sse";
import { cancelOf, doc, jsonBody, nodeResponse, queryOf, type App } from "../http";
import { validationError } from "../../lib/errors";

const eventsQuery = z.object({
  since: queryInt(0).optional(),
  // Only the messages that @-mention this agent and, in a turns room, the opening of its turns.
  mentioning: agentId.optional(),
});
// With `mentioning` in a turns room the page also carries the agent's turn waiting to be claimed.
const readPage = messagePage.extend({ turn: turn.nullable().optional() });

export function messageRoutes(app: App, svc: Services): void {
  doc({ method: "get", path: "/api/rooms/:id/messages", tag: "messages", summary: "Read messages: since (exclusive), limit, tail, wait (long-poll, seconds), mentioning (only messages addressed to that agent; in a turns room also its turn to claim)", query: readMessagesQuery, response: readPage });
  app.get("/api/rooms/:id/messages", async (c) => {
    const query = queryOf(c, readMessagesQuery);
    const json = await readMessagesJson(svc, c.req.param("id"), query, query.wait ? cancelOf(c) : undefined);
    return c.body(json, 200, { "Content-Type": "application/json" });
  });

  doc({ method: "post", path: "/api/rooms/:id/messages", tag: "messages", summary: "Post a message (optionally signed); returns the message and its receipt", body: postMessageBody, response: postedMessage, status: 201 });
  app.post("/api/rooms/:id/messages", async (c) => {
    const body = await jsonBody(c, postMessageBody);
    return c.json(await postMessage(svc, c.get("caller"), c.req.param("id"), body), 201);
  });

  doc({ method: "get", path: "/api/rooms/:id/events", tag: "messages", summary: "Server-Sent Events of every room event (mentioning: only messages addressed to that agent and its turn openings); resumes from Last-Event-ID or since", query: eventsQuery, produces: "text/event-stream" });
  app.get("/api/rooms/:id/events", async (c) => {
    const room = await requireRoom(svc, c.req.param("id"));
    const query = queryOf(c, eventsQuery);
    const lastEventId = c.req.header("last-event-id");
    let since = query.since ?? 0;
    if (lastEventId !== undefined) {
      const parsed = queryInt(0).safeParse(lastEventId.trim());
      if (!parsed.success) throw validationError(parsed.error, "Last-Event-ID");
      since = parsed.data;
    }
    const filter = query.mentioning === undefined ? {} : { addressedTo: agentKey(query.mentioning) };
    // Written straight to the socket (no ReadableStream between, no abort signal: the response's
    // "close" ends it); a runtime without a Node response gets the same stream as a body.
    const res = nodeResponse(c);
    if (res) {
      serveRoomEvents(svc, res, room.uuid, since, filter);
      return RESPONSE_ALREADY_SENT;
    }
    return new Response(roomEventStream(svc, room.uuid, since, c.req.raw.signal, undefined, filter), { headers: SSE_HEADERS });
  });
}
