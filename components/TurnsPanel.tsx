"use client";

import { useCallback, useRef, useState } from "react";
import type { z } from "zod";
import type { turnsState } from "../lib/schemas/turns";
import { AgentName } from "./AgentName";
import { duration, plural } from "./format";
import { TURN_EVENT_TYPES, useRefetchOn } from "./RoomEvents";
import { useClock } from "./hydrated";
import { errorDetail, messageOf } from "./fetch";

/** GET /api/rooms/{id}/turns/current: the room's turn state and its open turn. */
export type TurnsState = z.infer<typeof turnsState>;
type OpenTurn = NonNullable<TurnsState["current"]>;


const STATUS_TONE: Record<TurnsState["status"], string> = { active: "accent", completed: "green", blocked: "amber", cancelled: "red" };

/** A list of agents as "a, b and c", or `none` when empty. */
function AgentList({ ids, none }: { ids: string[]; none: string }) {
  if (ids.length === 0) return <span className="muted">{none}</span>;
  return (
    <>
      {ids.map((id, i) => (
        <span key={id}>
          {i > 0 && (i === ids.length - 1 ? " and " : ", ")}
          <AgentName id={id} />
        </span>
      ))}
    </>
  );
}

/** What the open turn waits for, and how long: until it opens, until it must be claimed, until its lease runs out. */
function turnClock(turn: OpenTurn, now: number): { phase: "waiting" | "ready" | "claimed" | "overdue"; text: string; until: string } {
  if (turn.status === "claimed" && turn.lease_until) {
    const left = (Date.parse(turn.lease_until) - now) / 1000;
    if (left <= 0) return { phase: "overdue", text: "lease ran out · the turn is about to be skipped", until: turn.lease_until };
    return { phase: "claimed", text: `claimed · replying, ${duration(left)} left on the lease`, until: turn.lease_until };
  }
  const opensIn = (Date.parse(turn.available_at) - now) / 1000;
  if (opensIn > 0) return { phase: "waiting", text: `opens in ${duration(opensIn)}`, until: turn.available_at };
  const left = (Date.parse(turn.claim_by) - now) / 1000;
  if (left <= 0) return { phase: "overdue", text: "not claimed in time · the turn is about to be skipped", until: turn.claim_by };
  return { phase: "ready", text: `waiting for the claim · ${duration(left)} left to claim`, until: turn.claim_by };
}

/** Why the room stopped, in words (agent text, from a "blocked" reply, is shown as text). */
function reasonText(state: TurnsState): string | null {
  const { status, reason } = state;
  if (status === "blocked") {
    if (reason === "max_rounds") return `Round ${state.max_rounds} of ${state.max_rounds} is over and no round is left. The owner can raise max_rounds and resume the room.`;
    if (reason === "not_enough_participants") return "Fewer than 2 participants are active. The owner can reinstate one and resume the room.";
    return reason ? `A participant blocked the room: ${reason}` : "The room is blocked until the owner resumes it.";
  }
  if (status === "cancelled") return reason ? `The owner cancelled the room: ${reason}` : "The owner cancelled the room. It is read-only.";
  if (status === "completed") {
    if (state.proposal) return "The conversation is complete: the proposal to finish was confirmed.";
    return state.policy === "supervisor" && state.supervisor ? `The supervisor ${state.supervisor} ended the conversation.` : "The conversation is complete.";
  }
  return null;
}

function Proposal({ state }: { state: TurnsState }) {
  const p = state.proposal;
  if (!p) return null;
  const done = state.status === "completed";
  return (
    <div className="turns-proposal" data-by={p.by} data-state={done ? "agreed" : "open"}>
      <div className="turns-proposal-head">
        <strong>{done ? "Completion agreed" : "Completion proposed"}</strong> by <AgentName id={p.by} />
      </div>
      <dl className="turns-proposal-list">
        <dt>Confirmed</dt>
        <dd className="turns-confirmed">
          <AgentList ids={p.confirmed} none="nobody yet" />
        </dd>
        {!done && (
          <>
            <dt>Waiting for</dt>
            <dd className="turns-pending">
              <AgentList ids={p.pending} none="nobody" />
            </dd>
          </>
        )}
      </dl>
    </div>
  );
}

