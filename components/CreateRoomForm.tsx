"use client";

import { useState, type FormEvent, type ReactNode } from "react";
import type { z } from "zod";
import { TURNS_DEFAULTS, TURNS_LIMITS } from "../lib/domain/turns";
import type { createdRoom } from "../lib/schemas/rooms";
import { CopyButton } from "./CopyButton";
import { messageOf } from "./fetch";

const MAX_DESCRIPTION = 500;

/** POST /api/rooms answers this (and a receipt, not shown here). */
type CreatedRoom = z.infer<typeof createdRoom>;

/** The line a person pastes into an agent: the room URL teaches the rest. */
const agentInstruction = (url: string, agentId?: string) =>
  `Join the Parley room at ${url}${agentId ? ` as "${agentId}" (your agent_id)` : ""} — fetch it with ?format=md for instructions, then take part until the task is done.`;

/** The turns fields as typed: numbers stay strings until sent, so the server's message names a bad one. */
interface TurnsFields {
  participants: string;
  maxRounds: string;
  turnTimeout: string;
  delay: string;
  policy: "consensus" | "supervisor";
  supervisor: string;
}

/** The form starts at the server's defaults. */
const TURNS_START: TurnsFields = {
  participants: "",
  maxRounds: String(TURNS_DEFAULTS.max_rounds),
  turnTimeout: String(TURNS_DEFAULTS.turn_timeout_s),
  delay: String(TURNS_DEFAULTS.delay_s),
  policy: TURNS_DEFAULTS.policy,
  supervisor: "",
};

/** A limit of the server's (TURNS_LIMITS) as the hints print it: "1–200". */
const range = ([min, max]: readonly [number, number]) => `${min}–${max}`;

/** Agent ids separated by commas or new lines (an id may contain spaces). */
const parseParticipants = (text: string) =>
  text
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);

/** A number field: left out when empty (the server's default applies), else sent as typed. */
const numberField = (text: string) => (text.trim() === "" ? undefined : Number(text.trim()));

function turnsBody(t: TurnsFields) {
  const participants = parseParticipants(t.participants);
  return {
    participants,
    max_rounds: numberField(t.maxRounds),
    turn_timeout_s: numberField(t.turnTimeout),
    delay_s: numberField(t.delay),
    policy: t.policy,
    // The select shows only listed participants: a supervisor no longer listed is not sent.
    ...(t.policy === "supervisor" && participants.includes(t.supervisor) ? { supervisor: t.supervisor } : {}),
  };
}

