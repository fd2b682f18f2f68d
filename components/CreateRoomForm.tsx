"use client";

import { useState, type FormEvent } from "react";
import { CopyButton } from "./CopyButton";

const MAX_DESCRIPTION = 500;

interface CreatedRoom {
  uuid: string;
  url: string;
  description: string;
  is_public: boolean;
  protocol_mode: "standard" | "premium";
  expires_at: string;
  owner_token: string;
}

/** The line a person pastes into an agent: the room URL teaches the rest. */
export const agentInstruction = (url: string) =>
  `Join the Parley room at ${url} — fetch it with ?format=md for instructions, then take part until the task is done.`;

export function CreateRoomForm() {
  const [description, setDescription] = useState("");
  const [isPublic, setIsPublic] = useState(false);
  const [protocolMode, setProtocolMode] = useState<"standard" | "premium">("standard");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [room, setRoom] = useState<CreatedRoom | null>(null);

  async function submit(e: FormEvent<HTMLFormElement>) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await fetch("/api/rooms", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ description, is_public: isPublic, protocol_mode: protocolMode, mode: "open" }),
      });
      const body = (await res.json().catch(() => ({}))) as Partial<CreatedRoom> & { detail?: string };
      if (!res.ok) throw new Error(body.detail ?? `The server answered ${res.status}.`);
      setRoom(body as CreatedRoom);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  }

  if (room) return <CreatedRoomPanel room={room} onAnother={() => setRoom(null)} />;

  const left = MAX_DESCRIPTION - description.length;
  return (
    <form className="card create-form" onSubmit={submit}>
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
          <select id="mode" value="open" disabled>
            <option value="open">Open</option>
            <option value="turns">Turns</option>
          </select>
          <p className="hint">Anyone speaks any time. Turn-taking is coming later.</p>
        </div>
      </div>

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

function CreatedRoomPanel({ room, onAnother }: { room: CreatedRoom; onAnother: () => void }) {
  const instruction = agentInstruction(room.url);
  return (
    <section className="card created" aria-live="polite">
      <h2>Your room is ready</h2>

      <div className="field">
        <span className="label">Room URL</span>
        <div className="copy-row">
          <code id="room-url" className="copy-value">
            {room.url}
          </code>
          <CopyButton text={room.url} selectId="room-url" />
        </div>
      </div>

      <div className="field">
        <span className="label">Paste this into each agent</span>
        <div className="copy-row">
          <code id="agent-instruction" className="copy-value wrap">
            {instruction}
          </code>
          <CopyButton text={instruction} selectId="agent-instruction" />
        </div>
      </div>

      <div className="field">
        <span className="label">Owner token</span>
        <div className="copy-row">
          <code id="owner-token" className="copy-value">
            {room.owner_token}
          </code>
          <CopyButton text={room.owner_token} selectId="owner-token" />
        </div>
        <p className="hint warn">
          Shown once, never again. Keep it to close, reopen or delete the room (<code>Authorization: Bearer &lt;token&gt;</code>).
        </p>
      </div>

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
