// The A2A agents: a room (each room is one), and the service that creates rooms. They implement
// the SDK's transport-agnostic A2ARequestHandler; the SDK's JsonRpcTransportHandler parses and
// routes JSON-RPC to them (api/routes/a2a.ts). Every write goes through the same service function
// REST uses, so limits, budgets, screening and errors are the same.
import crypto from "node:crypto";
import {
  AgentCard,
  Message as A2AMessage,
  TaskState,
  type CancelTaskRequest,
  type GetTaskRequest,
  type ListTasksRequest,
  type ListTasksResponse,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
} from "@a2a-js/sdk";
import {
  ContentTypeNotSupportedError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import type { A2ARequestHandler } from "@a2a-js/sdk/server";
import { ParleyError, validationError } from "../lib/errors";
import { createRoomBody } from "../lib/schemas/rooms";
import { parseRoomId, requireRoom } from "../lib/services/access";
import type { Caller, Services } from "../lib/services/context";
import { postMessage, readMessages } from "../lib/services/messages";
import { createRoom } from "../lib/services/rooms";
import type { RoomRow } from "../lib/store/types";
import { roomCard, roomCardUrl, roomEndpoint, serviceCard } from "./card";
import { derivedAgentId, isTerminal, postedReply, postFromMessage, roomState, roomTask, statusUpdate, toA2AMessage } from "./messages";

export interface AgentRequest {
  svc: Services;
  caller: Caller;
  /** Aborted when the client goes away: a stream stops listening. */
  signal: AbortSignal;
}

/** Messages a task carries when the client does not say (historyLength unset), and at most. */
const DEFAULT_HISTORY = 20;
const MAX_HISTORY = 100;
/** Messages read at a time while streaming, and how long one read waits for news (seconds). */
const STREAM_PAGE = 50;
const STREAM_WAIT_S = 15;

type Params = Record<string, unknown>;

const pushRefused = () =>
  new PushNotificationNotSupportedError(
    "This agent sends no A2A push notifications. A room's webhooks (POST /api/rooms/{id}/webhooks) deliver its events to a URL of yours.",
  );

/** The behaviour every Parley agent shares: no push configs, no extended card. */
abstract class ParleyAgent implements A2ARequestHandler {
  constructor(protected readonly req: AgentRequest) {}

  abstract getAgentCard(): Promise<AgentCard>;
  abstract sendMessage(params: SendMessageRequest): Promise<A2AMessage | Task>;
  abstract sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined>;
  abstract getTask(params: GetTaskRequest): Promise<Task>;
  abstract cancelTask(params: CancelTaskRequest): Promise<Task>;
  abstract resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined>;
  abstract listTasks(params: ListTasksRequest): Promise<ListTasksResponse>;

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    throw new UnsupportedOperationError("This agent has no extended card: its public Agent Card is the whole of it.");
  }
  async createTaskPushNotificationConfig(): Promise<never> {
    throw pushRefused();
  }
  async getTaskPushNotificationConfig(): Promise<never> {
    throw pushRefused();
  }
  async listTaskPushNotificationConfigs(): Promise<never> {
    throw pushRefused();
  }
  async deleteTaskPushNotificationConfig(): Promise<never> {
    throw pushRefused();
  }
}

/** historyLength: unset → the default, 0 → none, else at most MAX_HISTORY; negative is refused. */
function historyWanted(historyLength: number | undefined): number {
  if (historyLength === undefined) return DEFAULT_HISTORY;
  if (!Number.isInteger(historyLength) || historyLength < 0) throw new RequestMalformedError("historyLength: must be a whole number of at least 0.");
  return Math.min(historyLength, MAX_HISTORY);
}

/**
 * A room as an A2A agent. It has one task, the room itself (task id = context id = the room's
 * UUID): SendMessage answers with a Message (the post and its receipt; nothing to wait for), and
 * the streams are the room task's lifecycle, one status update per later message.
 */
export class RoomAgent extends ParleyAgent {
  constructor(
    req: AgentRequest,
    private readonly rawRoom: string,
  ) {
    super(req);
  }

  /** The room's id, or -32001 for a URL that names no room (not a UUID). */
  private get room(): string {
    return parseRoomId(this.rawRoom);
  }

  private async state(room: RoomRow): Promise<TaskState> {
    const turns = room.status === "closed" && room.mode === "turns" ? await this.req.svc.store.getTurnsRoom(room.uuid) : undefined;
    return roomState(room, turns?.status);
  }

  /** A task id must be this room's (any case); anything else is not found here. */
  private taskRoom(id: string | undefined): string {
    const room = this.room;
    if (typeof id !== "string" || id.trim() === "") throw new RequestMalformedError("id: the task id is required; a room's task id is its UUID.");
    if (id.toLowerCase() !== room) throw new TaskNotFoundError({ message: `This agent is room ${room}; its one task has the room's id, not "${id.slice(0, 60)}".`, metadata: { code: "task_not_found" } });
    return room;
  }

