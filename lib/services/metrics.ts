import crypto from "node:crypto";
import { ParleyError } from "../errors";
import type { Services } from "./context";

const LOOPBACK = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"]);

/**
 * /metrics is for the operator: the admin token, or a loopback peer when no proxy sits in front
 * (behind a proxy every peer is the proxy, so loopback proves nothing there).
 */
export function requireMetricsAccess(svc: Services, socketPeer: string, bearer: string | undefined): void {
  const admin = svc.config.adminToken;
  if (admin && bearer && bearer.length === admin.length && crypto.timingSafeEqual(Buffer.from(bearer), Buffer.from(admin))) return;
  if (svc.config.trustProxy === 0 && LOOPBACK.has(socketPeer)) return;
  throw new ParleyError("forbidden", "Metrics are served to the admin token or to loopback clients only.");
}

/** Prometheus text exposition of a few process and service figures. */
export async function metricsText(svc: Services): Promise<string> {
  const mem = process.memoryUsage();
  const counts = await svc.store.counts();
  const lines = [
    ["parley_rooms", "gauge", "Rooms holding data (open or closed)", counts.rooms],
    ["parley_events", "gauge", "Events stored across all rooms", counts.events],
    ["parley_live_listeners", "gauge", "Open SSE streams and waiting long-polls", svc.notifier.streamCount],
    ["process_resident_memory_bytes", "gauge", "Resident set size", mem.rss],
    ["process_heap_used_bytes", "gauge", "V8 heap in use", mem.heapUsed],
    ["process_uptime_seconds", "gauge", "Seconds since start", Math.round(process.uptime())],
  ] as const;
  return lines.map(([name, type, help, value]) => `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${value}\n`).join("");
}
