import { useSyncExternalStore } from "react";

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
