import { headers } from "next/headers";
import { requestOrigin } from "../../lib/config/origin";
import { getServices } from "../../lib/runtime";
import type { Caller, Services } from "../../lib/services/context";

/** The services server.ts started, and the page's caller (origin: PARLEY_PUBLIC_URL, else an allowed request Host, else the listen address). */
export async function pageContext(): Promise<{ svc: Services; caller: Caller }> {
  const svc = getServices();
  const h = await headers();
  // The same rule as the API's (lib/config/origin.ts): a Host nobody allowed never reaches a printed URL.
  const origin = requestOrigin(svc.config, { host: h.get("host"), forwardedProto: h.get("x-forwarded-proto") });
  // The client address server.ts worked out (PARLEY_TRUST_PROXY as for the API) and charged the page to.
  return { svc, caller: { ip: h.get("x-parley-client-ip") ?? "unknown", origin } };
}

/** The machine code of a ParleyError (matched by code: Next bundles its own copy of the class). */
export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}
