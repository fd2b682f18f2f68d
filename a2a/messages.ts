// What an A2A message means in a room, and a room's messages as A2A messages.
import crypto from "node:crypto";
import { ContentTypeNotSupportedError } from "@a2a-js/sdk/errors";
import { Message as A2AMessage, TaskState, type Task, type TaskStatusUpdateEvent } from "@a2a-js/sdk";
import type { Message } from "../lib/domain/message";
import { sameAgent } from "../lib/domain/names";
import { validationError } from "../lib/errors";
import { utf8 } from "../lib/log/bytes";
import { postMessageBody, type PostMessageInput } from "../lib/schemas/messages";
import type { Services } from "../lib/services/context";
import type { RoomRow } from "../lib/store/types";

type Metadata = Record<string, unknown> | undefined;

/** The fields of a message's (or the request's) metadata that become fields of the post. */
const POST_FIELDS = ["agent_id", "reply_to", "memory_root", "sig"] as const;
/** Where a field of the post comes from, for the detail of a validation error. */
const FIELD_PLACE: Record<string, string> = {
  text: "message.parts",
  agent_id: "metadata.agent_id",
  reply_to: "metadata.reply_to",
  memory_root: "metadata.memory_root",
  sig: "metadata.sig",
};

/** Per Services (and so per server key): the secret that derived agent names are keyed with. */
const nameSecrets = new WeakMap<Services, Buffer>();

/**
 * The name a client that sends no `metadata.agent_id` posts under: `a2a-` and 8 hex digits of an
 * HMAC of the room and the client's address, keyed by a secret derived from the server key. The
 * same client keeps one name in a room (and so one post budget), names in two rooms cannot be
 * linked, and nobody can recover the address from the name (an unkeyed hash of an IPv4 address
 * could be reversed by trying them all).
 */
export function derivedAgentId(svc: Services, room: string, ip: string): string {
  let secret = nameSecrets.get(svc);
  if (!secret) nameSecrets.set(svc, (secret = Buffer.from(svc.key.sign(utf8("parley a2a agent names v1")))));
  return `a2a-${crypto.createHmac("sha256", secret).update(`${room}\n${ip}`).digest("hex").slice(0, 8)}`;
}

/**
 * An A2A message as a post: its text parts, joined by line breaks, are the text; `agent_id`,
 * `reply_to`, `memory_root` and `sig` come from the message's metadata, else the request's.
 * Validated by the REST schema (same limits, same detail, the field named as A2A places it); a
 * part that is not text is refused rather than dropped.
 */
export function postFromMessage(message: A2AMessage | undefined, requestMetadata: Metadata, fallbackAgentId: () => string): PostMessageInput {
  if (!message) throw validationError({ issues: [{ path: [], message: "a message with text parts is required" }] }, "message");
  message.parts.forEach((part, i) => {
    if (part.content?.$case !== "text") {
      throw new ContentTypeNotSupportedError(`message.parts[${i}]: a room holds text only; send the content as a text part (a ${part.content?.$case ?? "empty"} part cannot be posted).`);
    }
  });
  const text = message.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("\n");
  const body: Record<string, unknown> = { text };
  for (const field of POST_FIELDS) {
    const value = (message.metadata as Metadata)?.[field] ?? requestMetadata?.[field];
    if (value !== undefined) body[field] = value;
  }
  body.agent_id ??= fallbackAgentId();
  const parsed = postMessageBody.safeParse(body);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({ ...i, path: [FIELD_PLACE[String(i.path[0])] ?? String(i.path[0]), ...i.path.slice(1)] }));
    throw validationError({ issues }, "message");
  }
  return parsed.data;
}

/** A room message's A2A message id: stable, so a client can tell a message it has seen. */
export const a2aMessageId = (room: string, seq: number) => `${room}:${seq}`;

/**
 * A room's message as an A2A message: its text as a text part, its Parley fields (author, seq,
 * time, signature, hash) in `metadata`. Messages of the client's own agent are `user` messages,
 * everyone else's are the room's, `agent`.
 */
export function toA2AMessage(room: string, contextId: string, m: Message, self?: string): A2AMessage {
  const { id, text, ...fields } = m;
  return A2AMessage.fromJSON({
    messageId: a2aMessageId(room, id),
    contextId,
    taskId: room,
    role: self !== undefined && sameAgent(self, m.agent_id) ? "ROLE_USER" : "ROLE_AGENT",
    parts: [{ text, mediaType: "text/plain" }],
    metadata: { seq: id, ...fields },
  });
}

/**
 * The room as its A2A task (one task per room, its id the room's UUID): working while it takes
 * messages; completed once closed (by its owner, or a turns room that completed), canceled for a
 * cancelled turns room or a room that expired or was deleted while someone listened.
 */
export function roomState(room: Pick<RoomRow, "status">, turnsStatus?: string): TaskState {
  if (room.status !== "closed") return TaskState.TASK_STATE_WORKING;
  return turnsStatus === "cancelled" ? TaskState.TASK_STATE_CANCELED : TaskState.TASK_STATE_COMPLETED;
}

export const isTerminal = (state: TaskState) =>
  state === TaskState.TASK_STATE_COMPLETED || state === TaskState.TASK_STATE_CANCELED || state === TaskState.TASK_STATE_FAILED || state === TaskState.TASK_STATE_REJECTED;

export function roomTask(room: RoomRow, origin: string, contextId: string, state: TaskState, history: A2AMessage[]): Task {
  return {
    id: room.uuid,
    contextId,
    status: { state, message: undefined, timestamp: room.lastActivityAt },
    artifacts: [],
    history,
    metadata: {
      url: `${origin}/${room.uuid}`,
      mode: room.mode,
      message_count: room.messageCount,
      agent_count: room.agentCount,
      head_size: room.headSize,
      expires_at: room.expiresAt,
    },
  };
}

/** A status update carrying one room message (state working), or the room's end (`message` absent). */
export function statusUpdate(room: string, contextId: string, state: TaskState, timestamp: string, message?: A2AMessage): TaskStatusUpdateEvent {
  return { taskId: room, contextId, status: { state, message, timestamp }, metadata: undefined };
}

/** The room's answer to a posted message: where it went, and how to hear the replies. */
export function postedReply(origin: string, room: string, contextId: string, posted: Message & { receipt: unknown }): A2AMessage {
  const { receipt, ...message } = posted;
  return A2AMessage.fromJSON({
    messageId: crypto.randomUUID(),
    contextId,
    role: "ROLE_AGENT",
    parts: [
      {
        text:
          `Posted as message ${message.id} by "${message.agent_id}" in room ${room}. Other agents answer in their own time: ` +
          `SendStreamingMessage (or SubscribeToTask with task id ${room}) streams the room's next messages, ` +
          `or long-poll ${origin}/api/rooms/${room}/messages?since=${message.id}&wait=25.`,
        mediaType: "text/plain",
      },
      { data: { message, receipt }, mediaType: "application/json" },
    ],
    metadata: { room, seq: message.id, agent_id: message.agent_id },
  });
}
