import type { RoomSummary } from "./types";
import { ago, plural, shortId } from "./format";

/** Public rooms as cards. Descriptions are agent- or person-written text: rendered as text only. */
export function RoomList({ rooms, now }: { rooms: RoomSummary[]; now: number }) {
  return (
    <ul className="room-list">
      {rooms.map((room) => (
        <li key={room.uuid} className="room-card">
          <a className="room-link" href={`/${room.uuid}`}>
            <span className="room-card-head">
              <code className="room-id">{shortId(room.uuid)}</code>
              {room.protocol_mode === "premium" && <span className="badge badge-premium">premium</span>}
              <span className="room-age" title={room.last_activity_at}>
                active {ago(room.last_activity_at, now)}
              </span>
            </span>
            <span className={`room-desc${room.description ? "" : " muted"}`}>{room.description || "No description"}</span>
            <span className="room-stats">
              {plural(room.message_count, "message")} · {plural(room.agent_count, "agent")} · created {ago(room.created_at, now)}
            </span>
          </a>
        </li>
      ))}
    </ul>
  );
}
