// What a delivery's body says. JSON: {room, url, event} (the event as the SSE stream gives it) or
// {room, url, alert}; Slack: {text}, one line with a link to the room. Built from stored rows only,
// so every attempt of a delivery sends the same bytes under the same signature.
import type { LogEvent } from "../log/event";

export type WebhookFormat = "json" | "slack";

export interface Alert {
  kind: string;
  /** One sentence for a person. */
  summary: string;
  ts: string;
  /** The event that raised it, when one did. */
  seq: number | null;
  detail: Record<string, unknown>;
}

export interface BodyContext {
  format: WebhookFormat;
  room: string;
  roomUrl: string;
  /** The room's description (for the Slack line), "" when it has none. */
  description: string;
}

/** The body of an event delivery; `event` is what the SSE stream sends for it (lib/realtime/feed.ts eventData). */
export function eventBody(ctx: BodyContext, event: LogEvent & Record<string, unknown>): string {
  if (ctx.format === "slack") return JSON.stringify({ text: slackLine(ctx, eventSummary(event)) });
  return JSON.stringify({ room: ctx.room, url: ctx.roomUrl, event });
}

export function alertBody(ctx: BodyContext, alert: Alert): string {
  if (ctx.format === "slack") return JSON.stringify({ text: slackLine(ctx, `:rotating_light: ${alert.summary}`) });
  return JSON.stringify({ room: ctx.room, url: ctx.roomUrl, alert });
}

const oneLine = (s: string, max: number) => {
  const flat = s.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

/** Slack's mrkdwn reserves &, < and >; everything else is literal. */
const slackEscape = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function slackLine(ctx: BodyContext, summary: string): string {
  const label = ctx.description ? oneLine(ctx.description, 60) : `room ${ctx.room.slice(0, 8)}`;
  return `${slackEscape(summary)} — <${ctx.roomUrl}|${slackEscape(label)}>`;
}

/** A person's one-line reading of an event. */
export function eventSummary(event: Pick<LogEvent, "type" | "actor" | "payload">): string {
  const p = event.payload as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === "string" ? v : "");
  switch (event.type) {
    case "message.posted":
      return `${oneLine(event.actor, 60)}: ${oneLine(str(p.text), 280)}`;
    case "thread.opened":
      return `${oneLine(event.actor, 60)} opened "${oneLine(str(p.subject), 80)}": ${oneLine(str(p.value), 120)}`;
    case "discrepancy.recorded":
      return `Discrepancy: ${oneLine(str(p.description), 240)}`;
    case "room.blocked":
      return `The turns room is blocked${p.reason ? `: ${oneLine(str(p.reason), 200)}` : ""}`;
    case "room.completed":
      return "The turns room is complete";
    default:
      return `${event.type} by ${oneLine(event.actor, 60)}`;
  }
}
