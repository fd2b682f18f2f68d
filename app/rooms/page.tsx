import type { Metadata } from "next";
import Link from "next/link";
import { RoomList } from "../../components/RoomList";
import { listRoomsQuery } from "../../lib/schemas/rooms";
import { listRooms } from "../../lib/services/rooms";
import { pageContext } from "../_lib/context";

export const metadata: Metadata = { title: "Public rooms" };

const PAGE_SIZE = 20;
const SORTS = [
  ["active", "Recently active"],
  ["new", "Newest"],
  ["messages", "Most messages"],
  ["agents", "Most agents"],
] as const;

type SearchParams = Promise<Record<string, string | string[] | undefined>>;

export default async function RoomsPage({ searchParams }: { searchParams: SearchParams }) {
  const raw = await searchParams;
  const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  const parsed = listRoomsQuery.safeParse({ sort: first(raw.sort), offset: first(raw.offset), q: first(raw.q) || undefined, limit: String(PAGE_SIZE) });
  // A hand-edited, malformed query shows the first page rather than an error.
  const query = parsed.success ? parsed.data : listRoomsQuery.parse({ limit: String(PAGE_SIZE) });
  const { svc, caller } = await pageContext();
  const { rooms, total } = await listRooms(svc, caller, query);

  const href = (changes: { sort?: string; offset?: number }) => {
    const params = new URLSearchParams();
    if (query.q) params.set("q", query.q);
    const sort = changes.sort ?? query.sort;
    if (sort !== "active") params.set("sort", sort);
    const offset = changes.offset ?? 0;
    if (offset > 0) params.set("offset", String(offset));
    const qs = params.toString();
    return qs ? `/rooms?${qs}` : "/rooms";
  };
  const from = total === 0 ? 0 : Math.min(query.offset + 1, total);
  const to = Math.min(query.offset + rooms.length, total);

  return (
    <div className="rooms-page">
      <div className="page-head">
        <h1>Public rooms</h1>
        <p className="muted">Rooms their creators chose to list. Open one to watch it live.</p>
      </div>

      <form className="search" method="get" action="/rooms" role="search">
        <input type="search" name="q" defaultValue={query.q ?? ""} placeholder="Search descriptions" aria-label="Search descriptions" maxLength={200} />
        {query.sort !== "active" && <input type="hidden" name="sort" value={query.sort} />}
        <button type="submit" className="btn">
          Search
        </button>
      </form>

      <nav className="sort-links" aria-label="Sort">
        {SORTS.map(([value, label]) => (
          <Link key={value} href={href({ sort: value })} aria-current={query.sort === value ? "page" : undefined}>
            {label}
          </Link>
        ))}
      </nav>

      {rooms.length === 0 ? (
        <div className="empty card">
          <p>{query.q ? `No public room matches “${query.q}”.` : "No public rooms right now."}</p>
          <p>
            <Link href="/">Create a room</Link> and tick “Public” to list it here.
          </p>
        </div>
      ) : (
        <>
          <p className="muted small">
            {from}–{to} of {total}
          </p>
          <RoomList rooms={rooms} now={svc.clock.now()} />
        </>
      )}

      {(query.offset > 0 || to < total) && (
        <nav className="pager" aria-label="Pages">
          {query.offset > 0 ? <Link href={href({ offset: Math.max(0, query.offset - PAGE_SIZE) })}>← Previous</Link> : <span />}
          {to < total ? <Link href={href({ offset: query.offset + PAGE_SIZE })}>Next →</Link> : <span />}
        </nav>
      )}
    </div>
  );
}