  /**
   * The context of a message: the client's `contextId` is kept (echoed in what answers it),
   * otherwise the room's id. A `taskId`, when given, must be the room's.
   */
  private contextOf(params: SendMessageRequest): string {
    const room = this.room;
    const message = params.message;
    if (message?.taskId) this.taskRoom(message.taskId);
    return message?.contextId || room;
  }

  private async history(room: string, contextId: string, n: number): Promise<{ messages: A2AMessage[]; last?: number }> {
    if (n === 0) return { messages: [] };
    const page = await readMessages(this.req.svc, room, { tail: n, limit: n });
    return { messages: page.messages.map((m) => toA2AMessage(room, contextId, m)), last: page.messages.at(-1)?.id };
  }

  /** The message posted as REST posts it: postMessage takes the post budgets, validates, screens and writes. */
  private post(params: SendMessageRequest) {
    const { svc, caller } = this.req;
    const room = this.room;
    const input = postFromMessage(params.message, params.metadata, () => derivedAgentId(svc, room, caller.ip));
    return postMessage(svc, caller, room, input);
  }

  async getAgentCard(): Promise<AgentCard> {
    return AgentCard.fromJSON(roomCard(this.req.caller.origin, await requireRoom(this.req.svc, this.room)));
  }

  async sendMessage(params: SendMessageRequest): Promise<A2AMessage> {
    const contextId = this.contextOf(params);
    const posted = await this.post(params);
    return postedReply(this.req.caller.origin, this.room, contextId, posted);
  }

  async *sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const contextId = this.contextOf(params);
    const posted = await this.post(params);
    const room = await requireRoom(this.req.svc, this.room);
    const { receipt: _receipt, ...message } = posted;
    const first = toA2AMessage(room.uuid, contextId, message, message.agent_id);
    yield { payload: { $case: "task", value: roomTask(room, this.req.caller.origin, contextId, await this.state(room), [first]) } };
    yield* this.follow(room.uuid, contextId, message.id, message.agent_id);
  }

  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const room = await requireRoom(this.req.svc, this.taskRoom(params.id));
    const state = await this.state(room);
    if (isTerminal(state)) throw new UnsupportedOperationError({ message: "This room is closed, so its task has ended; GetTask reads it.", metadata: { code: "room_closed" } });
    const { messages, last } = await this.history(room.uuid, room.uuid, DEFAULT_HISTORY);
    yield { payload: { $case: "task", value: roomTask(room, this.req.caller.origin, room.uuid, state, messages) } };
    yield* this.follow(room.uuid, room.uuid, last ?? room.headSize);
  }

  /**
   * The room's messages after `cursor`, each as a status update (state working), until the client
   * leaves, or a final update when the room closes (completed / canceled) or expires or is deleted
   * (canceled). Reads are the REST long-poll's (readMessages with wait, woken by the notifier), so
   * nothing is lost between two reads and a closed room's last messages still arrive.
   */
  private async *follow(room: string, contextId: string, cursor: number, self?: string): AsyncGenerator<StreamResponse, void, undefined> {
    const { svc, signal } = this.req;
    const end = (state: TaskState, why: string): StreamResponse => ({
      payload: {
        $case: "statusUpdate",
        value: statusUpdate(room, contextId, state, new Date(svc.clock.now()).toISOString(), A2AMessage.fromJSON({ messageId: crypto.randomUUID(), contextId, taskId: room, role: "ROLE_AGENT", parts: [{ text: why }] })),
      },
    });
    while (!signal.aborted) {
      let row: RoomRow;
      try {
        row = await requireRoom(svc, room);
      } catch (err) {
        if (err instanceof ParleyError && (err.code === "room_not_found" || err.code === "room_expired")) {
          yield end(TaskState.TASK_STATE_CANCELED, "This room has expired or was deleted; its messages are gone. Stop listening to it.");
          return;
        }
        throw err;
      }
      const state = await this.state(row);
      // A closed room takes no more messages: read what is left without waiting, then end.
      const page = await readMessages(svc, room, { since: cursor, limit: STREAM_PAGE, wait: isTerminal(state) ? undefined : STREAM_WAIT_S }, signal);
      for (const m of page.messages) {
        yield { payload: { $case: "statusUpdate", value: statusUpdate(room, contextId, TaskState.TASK_STATE_WORKING, m.timestamp, toA2AMessage(room, contextId, m, self)) } };
      }
      cursor = page.next_since;
      if (isTerminal(state) && !page.has_more) {
        yield end(state, "This room is closed and read-only: it takes no more messages.");
        return;
      }
    }
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    const room = await requireRoom(this.req.svc, this.taskRoom(params.id));
    const { messages } = await this.history(room.uuid, room.uuid, historyWanted(params.historyLength));
    return roomTask(room, this.req.caller.origin, room.uuid, await this.state(room), messages);
  }

  async listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    const room = await requireRoom(this.req.svc, this.room);
    const state = await this.state(room);
    const pageSize = params.pageSize;
    if (pageSize !== undefined && (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100)) throw new RequestMalformedError("pageSize: must be a whole number from 1 to 100.");
    if (params.pageToken) throw new RequestMalformedError("pageToken: this agent has one task and one page; send no pageToken.");
    const after = params.statusTimestampAfter;
    const matches =
      (!params.contextId || params.contextId === room.uuid) &&
      (!params.status || params.status === state) &&
      (!after || Date.parse(room.lastActivityAt) > Date.parse(after));
    const { messages } = matches ? await this.history(room.uuid, room.uuid, historyWanted(params.historyLength)) : { messages: [] };
    const tasks = matches ? [roomTask(room, this.req.caller.origin, room.uuid, state, messages)] : [];
    return { tasks, nextPageToken: "", pageSize: pageSize ?? 50, totalSize: tasks.length };
  }

  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    const room = await requireRoom(this.req.svc, this.taskRoom(params.id));
    if (isTerminal(await this.state(room))) throw new TaskNotCancelableError({ message: "This room is already closed.", metadata: { code: "room_closed" } });
    throw new TaskNotCancelableError({
      message: `A room is not cancelled over A2A: its owner closes it with POST ${this.req.caller.origin}/api/rooms/${room.uuid}/close and the owner token.`,
      metadata: { code: "not_owner" },
    });
  }
}

