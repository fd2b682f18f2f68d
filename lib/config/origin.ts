/**
 * The origin Parley prints in URLs, instructions and install lines (`curl … | tar`). One rule for
 * the API (api/http.ts callerFor) and the pages (app/_lib/context.ts):
 *
 * 1. PARLEY_PUBLIC_URL when it is set, always.
 * 2. Else the request's Host, but only when it is loopback (localhost, 127.0.0.1, [::1], any port)
 *    or listed in PARLEY_ALLOWED_HOSTS (exactly: an entry without a port matches a Host without
 *    one). The scheme is http, or https when PARLEY_TRUST_PROXY is set and the proxy says so in
 *    X-Forwarded-Proto.
 * 3. Else the listen address: `http://<HOST>:<port>`, with `localhost` for a wildcard HOST
 *    (0.0.0.0, ::). A Host the operator did not allow never reaches a printed URL.
 */
import type { Config } from "./index";

/** A DNS name or IPv4 address, or a bracketed IPv6 address, then an optional port. */
export const HOST_PORT = /^(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/i;

export const validHostPort = (value: string) => {
  const m = HOST_PORT.exec(value);
  return m !== null && (m[1] === undefined || Number(m[1]) <= 65535);
};

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);
const WILDCARD_HOSTS = new Set(["", "0.0.0.0", "::", "[::]"]);

/** "host:port" → "host" (an IPv6 address keeps its brackets). */
const nameOf = (hostPort: string) => hostPort.replace(/:\d+$/, "");

/** What a request says about where it was sent. */
export interface RequestTarget {
  /** The Host header (or the authority of an absolute request target). */
  host?: string | null;
  /** X-Forwarded-Proto; used only when PARLEY_TRUST_PROXY says a proxy sets it. */
  forwardedProto?: string | null;
  /** The port the request arrived on, when the adapter knows it. */
  localPort?: number;
}

/** The origin to print for this request: PARLEY_PUBLIC_URL, an allowed Host, or the listen address. */
export function requestOrigin(config: Config, req: RequestTarget): string {
  if (config.publicUrl) return config.publicUrl;
  const proto = config.trustProxy > 0 ? req.forwardedProto?.split(",")[0]?.trim().toLowerCase() : undefined;
  const scheme = proto === "https" ? "https" : "http";
  let host = req.host?.trim().toLowerCase() ?? "";
  if (validHostPort(host)) {
    // The default port is the same origin written without it.
    if ((scheme === "http" && host.endsWith(":80")) || (scheme === "https" && host.endsWith(":443"))) host = nameOf(host);
    if (LOOPBACK_HOSTS.has(nameOf(host)) || config.allowedHosts.includes(host)) return `${scheme}://${host}`;
  }
  return listenOrigin(config, req.localPort);
}

/** `http://<HOST>:<port>`, `localhost` standing for a wildcard address; no port when it is 0 (not known yet). */
export function listenOrigin(config: Config, port = config.port): string {
  const raw = config.host.trim();
  const host = WILDCARD_HOSTS.has(raw) ? "localhost" : raw.includes(":") && !raw.startsWith("[") ? `[${raw}]` : raw;
  return port ? `http://${host}:${port}` : `http://${host}`;
}

const isLoopbackAddress = (host: string) => LOOPBACK_HOSTS.has(host) || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);

/** The start-up warning for a server reachable from elsewhere that does not know its public URL, if any. */
export function originWarning(config: Config): string | undefined {
  if (config.publicUrl || isLoopbackAddress(config.host.trim().toLowerCase())) return undefined;
  return (
    `Warning: PARLEY_PUBLIC_URL is not set and Parley listens on ${config.host}. Printed URLs and install lines use the ` +
    `request's Host only when it is loopback or in PARLEY_ALLOWED_HOSTS, else ${listenOrigin(config)}. ` +
    "Set PARLEY_PUBLIC_URL (required behind a proxy)."
  );
}
