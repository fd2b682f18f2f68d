/** Small, pure formatting helpers shared by server and client components. */

/** The first block of a room id: enough to tell rooms apart at a glance. */
export const shortId = (uuid: string) => uuid.slice(0, 8);

/** A stable hue for an agent name (FNV-1a), so one agent keeps its colour everywhere. */
export function agentHue(agentId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < agentId.length; i++) {
    h ^= agentId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % 360;
}

/** "3 days", "5 h", "12 min": a coarse, rounded distance between two instants. */
export function distance(ms: number): string {
  const minutes = Math.round(Math.abs(ms) / 60_000);
  if (minutes < 1) return "under a minute";
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} h`;
  return `${Math.round(hours / 24)} days`;
}

/** "42 s", "4 min 05 s", "2 h 10 min": a countdown, to the second under an hour. */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
}

export const ago = (iso: string, now: number) => {
  const ms = now - Date.parse(iso);
  return ms < 60_000 ? "just now" : `${distance(ms)} ago`;
};

/** "1,000" for counts: grouped by hand (toLocaleString builds a formatter at every call, a visible cost on a server rendering pages). */
const grouped = (n: number) => (Number.isSafeInteger(n) ? String(n).replace(/\B(?=(\d{3})+$)/g, ",") : n.toLocaleString("en"));

export const plural = (n: number, one: string, many = `${one}s`) => `${grouped(n)} ${n === 1 ? one : many}`;
