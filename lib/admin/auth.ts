/**
 * Who may act as the operator: the admin token (PARLEY_ADMIN_TOKEN), as `Authorization: Bearer`
 * on /api/admin/*, or a console session got by posting it to /admin/login. Never a token in a URL.
 *
 * A session is a signed cookie, not a row: `v1.<session id>.<expiry ms>.<HMAC>` under a key derived
 * from the server key and the admin token, so every instance with the server key checks it, the
 * cookie never holds the token, and changing the token ends every session. Each session has its
 * form token (CSRF): an HMAC of its id, which a page of another origin cannot read.
 */
import crypto from "node:crypto";
import type { Config } from "../config";
import { ParleyError } from "../errors";
import { utf8 } from "../log/bytes";
import type { Services } from "../services/context";

export const SESSION_COOKIE = "parley_admin";
/** The console's path: the cookie is sent nowhere else. */
export const CONSOLE_PATH = "/admin";

const equal = (a: string, b: string) => {
  const x = crypto.createHash("sha256").update(a).digest();
  const y = crypto.createHash("sha256").update(b).digest();
  return crypto.timingSafeEqual(x, y) && a.length === b.length;
};

/** Whether `token` is the admin token (constant time); false when none is configured. */
export function isAdminToken(svc: Services, token: string | undefined): boolean {
  const admin = svc.config.adminToken;
  return admin !== undefined && token !== undefined && equal(token, admin);
}

/** 403 forbidden unless `bearer` is the admin token. */
export function requireAdminToken(svc: Services, bearer: string | undefined): void {
  if (!svc.config.adminToken) throw new ParleyError("forbidden", "The admin API is off on this server: the operator sets PARLEY_ADMIN_TOKEN to turn it on.");
  if (!bearer) throw new ParleyError("forbidden", "The admin API needs the admin token: send Authorization: Bearer <admin token>.");
  if (!isAdminToken(svc, bearer)) throw new ParleyError("forbidden", "The token is not this server's admin token.");
}

/** Derived when needed (one Ed25519 signature), so no copy of it is kept around. */
function sessionKey(svc: Services): Buffer {
  const base = crypto.createHash("sha256").update(svc.key.sign(utf8("parley admin sessions v1"))).digest();
  return crypto.createHmac("sha256", base).update(`admin token:${svc.config.adminToken ?? ""}`).digest();
}

const mac = (svc: Services, text: string) => crypto.createHmac("sha256", sessionKey(svc)).update(text).digest("base64url");

export interface Session {
  id: string;
  expiresAt: number;
}

/** A new session and the cookie value that carries it. */
export function newSession(svc: Services): { session: Session; value: string } {
  const session = { id: crypto.randomBytes(18).toString("base64url"), expiresAt: svc.clock.now() + svc.config.adminSessionTtlMs };
  const body = `v1.${session.id}.${session.expiresAt}`;
  return { session, value: `${body}.${mac(svc, body)}` };
}

/** The session a Cookie header carries, if it is signed by this server, for this admin token, and not expired. */
export function readSession(svc: Services, cookieHeader: string | undefined): Session | null {
  if (!svc.config.adminToken || !cookieHeader) return null;
  const value = cookieHeader
    .split(";")
    .map((c) => c.trim())
    .find((c) => c.startsWith(`${SESSION_COOKIE}=`))
    ?.slice(SESSION_COOKIE.length + 1);
  const m = value ? /^v1\.([A-Za-z0-9_-]{24})\.(\d{1,16})\.([A-Za-z0-9_-]{43})$/.exec(value) : null;
  if (!m) return null;
  const [, id, exp, sig] = m as unknown as [string, string, string, string];
  if (!equal(sig, mac(svc, `v1.${id}.${exp}`))) return null;
  const expiresAt = Number(exp);
  return expiresAt > svc.clock.now() ? { id, expiresAt } : null;
}

/** The form token of a session: every console form carries it, every console POST must. */
export const formToken = (svc: Services, session: Session) => mac(svc, `csrf:${session.id}`);

export const formTokenMatches = (svc: Services, session: Session, token: string | undefined) => token !== undefined && equal(token, formToken(svc, session));

/** What a request says about where it was sent from and to. */
export interface RequestOrigins {
  /** The Origin header. */
  origin?: string;
  /** The Host header. */
  host?: string;
  /** X-Forwarded-Proto (believed only behind a trusted proxy). */
  forwardedProto?: string;
  /** Sec-Fetch-Site: set by the browser, never by a page's script. */
  fetchSite?: string;
}

/** https: the public URL says so, or a trusted proxy does. */
export function isHttps(config: Config, req: Pick<RequestOrigins, "forwardedProto">): boolean {
  if (config.publicUrl) return config.publicUrl.startsWith("https:");
  return config.trustProxy > 0 && req.forwardedProto?.split(",")[0]?.trim().toLowerCase() === "https";
}

/**
 * Whether a POST comes from a page of this server: its Origin is the public URL's, or the one the
 * request itself was sent to (scheme and Host). Browsers send Origin with every POST (the console's
 * pages ask for the `same-origin` referrer policy, under which it is not blanked to "null"); where
 * it is missing or "null", only Sec-Fetch-Site: same-origin will do.
 */
export function sameOrigin(config: Config, req: RequestOrigins): boolean {
  const origin = req.origin?.trim().toLowerCase();
  if (!origin || origin === "null") return req.fetchSite?.trim().toLowerCase() === "same-origin";
  const allowed = new Set<string>();
  if (config.publicUrl) allowed.add(new URL(config.publicUrl).origin.toLowerCase());
  if (req.host) allowed.add(`${isHttps(config, req) ? "https" : "http"}://${req.host.trim().toLowerCase()}`);
  return allowed.has(origin);
}

/** Set-Cookie of a session: HttpOnly, SameSite=Strict, only under /admin, Secure over https, expiring with it. */
export function sessionCookie(value: string, maxAgeMs: number, secure: boolean): string {
  return [`${SESSION_COOKIE}=${value}`, `Path=${CONSOLE_PATH}`, `Max-Age=${Math.floor(maxAgeMs / 1000)}`, "HttpOnly", "SameSite=Strict", ...(secure ? ["Secure"] : [])].join("; ");
}

/** Set-Cookie that ends the session in the browser (logout). */
export function clearedCookie(secure: boolean): string {
  return [`${SESSION_COOKIE}=`, `Path=${CONSOLE_PATH}`, "Max-Age=0", "HttpOnly", "SameSite=Strict", ...(secure ? ["Secure"] : [])].join("; ");
}