/**
 * Parley itself as an A2A agent (/a2a): a message creates a room, as POST /api/rooms does (same
 * schema, same room budget). It keeps no tasks and does not stream.
 */
export class ServiceAgent extends ParleyAgent {
  private noTasks(): never {
    throw new TaskNotFoundError({ message: "The service agent keeps no tasks; a room's task lives at the room's own agent, /a2a/{uuid}.", metadata: { code: "task_not_found" } });
  }

  async getAgentCard(): Promise<AgentCard> {
    return AgentCard.fromJSON(serviceCard(this.req.caller.origin));
  }

  async sendMessage(params: SendMessageRequest): Promise<A2AMessage> {
    const { svc, caller } = this.req;
    const message = params.message;
    if (message?.taskId) this.noTasks();
    message?.parts.forEach((part, i) => {
      if (part.content?.$case !== "text") throw new ContentTypeNotSupportedError(`message.parts[${i}]: send the room's description as text.`);
    });
    const description = (message?.parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("\n");
    const options: Params = { ...(params.metadata as Params | undefined), ...(message?.metadata as Params | undefined) };
    const body: Record<string, unknown> = { description };
    for (const key of ["is_public", "protocol_mode", "mode", "turns"]) if (options[key] !== undefined) body[key] = options[key];
    const parsed = createRoomBody.safeParse(body);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => ({ ...i, path: i.path[0] === "description" ? ["message.parts", ...i.path.slice(1)] : ["metadata", ...i.path] }));
      throw validationError({ issues }, "message");
    }
    const { receipt: _receipt, ...created } = await createRoom(svc, caller, parsed.data);
    const a2a = `${roomEndpoint(caller.origin, created.uuid)}/`;
    return A2AMessage.fromJSON({
      messageId: crypto.randomUUID(),
      contextId: message?.contextId || created.uuid,
      role: "ROLE_AGENT",
      parts: [
        {
          text:
            `Created room ${created.uuid}: ${created.url} (give this URL to the agents who should talk there). ` +
            `Over A2A the room is an agent of its own at ${a2a} (card: ${roomCardUrl(caller.origin, created.uuid)}). ` +
            "The owner_token in the data part closes, reopens or deletes the room; it is shown once, keep it private.",
          mediaType: "text/plain",
        },
        { data: { ...created, a2a_url: a2a, agent_card_url: roomCardUrl(caller.origin, created.uuid) }, mediaType: "application/json" },
      ],
      metadata: { room: created.uuid, url: created.url },
    });
  }

  // eslint-disable-next-line require-yield
  async *sendMessageStream(): AsyncGenerator<StreamResponse, void, undefined> {
    throw new UnsupportedOperationError("The service agent does not stream (its card says streaming: false); use SendMessage.");
  }

  // eslint-disable-next-line require-yield
  async *resubscribe(): AsyncGenerator<StreamResponse, void, undefined> {
    throw new UnsupportedOperationError("The service agent does not stream (its card says streaming: false).");
  }

  async getTask(): Promise<Task> {
    this.noTasks();
  }

  async cancelTask(): Promise<Task> {
    this.noTasks();
  }

  async listTasks(): Promise<ListTasksResponse> {
    return { tasks: [], nextPageToken: "", pageSize: 0, totalSize: 0 };
  }
}

/**
 * The handler with every error it throws remembered: the SDK renders a method's error with its own
 * table (a Parley error would be an opaque -32603), so the route renders the remembered one with ours.
 */
export function remembering(handler: A2ARequestHandler): { handler: A2ARequestHandler; failure: () => unknown } {
  let failure: unknown;
  const note = (err: unknown) => {
    failure = err;
    throw err;
  };
  const proxy = new Proxy(handler, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        try {
          const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
          return result instanceof Promise ? result.catch(note) : result;
        } catch (err) {
          return note(err);
        }
      };
    },
  });
  return { handler: proxy, failure: () => failure };
}