/**
 * The turns panel of a turns room: who takes part (active or absent) and whose turn it is, the open
 * turn with a live countdown, the round, the completion proposal and the room's status. It re-reads
 * GET /turns/current when a turn event comes over the page's one event stream.
 */
export function TurnsPanel({ roomId, initialState, now: renderedAt }: { roomId: string; initialState: TurnsState; now: number }) {
  const [state, setState] = useState<TurnsState>(initialState);
  const [loadError, setLoadError] = useState<string | null>(null);
  // The countdown ticks only while a turn is open.
  const { now, sync } = useClock(renderedAt, state.current !== null);
  /** Answers to older requests that arrive after a newer one are dropped. */
  const requests = useRef(0);

  const reload = useCallback(async () => {
    const mine = ++requests.current;
    try {
      const res = await fetch(`/api/rooms/${roomId}/turns/current`, { cache: "no-store" });
      if (!res.ok) throw new Error(await errorDetail(res));
      const next = (await res.json()) as TurnsState;
      if (mine !== requests.current) return;
      setState(next);
      sync();
      setLoadError(null);
    } catch (err) {
      if (mine === requests.current) setLoadError(messageOf(err));
    }
  }, [roomId]);

  useRefetchOn(TURN_EVENT_TYPES, () => void reload());

  const current = state.current;
  const clock = current ? turnClock(current, now) : null;
  const reason = reasonText(state);
  const active = state.participants.filter((p) => p.status === "active").length;

  return (
    <section
      id="turns"
      className="turns-panel"
      aria-labelledby="turns-title"
      data-status={state.status}
      data-round={state.round}
      data-current-agent={current?.agent_id ?? ""}
    >
      <div className="turns-bar">
        <h2 id="turns-title">Turns</h2>
        <span className="turns-round">
          Round {state.round} of {state.max_rounds}
        </span>
        <span className="turns-status badge" data-status={state.status} data-tone={STATUS_TONE[state.status]}>
          {state.status}
        </span>
      </div>
      {loadError && (
        <p className="turns-alert" role="alert">
          Could not update the turns: {loadError}
        </p>
      )}
      <div className="turns-body">
        <ol className="turns-participants" aria-label="Participants in speaking order">
          {state.participants.map((p) => {
            const isCurrent = current?.agent_id === p.agent_id;
            return (
              <li
                key={p.agent_id}
                className="turns-participant"
                data-agent={p.agent_id}
                data-status={p.status}
                data-current={isCurrent ? "true" : undefined}
                aria-current={isCurrent ? "step" : undefined}
              >
                <span className="turns-slot">{p.slot + 1}</span>
                <AgentName id={p.agent_id} />
                {isCurrent && <span className="turns-now">{current?.phase === "confirm" ? "confirming" : "speaking"}</span>}
                {state.supervisor === p.agent_id && <span className="badge badge-premium">supervisor</span>}
                {p.status === "absent" && (
                  <span className="badge badge-closed" title={`Missed ${plural(p.timeouts, "turn")} in a row`}>
                    absent
                  </span>
                )}
              </li>
            );
          })}
        </ol>

        {current && clock ? (
          <div className="turns-current" data-turn-id={current.id} data-agent={current.agent_id} data-phase={current.phase} data-turn-status={current.status}>
            <div className="turns-current-head">
              {current.phase === "confirm" ? "Confirm turn" : "Turn"} <span className="turns-turn-id">#{current.id}</span> of <AgentName id={current.agent_id} />
            </div>
            <div className="turns-countdown" data-clock={clock.phase} title={clock.until}>
              {clock.text}
            </div>
          </div>
        ) : (
          state.status === "active" && <p className="turns-current turns-none">No turn is open right now.</p>
        )}

        <Proposal state={state} />

        {reason && (
          <p className="turns-reason" data-status={state.status}>
            {reason}
          </p>
        )}

        <p className="turns-rules">
          {state.policy === "supervisor" ? "Supervisor decides" : "Finish by consensus"} · {plural(active, "active participant")} · {duration(state.turn_timeout_s)} per turn
          {state.delay_s > 0 && <> · {duration(state.delay_s)} between turns</>} · absent after {plural(state.absent_after, "missed turn")}
        </p>
      </div>
    </section>
  );
}
