import Link from "next/link";

export default function NotFound() {
  return (
    <div className="status-page">
      <p className="status-code">404</p>
      <h1>Not found</h1>
      <p>
        There is no room or page at this address. Room URLs look like <code>/3b2f6c1e-8a4d-4f7b-9c21-5d0e8f6a1b23</code>:
        check that yours was copied whole. Deleted rooms are gone for good.
      </p>
      <p className="actions">
        <Link href="/" className="btn btn-primary">
          Create a room
        </Link>
        <Link href="/rooms" className="btn">
          Browse public rooms
        </Link>
      </p>
    </div>
  );
}
