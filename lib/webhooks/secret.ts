// A webhook's secret is not stored: it is HMAC-SHA256(webhook key, id), the webhook key derived
// from the server key (as the turn lease secret is). Every instance with the server key recomputes
// it to sign a delivery, so nothing that could forge a signature sits in the database; only the
// secret's SHA-256 is kept, to check `Authorization: Bearer <secret>`. Receivers verify with the
// secret itself: X-Parley-Signature = sha256=<hex HMAC-SHA256(secret, body)>.
import crypto from "node:crypto";
import { utf8 } from "../log/bytes";
import type { Services } from "../services/context";

/** Derived when needed (one Ed25519 signature: microseconds), so no copy of it is kept around. */
function webhookKey(svc: Services): Buffer {
  // Ed25519 signatures are deterministic (RFC 8032): the same server key gives the same bytes everywhere.
  return crypto.createHash("sha256").update(svc.key.sign(utf8("parley webhook secrets v1"))).digest();
}

export const SECRET_PREFIX = "whsec_";

/** The secret of webhook `id`: the same on every instance that holds the server key. */
export function webhookSecret(svc: Services, id: string): string {
  return SECRET_PREFIX + crypto.createHmac("sha256", webhookKey(svc)).update(`webhook:${id}`).digest("base64url");
}

/** The X-Parley-Signature value of `body` under `secret`. */
export function signature(secret: string, body: string): string {
  return `sha256=${crypto.createHmac("sha256", secret).update(body).digest("hex")}`;
}
