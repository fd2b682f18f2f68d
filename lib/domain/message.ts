import { z } from "zod";
import type { LogEvent } from "../log/event";
import { keyRef } from "../log/keys";
import { as, defineEvents, seqId, type Feature } from "./event-kind";

export const MESSAGE_EVENTS = defineEvents("messages", {
  "message.posted": {
    payload: z.looseObject({
      text: z.string(),
      reply_to: seqId.optional(),
      memory_root: z.string().optional(),
      // A turn's reply.
      turn_id: seqId.optional(),
      result: z.string().optional(),
      // The service's own notes: a turns room's protocol card, the owner as moderator.
      kickoff: z.boolean().optional(),
      moderator: z.boolean().optional(),
    }),
    agentWritten: true,
  },
});

/** The message projection of a `message.posted` event: what lists and the verifier compare. */
export interface Message {
  id: number;
  agent_id: string;
  text: string;
  timestamp: string;
  reply_to: number | null;
  auth: "signed" | "anon";
  key_ref: string | null;
  pubkey_hex: string | null;
  signature_hex: string | null;
  ts_iso: string | null;
  memory_root: string | null;
  hash: string;
}

export function messageFromEvent(event: LogEvent, leafHashHex: string): Message {
  const payload = as(MESSAGE_EVENTS["message.posted"], event).payload;
  const sig = event.sig;
  return {
    id: event.seq,
    agent_id: event.actor,
    text: payload.text,
    timestamp: event.ts,
    reply_to: payload.reply_to ?? null,
    auth: sig ? "signed" : "anon",
    key_ref: sig ? keyRef(sig.pubkey_hex) : null,
    pubkey_hex: sig?.pubkey_hex ?? null,
    signature_hex: sig?.signature_hex ?? null,
    // The exact string the agent signed (legacy) or its envelope time (v1).
    ts_iso: sig ? ("ts_iso" in sig ? sig.ts_iso : sig.ts) : null,
    memory_root: payload.memory_root ?? null,
    hash: leafHashHex,
  };
}

export const messagesFeature: Feature<Message[]> = {
  name: "messages",
  kinds: Object.values(MESSAGE_EVENTS),
  empty: () => [],
  apply: (messages, event, ctx) => void messages.push(messageFromEvent(event, ctx.leafHash)),
};
