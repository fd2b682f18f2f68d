import type { Services } from "./services/context";

/**
 * Next.js bundles its own copy of our modules, so the pages reach the one set of services that
 * server.ts built through the process global instead of opening a second database.
 */
const KEY = Symbol.for("parley.services");

export function setServices(svc: Services): void {
  (globalThis as Record<symbol, unknown>)[KEY] = svc;
}

export function getServices(): Services {
  const svc = (globalThis as Record<symbol, unknown>)[KEY] as Services | undefined;
  if (!svc) throw new Error("Parley services are not running: start the app with `npm start` (server.ts).");
  return svc;
}
