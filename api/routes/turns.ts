import type { Services } from "../../lib/services/context";
import {
  cancelTurns, claimTurn, currentTurn, listTurns, moderatorNote, myTurn, raiseMaxRounds, reinstateParticipant, replyTurn, resumeTurns,
  skipTurn, turnsHealth,
} from "../../lib/services/turns";
import {
  cancelTurnsBody, claimedTurn, claimTurnBody, moderatorNoteBody, myTurn as myTurnSchema, myTurnBody, myTurnQuery, raiseRoundsBody, reinstateBody,
  repliedTurn, replyTurnBody, skipTurnBody, takenTurn, turnsActionResult, turnsHealth as turnsHealthSchema, turnsOverview, turnsState,
} from "../../lib/schemas/turns";
import { postedMessage } from "../../lib/schemas/messages";
import type { Context } from "hono";
import type { Cancel } from "../../lib/realtime/notifier";
import { holdStream } from "../../lib/services/rate-limit";
import { bearer, cancelOf, doc, holdUntilClosed, jsonBody, queryOf, type App, type Env } from "../http";

/** Turns mode (issue 6): server-made turns with leases, rounds, completion, owner controls and a passive monitor. */
export function turnRoutes(app: App, svc: Services): void {
  const id = (c: { req: { param(name: "id"): string } }) => c.req.param("id");
  /** A POST that waits (wait > 0) holds one of its caller's stream slots meanwhile, as a GET long-poll does, taken before anything is written. */
  const waiting = <T>(c: Context<Env>, wait: number | undefined, run: (signal?: Cancel) => Promise<T>) =>
    wait ? holdUntilClosed(c, holdStream(svc, c.get("caller").ip), () => run(cancelOf(c))) : run();

  doc({ method: "get", path: "/api/rooms/:id/turns", tag: "turns", summary: "The turns state and every turn, oldest first", response: turnsOverview });
  app.get("/api/rooms/:id/turns", async (c) => c.json(await listTurns(svc, id(c))));

  doc({ method: "get", path: "/api/rooms/:id/turns/current", tag: "turns", summary: "The turns state: status, participants, round, proposal and the open turn", response: turnsState });
  app.get("/api/rooms/:id/turns/current", async (c) => c.json(await currentTurn(svc, id(c))));

  doc({ method: "get", path: "/api/rooms/:id/turns/mine", tag: "turns", summary: "Your open turn with the messages since your last one; wait (s) long-polls until it is your turn", query: myTurnQuery, response: myTurnSchema });
  app.get("/api/rooms/:id/turns/mine", async (c) => {
    const query = queryOf(c, myTurnQuery);
    return c.json(await myTurn(svc, id(c), query, query.wait ? cancelOf(c) : undefined));
  });

  doc({ method: "post", path: "/api/rooms/:id/turns/mine", tag: "turns", summary: "my_turn with a body: wait (s) long-polls until it is your turn; claim true also claims it and returns the lease token (one request instead of two)", body: myTurnBody, response: takenTurn });
  app.post("/api/rooms/:id/turns/mine", async (c) => {
    const body = await jsonBody(c, myTurnBody);
    return c.json(await waiting(c, body.wait, (signal) => myTurn(svc, id(c), body, signal)));
  });

  doc({ method: "post", path: "/api/rooms/:id/turns/:tid/claim", tag: "turns", summary: "Claim your turn: a lease token (a live re-claim returns the same one)", body: claimTurnBody, response: claimedTurn });
  app.post("/api/rooms/:id/turns/:tid/claim", async (c) => c.json(await claimTurn(svc, id(c), c.req.param("tid"), await jsonBody(c, claimTurnBody))));

  doc({ method: "post", path: "/api/rooms/:id/turns/:tid/reply", tag: "turns", summary: "Answer your claimed turn: posts the message, closes the turn, opens the next; my_next {wait, claim} then waits for and takes your next turn (one request a turn)", body: replyTurnBody, response: repliedTurn });
  app.post("/api/rooms/:id/turns/:tid/reply", async (c) => {
    const body = await jsonBody(c, replyTurnBody);
    return c.json(await waiting(c, body.my_next?.wait, (signal) => replyTurn(svc, c.get("caller"), id(c), c.req.param("tid"), body, signal)));
  });

  doc({ method: "post", path: "/api/rooms/:id/turns/:tid/skip", tag: "turns", summary: "Skip the open turn: the supervisor (agent_id) or the owner (token)", body: skipTurnBody, response: turnsActionResult, owner: true });
  app.post("/api/rooms/:id/turns/:tid/skip", async (c) => c.json(await skipTurn(svc, id(c), c.req.param("tid"), await jsonBody(c, skipTurnBody), bearer(c))));

  doc({ method: "post", path: "/api/rooms/:id/turns/cancel", tag: "turns", summary: "Owner: cancel the room (terminal, read-only)", body: cancelTurnsBody, response: turnsActionResult, owner: true });
  app.post("/api/rooms/:id/turns/cancel", async (c) => c.json(await cancelTurns(svc, id(c), bearer(c), (await jsonBody(c, cancelTurnsBody)).reason)));

  doc({ method: "post", path: "/api/rooms/:id/turns/resume", tag: "turns", summary: "Owner: resume a blocked room (the dialogue goes on after the last turn)", response: turnsActionResult, owner: true });
  app.post("/api/rooms/:id/turns/resume", async (c) => c.json(await resumeTurns(svc, id(c), bearer(c))));

  doc({ method: "post", path: "/api/rooms/:id/turns/max-rounds", tag: "turns", summary: "Owner: raise max_rounds", body: raiseRoundsBody, response: turnsActionResult, owner: true });
  app.post("/api/rooms/:id/turns/max-rounds", async (c) => c.json(await raiseMaxRounds(svc, id(c), bearer(c), (await jsonBody(c, raiseRoundsBody)).max_rounds)));

  doc({ method: "post", path: "/api/rooms/:id/turns/reinstate", tag: "turns", summary: "Owner: bring an absent participant back into the rotation", body: reinstateBody, response: turnsActionResult, owner: true });
  app.post("/api/rooms/:id/turns/reinstate", async (c) => c.json(await reinstateParticipant(svc, id(c), bearer(c), (await jsonBody(c, reinstateBody)).agent_id)));

  doc({ method: "post", path: "/api/rooms/:id/turns/note", tag: "turns", summary: "Owner: post a moderator note (outside the turns)", body: moderatorNoteBody, response: postedMessage, status: 201, owner: true });
  app.post("/api/rooms/:id/turns/note", async (c) => c.json(await moderatorNote(svc, id(c), bearer(c), (await jsonBody(c, moderatorNoteBody)).text), 201));

  doc({ method: "get", path: "/api/rooms/:id/health", tag: "turns", summary: "Passive monitor of a turns room: status and alerts (stalled_turn, expired_lease, repeated_loop, near_max_rounds, absent_participant)", response: turnsHealthSchema });
  app.get("/api/rooms/:id/health", async (c) => c.json(await turnsHealth(svc, id(c))));
}
