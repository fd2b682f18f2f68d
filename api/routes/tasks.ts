import { z } from "zod";
import type { Services } from "../../lib/services/context";
import {
  cancelTask, claimNextTask, claimTask, createTask, failTask, getTask, handoffTask, heartbeatTask, joinBoard, listBoardAgents, listTasks,
  releaseTask, reviewTask, submitTask,
} from "../../lib/services/tasks";
import {
  boardAgent, cancelTaskBody, claimNextBody, claimResult, claimTaskBody, createTaskBody, failTaskBody, handoffTaskBody, heartbeatTaskBody,
  joinBoardBody, releaseTaskBody, reviewTaskBody, submitTaskBody, task, taskListQuery, taskResult, taskWithHistory,
} from "../../lib/schemas/tasks";
import { receipt } from "../../lib/schemas/messages";
import { bearer, doc, jsonBody, queryOf, type App } from "../http";

/** The task board (issue 7): agents with capabilities, tasks with leases, handoffs, receipts and review. */
export function taskRoutes(app: App, svc: Services): void {
  doc({ method: "post", path: "/api/rooms/:id/agents", tag: "tasks", summary: "Join the board with capabilities, or refresh (heartbeat)", body: joinBoardBody, response: boardAgent.extend({ event: z.string(), receipt }) });
  app.post("/api/rooms/:id/agents", async (c) => c.json(await joinBoard(svc, c.req.param("id"), await jsonBody(c, joinBoardBody))));

  doc({ method: "get", path: "/api/rooms/:id/agents", tag: "tasks", summary: "Agents on the board: capabilities, last_seen, online | away | lost", response: z.object({ agents: z.array(boardAgent) }) });
  app.get("/api/rooms/:id/agents", async (c) => c.json(await listBoardAgents(svc, c.req.param("id"))));

  doc({ method: "post", path: "/api/rooms/:id/tasks", tag: "tasks", summary: "Create a task", body: createTaskBody, response: taskResult, status: 201 });
  app.post("/api/rooms/:id/tasks", async (c) => c.json(await createTask(svc, c.req.param("id"), await jsonBody(c, createTaskBody)), 201));

  doc({ method: "get", path: "/api/rooms/:id/tasks", tag: "tasks", summary: "Tasks, oldest first (?status= filters)", query: taskListQuery, response: z.object({ tasks: z.array(task) }) });
  app.get("/api/rooms/:id/tasks", async (c) => c.json(await listTasks(svc, c.req.param("id"), queryOf(c, taskListQuery).status)));

  doc({ method: "post", path: "/api/rooms/:id/tasks/claim-next", tag: "tasks", summary: "Claim the highest-priority, then oldest, open task you may claim ({task: null} when none)", body: claimNextBody, response: claimResult });
  app.post("/api/rooms/:id/tasks/claim-next", async (c) => c.json(await claimNextTask(svc, c.req.param("id"), await jsonBody(c, claimNextBody))));

  doc({ method: "get", path: "/api/rooms/:id/tasks/:tid", tag: "tasks", summary: "A task with its history", response: taskWithHistory });
  app.get("/api/rooms/:id/tasks/:tid", async (c) => c.json(await getTask(svc, c.req.param("id"), c.req.param("tid"))));

  doc({ method: "post", path: "/api/rooms/:id/tasks/:tid/claim", tag: "tasks", summary: "Claim an open task: returns a lease token (exactly one winner)", body: claimTaskBody, response: claimResult });
  app.post("/api/rooms/:id/tasks/:tid/claim", async (c) => c.json(await claimTask(svc, c.req.param("id"), c.req.param("tid"), await jsonBody(c, claimTaskBody))));

  const leased = [
    ["heartbeat", "Extend your lease (with the lease token)", heartbeatTaskBody, heartbeatTask],
    ["release", "Give the task back, no failure counted", releaseTaskBody, releaseTask],
    ["fail", "Give up with a reason: failures + 1", failTaskBody, failTask],
    ["handoff", "Reopen with a priority window for a named agent or capability", handoffTaskBody, handoffTask],
    ["submit", "Submit a receipt: completed | partial | failed, with artifacts", submitTaskBody, submitTask],
  ] as const;
  for (const [action, summary, body, fn] of leased) {
    doc({ method: "post", path: `/api/rooms/:id/tasks/:tid/${action}`, tag: "tasks", summary, body, response: taskResult });
    app.post(`/api/rooms/:id/tasks/:tid/${action}`, async (c) =>
      c.json(await (fn as (s: Services, r: string, t: string, i: unknown) => Promise<object>)(svc, c.req.param("id"), c.req.param("tid"), await jsonBody(c, body as z.ZodType))),
    );
  }

  doc({ method: "post", path: "/api/rooms/:id/tasks/:tid/review", tag: "tasks", summary: "Review a submitted task: accept | reject | needs_fix (never by its claimant)", body: reviewTaskBody, response: taskResult, owner: true });
  app.post("/api/rooms/:id/tasks/:tid/review", async (c) => c.json(await reviewTask(svc, c.req.param("id"), c.req.param("tid"), await jsonBody(c, reviewTaskBody), bearer(c))));

  doc({ method: "post", path: "/api/rooms/:id/tasks/:tid/cancel", tag: "tasks", summary: "Cancel a task: its creator or the room owner", body: cancelTaskBody, response: taskResult, owner: true });
  app.post("/api/rooms/:id/tasks/:tid/cancel", async (c) => c.json(await cancelTask(svc, c.req.param("id"), c.req.param("tid"), await jsonBody(c, cancelTaskBody), bearer(c))));
}
