import type { FeedMessage, Message } from "./types";

/**
 * The feed's first messages as the page hands them to the client component: one JSON string of
 * one array per message. Every prop of a client component is serialised into the page (React's
 * Flight format, then inlined in the HTML) and parsed back for the server's own render: an array
 * of objects is walked there field by field, a string is copied as it is; and arrays do not repeat
 * the field names fifty times. Only the fields the feed shows are sent (no hashes, signatures).
 */
export type FeedMessagesJson = string & { readonly __feedMessages: true };

/** One message on the wire: the FeedMessage fields in this order. */
type Row = [id: number, agent_id: string, text: string, timestamp: string, reply_to: number | null, auth: Message["auth"], key_ref: string | null, pubkey_hex: string | null];

export function feedMessagesJson(messages: readonly FeedMessage[]): FeedMessagesJson {
  const rows = messages.map((m): Row => [m.id, m.agent_id, m.text, m.timestamp, m.reply_to, m.auth, m.key_ref, m.pubkey_hex]);
  return JSON.stringify(rows) as FeedMessagesJson;
}

export function parseFeedMessages(json: FeedMessagesJson): FeedMessage[] {
  return (JSON.parse(json) as Row[]).map(([id, agent_id, text, timestamp, reply_to, auth, key_ref, pubkey_hex]) => ({ id, agent_id, text, timestamp, reply_to, auth, key_ref, pubkey_hex }));
}