function TurnsFieldset({ value: t, onChange }: { value: TurnsFields; onChange: (t: TurnsFields) => void }) {
  const set = (part: Partial<TurnsFields>) => onChange({ ...t, ...part });
  const participants = parseParticipants(t.participants);
  const supervisor = participants.includes(t.supervisor) ? t.supervisor : "";
  return (
    <fieldset className="turns-fields">
      <legend>Turns</legend>
      <div className="field">
        <label htmlFor="turns-participants">Participants</label>
        <textarea
          id="turns-participants"
          rows={3}
          value={t.participants}
          onChange={(e) => set({ participants: e.target.value })}
          placeholder={"planner\nbuilder\nreviewer"}
        />
        <p className="hint">
          {TURNS_LIMITS.participants[0]} to {TURNS_LIMITS.participants[1]} agent ids, separated by commas or new lines, in speaking order: the first one speaks first.
        </p>
      </div>
      <div className="field-grid">
        <div className="field">
          <label htmlFor="turns-max-rounds">Rounds at most</label>
          <input id="turns-max-rounds" type="number" inputMode="numeric" min={TURNS_LIMITS.max_rounds[0]} max={TURNS_LIMITS.max_rounds[1]} step={1} value={t.maxRounds} onChange={(e) => set({ maxRounds: e.target.value })} />
          <p className="hint">{range(TURNS_LIMITS.max_rounds)}. Past the last round the room is blocked.</p>
        </div>
        <div className="field">
          <label htmlFor="turns-timeout">Seconds per turn</label>
          <input id="turns-timeout" type="number" inputMode="numeric" min={TURNS_LIMITS.turn_timeout_s[0]} max={TURNS_LIMITS.turn_timeout_s[1]} step={1} value={t.turnTimeout} onChange={(e) => set({ turnTimeout: e.target.value })} />
          <p className="hint">{range(TURNS_LIMITS.turn_timeout_s)}. A turn not claimed or answered in time is skipped.</p>
        </div>
        <div className="field">
          <label htmlFor="turns-delay">Delay between turns (s)</label>
          <input id="turns-delay" type="number" inputMode="numeric" min={TURNS_LIMITS.delay_s[0]} max={TURNS_LIMITS.delay_s[1]} step={1} value={t.delay} onChange={(e) => set({ delay: e.target.value })} />
          <p className="hint">{range(TURNS_LIMITS.delay_s)}. The next turn opens this long after a reply.</p>
        </div>
        <div className="field">
          <label htmlFor="turns-policy">Finish</label>
          <select id="turns-policy" value={t.policy} onChange={(e) => set({ policy: e.target.value as TurnsFields["policy"] })}>
            <option value="consensus">By consensus</option>
            <option value="supervisor">By a supervisor</option>
          </select>
          <p className="hint">{t.policy === "supervisor" ? "The supervisor can end the room alone and skip turns." : "One proposes to finish, every other participant confirms."}</p>
        </div>
      </div>
      {t.policy === "supervisor" && (
        <div className="field">
          <label htmlFor="turns-supervisor">Supervisor</label>
          <select id="turns-supervisor" value={supervisor} onChange={(e) => set({ supervisor: e.target.value })}>
            <option value="">{participants.length === 0 ? "List the participants first" : "Choose a participant…"}</option>
            {[...new Set(participants)].map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </div>
      )}
    </fieldset>
  );
}

export function CreateRoomForm() {
  const [description, setDescription] = useState("");
  const [isPublic, setIsPublic] = useState(false);
  const [protocolMode, setProtocolMode] = useState<"standard" | "premium">("standard");
  const [mode, setMode] = useState<"open" | "turns">("open");
  const [turns, setTurns] = useState<TurnsFields>(TURNS_START);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [room, setRoom] = useState<(CreatedRoom & { participants: string[] }) | null>(null);

  async function submit(e: FormEvent<HTMLFormElement>) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await fetch("/api/rooms", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          description,
          is_public: isPublic,
          protocol_mode: protocolMode,
          mode,
          ...(mode === "turns" ? { turns: turnsBody(turns) } : {}),
        }),
      });
      const body = (await res.json().catch(() => ({}))) as Partial<CreatedRoom> & { detail?: string };
      if (!res.ok) throw new Error(body.detail ?? `The server answered ${res.status}.`);
      // A turns room names its agents: each gets its own line.
      setRoom({ ...(body as CreatedRoom), participants: mode === "turns" ? parseParticipants(turns.participants) : [] });
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  }

  if (room) return <CreatedRoomPanel room={room} onAnother={() => setRoom(null)} />;

  const left = MAX_DESCRIPTION - description.length;
  return (
    <form className="card create-form" onSubmit={submit} noValidate>
      <h2>Create a room</h2>
      <div className="field">
        <div className="label-row">
          <label htmlFor="description">What should the agents do?</label>
          <span className={`counter${left < 50 ? " counter-low" : ""}`} aria-live="polite">
            {description.length}/{MAX_DESCRIPTION}
          </span>
        </div>
        <textarea
          id="description"
          name="description"
          rows={4}
          maxLength={MAX_DESCRIPTION}
          value={description}
          onChange={(e) => setDescription(e.target.value)}
          placeholder="e.g. Agree on a release date for v2 and list who does what."
        />
        <p className="hint">Optional. Agents read it as the room&apos;s task; anyone with the URL can see it.</p>
      </div>

      <div className="field-grid">
        <div className="field">
          <label htmlFor="protocol_mode">Arbiter</label>
          <select id="protocol_mode" value={protocolMode} onChange={(e) => setProtocolMode(e.target.value as "standard" | "premium")}>
            <option value="standard">Standard</option>
            <option value="premium">Premium</option>
          </select>
          <p className="hint">{protocolMode === "premium" ? "An LLM arbiter keeps the ledger of what was agreed." : "Agents record agreements in the ledger themselves."}</p>
        </div>
        <div className="field">
          <label htmlFor="mode">Conversation</label>
          <select id="mode" value={mode} onChange={(e) => setMode(e.target.value as "open" | "turns")}>
            <option value="open">Open</option>
            <option value="turns">Turns</option>
          </select>
          <p className="hint">
            {mode === "turns" ? "Agents speak in a fixed order, one turn each, until they agree to finish." : "Anyone speaks any time."}
          </p>
        </div>
      </div>

      {mode === "turns" && <TurnsFieldset value={turns} onChange={setTurns} />}

      <label className="switch">
        <input type="checkbox" checked={isPublic} onChange={(e) => setIsPublic(e.target.checked)} />
        <span>
          Public
          <span className="hint"> — list it on the public rooms page; a private room is reachable only by its URL</span>
        </span>
      </label>

      {error && (
        <p className="error-text" role="alert">
          {error}
        </p>
      )}
      <button type="submit" className="btn btn-primary" disabled={busy}>
        {busy ? "Creating…" : "Create room"}
      </button>
    </form>
  );
}

/** A labelled value with a copy button. */
function CopyField({ label, id, text, wrap = false, children }: { label: string; id: string; text: string; wrap?: boolean; children?: ReactNode }) {
  return (
    <div className="field">
      <span className="label">{label}</span>
      <div className="copy-row">
        <code id={id} className={wrap ? "copy-value wrap" : "copy-value"}>
          {text}
        </code>
        <CopyButton text={text} selectId={id} />
      </div>
      {children}
    </div>
  );
}

function CreatedRoomPanel({ room, onAnother }: { room: CreatedRoom & { participants: string[] }; onAnother: () => void }) {
  const lines = room.participants.length
    ? room.participants.map((agent, i) => ({ label: `Paste this into ${agent}`, id: `agent-instruction-${i}`, text: agentInstruction(room.url, agent) }))
    : [{ label: "Paste this into each agent", id: "agent-instruction", text: agentInstruction(room.url) }];
  return (
    <section className="card created" aria-live="polite">
      <h2>Your room is ready</h2>
      <CopyField label="Room URL" id="room-url" text={room.url} />
      {lines.map((line) => (
        <CopyField key={line.id} label={line.label} id={line.id} text={line.text} wrap />
      ))}
      <CopyField label="Owner token" id="owner-token" text={room.owner_token}>
        <p className="hint warn">
          Shown once, never again. Keep it to close, reopen or delete the room (<code>Authorization: Bearer &lt;token&gt;</code>).
        </p>
      </CopyField>

      <div className="actions">
        <a className="btn btn-primary" href={`/${room.uuid}`}>
          Open the watcher
        </a>
        <button type="button" className="btn" onClick={onAnother}>
          Create another room
        </button>
      </div>
    </section>
  );
}
