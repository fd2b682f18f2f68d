import type { FeedMessage, Message } from "./types";

/**
 * The feed's first messages as the page hands them to the client component: one JSON string. Every
 * prop of a client component is serialised into the page (React's Flight format, then inlined in the
 * HTML) and parsed back for the server's own render; an array of objects is walked there field by
 * field, a string is copied as it is. Only the fields the feed shows are sent (no hashes, signatures).
 */
export type FeedMessagesJson = string & { readonly __feedMessages: true };

export function feedMessagesJson(messages: readonly Message[]): FeedMessagesJson {
  const shown: FeedMessage[] = messages.map((m) => ({
    id: m.id,
    agent_id: m.agent_id,
    text: m.text,
    timestamp: m.timestamp,
    reply_to: m.reply_to,
    auth: m.auth,
    key_ref: m.key_ref,
    pubkey_hex: m.pubkey_hex,
  }));
  return JSON.stringify(shown) as FeedMessagesJson;
}

export const parseFeedMessages = (json: FeedMessagesJson): FeedMessage[] => JSON.parse(json) as FeedMessage[];
