import { useEffect, useState, useSyncExternalStore } from "react";

const noSubscribe = () => () => {};

/**
 * False while rendering on the server and hydrating, true after: what only the browser knows (local
 * time, rendered markdown) waits for it, so the first render matches the server's HTML.
 */
export const useHydrated = () =>
  useSyncExternalStore(
    noSubscribe,
    () => true,
    () => false,
  );

/**
 * The time countdowns show: the server's render time first (so the text hydrates unchanged), then
 * the browser's, ticking every second while `ticking`. `sync` sets it to now (after a re-read).
 */
export function useClock(renderedAt: number, ticking: boolean): { now: number; sync: () => void } {
  const [now, setNow] = useState(renderedAt);
  useEffect(() => {
    if (!ticking) return;
    setNow(Date.now());
    const tick = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(tick);
  }, [ticking]);
  return { now, sync: () => setNow(Date.now()) };
}
