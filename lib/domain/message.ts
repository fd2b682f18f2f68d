import { z } from "zod";
import type { LogEvent } from "../log/event";
import { keyRef } from "../log/keys";
import { as, defineEvents, seqId, type Feature } from "./event-kind";
import { agentKey, agentNameProblem } from "./names";

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
  /** The agents its text @-mentions (mentionsOf), as written; derived from the text, never sent. */
  mentions: string[];
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
    mentions: mentionsOf(payload.text),
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

// ---- @mentions ----

/**
 * `@name` in NFKC-normalised text (so `＠ｂｏｂ` is `@bob`): an `@` not glued to what comes before it
 * (a word, an e-mail address's local part, a URL path or query value: `bob@example.com`, `/@bob`,
 * `=@bob` are not mentions), then the name up to whitespace, another `@`, or a character that never
 * continues a name in running text (`,;!?`, CJK full stops and commas, brackets, quotes).
 */
const MENTION = /(?<![\p{L}\p{N}\p{M}\p{Pc}@/\\.+\-=])@([^\s@,;!?\u3001\u3002"'`()[\]{}<>\u00ab\u00bb\u2018-\u201f\u300c-\u300f\u3010\u3011]+)/gu;
/** What may end a token without being part of the name: punctuation, closing quotes, markdown emphasis. */
const TRAILING = /^[\p{Po}\p{Pe}\p{Pf}~]$/u;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

const MAY_MENTION = /[@\uFE6B\uFF20]/;

/** Distinct names read from one text, at most (a room has far fewer agents). */
export const MAX_MENTIONS = 50;

/** A token without what follows the name: `bob.` `bob:` `bob**` `bob...` → `bob`. A loop, not an anchored regex: it stays linear. */
function nameEnd(token: string): string {
  const chars = [...token];
  let end = chars.length;
  while (end > 0 && TRAILING.test(chars[end - 1]!)) end--;
  return chars.slice(0, end).join("");
}

/**
 * The agents a text @-mentions, in order of first mention, each once (by agentKey): `@name` tokens
 * whose name is one an agent_id may be (NFKC, 1–100 characters, no control, invisible or
 * bidirectional characters, not a service name), without the punctuation after it (`@bob,`
 * `(@bob)` `@bob's` `**@bob**`), among the first MAX_MENTIONS distinct names. A name is kept as
 * written, NFKC-normalised as agent ids are stored, and compares as the room compares names
 * (agentKey); an agent that has not spoken yet can be mentioned. `@bob@example.org` (an address)
 * is not a mention.
 */
export function mentionsOf(text: string): string[] {
  // The verifier replays events from untrusted bundles: a text that is not a string must stop the
  // replay (the regular expression below would read 5 as "5").
  if (typeof text !== "string") throw new TypeError("a message's text must be a string");
  // No `@`, and none of the two characters NFKC makes one of (U+FE6B, U+FF20): no mention, and no
  // normalisation to pay for (the verifier recomputes this for every message).
  if (!MAY_MENTION.test(text)) return [];
  const normal = text.normalize("NFKC");
  const seen = new Set<string>(); // keys
  const read = new Set<string>(); // names as written
  const out: string[] = [];
  for (const m of normal.matchAll(MENTION)) {
    const raw = m[1]!;
    if (raw.length > 400) continue; // far longer than any name
    const name = nameEnd(raw);
    if (name === raw && normal[m.index + 1 + raw.length] === "@") continue; // name@host: an address
    if (name.length === 0 || name.length > 100 || read.has(name)) continue;
    read.add(name);
    const key = agentKey(name);
    if (seen.has(key)) continue;
    // Each distinct name is checked once, and a text is read for MAX_MENTIONS of them at most: the
    // look-alike check costs, and the verifier recomputes this for every message of a room.
    if (seen.size >= MAX_MENTIONS) break;
    seen.add(key);
    if (!CONTROL.test(name) && agentNameProblem(name) === null) out.push(name);
  }
  return out;
}

/**
 * The agents a message is addressed to, by agentKey: those it mentions, its author excepted (an
 * agent is not woken by its own words). What `mentioning=` matches, on every read and stream.
 */
export function addressedKeys(message: Pick<Message, "agent_id" | "mentions">): string[] {
  const author = agentKey(message.agent_id);
  return [...new Set(message.mentions.map(agentKey))].filter((k) => k !== author);
}

/** Whether a message is addressed to `agent` (addressedKeys). */
export const isAddressedTo = (message: Pick<Message, "agent_id" | "mentions">, agent: string): boolean => addressedKeys(message).includes(agentKey(agent));

export const messagesFeature: Feature<Message[]> = {
  name: "messages",
  kinds: Object.values(MESSAGE_EVENTS),
  empty: () => [],
  apply: (messages, event, ctx) => void messages.push(messageFromEvent(event, ctx.leafHash)),
};
