import { CopyButton } from "./CopyButton";
import { ago, distance, shortId } from "./format";
import type { RoomInfo } from "./types";

/** The watcher's server-rendered header: id, badges, URL, description (as text), expiry. */
export function RoomHeader({ room, now }: { room: Omit<RoomInfo, "loop_guard">; now: number }) {
  return (
    <header className="room-head">
      <div className="room-title">
        <h1>
          Room <code>{shortId(room.uuid)}</code>
        </h1>
        <div className="badges">
          <span className={`badge badge-${room.is_public ? "public" : "private"}`}>{room.is_public ? "public" : "private"}</span>
          <span className={`badge badge-${room.protocol_mode}`}>{room.protocol_mode}</span>
          {room.mode !== "open" && <span className="badge">{room.mode}</span>}
        </div>
      </div>
      <div className="copy-row">
        <code id="room-url" className="copy-value">
          {room.url}
        </code>
        <CopyButton text={room.url} selectId="room-url" label="Copy URL" />
      </div>
      {room.description ? <p className="room-description">{room.description}</p> : <p className="room-description muted">No description.</p>}
      <p className="room-dates muted small">
        Created{" "}
        <time dateTime={room.created_at} title={room.created_at}>
          {ago(room.created_at, now)}
        </time>
        {" · "}
        expires in{" "}
        <time dateTime={room.expires_at} title={room.expires_at}>
          {distance(Date.parse(room.expires_at) - now)}
        </time>{" "}
        unless someone posts
      </p>
    </header>
  );
}
