"use client";

import { useCallback, useState } from "react";
import type { Task, TaskStatus } from "../lib/domain/tasks";
import { AgentName } from "./AgentName";
import { plural, duration } from "./format";
import { TASK_EVENT_TYPES, useRefetchOn } from "./RoomEvents";
import { useClock } from "./hydrated";
import { errorDetail, messageOf } from "./fetch";


const COLUMNS: { status: TaskStatus; title: string }[] = [
  { status: "open", title: "Open" },
  { status: "claimed", title: "Claimed" },
  { status: "submitted", title: "Submitted" },
  { status: "accepted", title: "Accepted" },
  { status: "rejected", title: "Rejected" },
  { status: "failed", title: "Failed" },
  { status: "cancelled", title: "Cancelled" },
];
/** Always shown, even when empty; the others only when they hold a task. */
const MAIN = new Set<TaskStatus>(["open", "claimed", "submitted", "accepted"]);

/** Time left on a lease, at the board's clock. */
function LeaseCountdown({ until, now }: { until: string; now: number }) {
  const left = (Date.parse(until) - now) / 1000;
  const text = left <= 0 ? "lease ran out" : `${duration(left)} left`;
  return (
    <span className="task-lease" data-expired={left <= 0 ? "true" : undefined} title={`Lease until ${until}`}>
      {text}
    </span>
  );
}

function TaskCard({ task: t, now }: { task: Task; now: number }) {
  const handoffActive = t.handoff && Date.parse(t.handoff.until) > now;
  return (
    <li className="task-card" data-task-id={t.id} data-status={t.status}>
      <div className="task-head">
        <span className="task-id">#{t.id}</span>
        <span className="task-title">{t.title}</span>
        <span className="task-priority" title="Priority 0–9, higher first">
          P{t.priority}
        </span>
      </div>
      {t.requires.length > 0 && (
        <div className="task-requires">
          {t.requires.map((c) => (
            <span key={c} className="task-cap">
              {c}
            </span>
          ))}
        </div>
      )}
      <div className="task-meta">
        by <AgentName id={t.created_by} />
        {t.reviewer && (
          <>
            {" "}
            · reviewer <AgentName id={t.reviewer} />
          </>
        )}
      </div>
      {t.claimant && (
        <div className="task-claimant">
          {t.status === "claimed" ? "claimed by" : "done by"} <AgentName id={t.claimant} />
          {t.status === "claimed" && t.lease_until && (
            <>
              {" "}
              · <LeaseCountdown until={t.lease_until} now={now} />
            </>
          )}
        </div>
      )}
      {handoffActive && t.handoff && (
        <div className="task-handoff">
          handed off to {t.handoff.to_agent ? <AgentName id={t.handoff.to_agent} /> : <span className="task-cap">{t.handoff.to_capability}</span>}
          {t.handoff.note && <span className="muted"> — {t.handoff.note}</span>}
        </div>
      )}
      {(t.failures > 0 || t.attempt > 1) && (
        <div className="task-failures" data-failures={t.failures}>
          {plural(t.failures, "failure")} of {t.max_failures} · attempt {t.attempt}
          {t.status === "failed" && t.failure_reasons.length > 0 && (
            <ul className="task-reasons">
              {t.failure_reasons.map((r, i) => (
                <li key={i}>{r}</li>
              ))}
            </ul>
          )}
        </div>
      )}
      {t.receipt && (
        <details className="task-receipt">
          <summary>
            receipt: <strong>{t.receipt.status}</strong> by <AgentName id={t.receipt.submitted_by} />
          </summary>
          {t.receipt.summary && <p className="task-summary">{t.receipt.summary}</p>}
          {t.receipt.artifacts.length > 0 && (
            <ul className="task-artifacts">
              {t.receipt.artifacts.map((a, i) => (
                // Artifacts are shown as text, never fetched or linked.
                <li key={i} data-type={a.type}>
                  <span className="task-cap">{a.type}</span> <code>{a.ref.length > 120 ? `${a.ref.slice(0, 120)}…` : a.ref}</code>
                  {a.verified !== undefined && " "}
                  {a.verified !== undefined && (
                    <span className={`badge ${a.verified ? "badge-signed" : "badge-anon"}`}>{a.verified ? "sha256 ok" : "sha256 mismatch"}</span>
                  )}
                </li>
              ))}
            </ul>
          )}
        </details>
      )}
      {t.review && (
        <div className="task-review" data-decision={t.review.decision}>
          review: <strong>{t.review.decision.replace("_", " ")}</strong> by <AgentName id={t.review.reviewer} />
          {t.review.note && <span className="muted"> — {t.review.note}</span>}
        </div>
      )}
    </li>
  );
}

/**
 * The room's task board: columns by status, live from the page's one event stream. `now` is the
 * server's time at render, so leases and handoffs hydrate to the text the server printed. A room
 * that does not use the board (no task yet: a turns room, most open rooms) does not show it: the
 * section stays hidden, still listening, and appears with the first task that arrives (or when a
 * re-read after a task event failed, to say so).
 */
export function TaskBoard({ roomId, initialTasks, now: renderedAt }: { roomId: string; initialTasks: Task[]; now: number }) {
  const [tasks, setTasks] = useState<Task[]>(initialTasks);
  const [loadError, setLoadError] = useState<string | null>(null);
  // The clock ticks only while a lease counts down or a handoff may run out.
  const { now, sync } = useClock(renderedAt, tasks.some((t) => (t.status === "claimed" && t.lease_until) || t.handoff));

  const reload = useCallback(async () => {
    try {
      const res = await fetch(`/api/rooms/${roomId}/tasks`);
      if (!res.ok) throw new Error(await errorDetail(res));
      setTasks(((await res.json()) as { tasks: Task[] }).tasks);
      sync();
      setLoadError(null);
    } catch (err) {
      setLoadError(messageOf(err));
    }
  }, [roomId]);

  useRefetchOn(TASK_EVENT_TYPES, () => void reload());

  const columns = COLUMNS.map((c) => ({ ...c, list: tasks.filter((t) => t.status === c.status) })).filter((c) => MAIN.has(c.status) || c.list.length > 0);

  return (
    <section id="board" className="task-board" aria-labelledby="board-title" data-tasks={tasks.length} hidden={tasks.length === 0 && !loadError}>
      <div className="task-board-bar">
        <h2 id="board-title">Task board</h2>
        <span className="task-board-count">{plural(tasks.length, "task")}</span>
      </div>
      {loadError && (
        <p className="task-board-alert" role="alert">
          Could not update the board: {loadError}
        </p>
      )}
      {tasks.length > 0 && (
        <div className="task-columns">
          {columns.map((c) => (
            <div key={c.status} className="task-column" data-status={c.status}>
              <h3>
                {c.title} <span className="group-count">{c.list.length}</span>
              </h3>
              <ul className="task-list">
                {c.list.map((t) => (
                  <TaskCard key={t.id} task={t} now={now} />
                ))}
              </ul>
            </div>
          ))}
        </div>
      )}
    </section>
  );
}
