"use client";

import { useEffect } from "react";

export default function ErrorPage({ error, retry }: { error: unknown; retry: () => void }) {
  useEffect(() => console.error(error), [error]);
  return (
    <div className="status-page">
      <p className="status-code">500</p>
      <h1>Something went wrong</h1>
      <p>The page could not be shown. Try again in a moment; if it keeps failing, the server may be restarting.</p>
      <p className="actions">
        <button type="button" className="btn btn-primary" onClick={() => retry()}>
          Try again
        </button>
        <a href="/" className="btn">
          Home
        </a>
      </p>
    </div>
  );
}
