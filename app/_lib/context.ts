import { headers } from "next/headers";
import { getServices } from "../../lib/runtime";
import type { Caller, Services } from "../../lib/services/context";

/** The services server.ts started, and the page's caller (origin: PARLEY_PUBLIC_URL, else this request's). */
export async function pageContext(): Promise<{ svc: Services; caller: Caller }> {
  const svc = getServices();
  const h = await headers();
  const proto = h.get("x-forwarded-proto")?.split(",")[0]?.trim();
  const scheme = proto === "https" || proto === "http" ? proto : "http";
  const origin = svc.config.publicUrl ?? `${scheme}://${h.get("host") ?? "localhost"}`;
  return { svc, caller: { ip: "page", origin } };
}

/** The machine code of a ParleyError (matched by code: Next bundles its own copy of the class). */
export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}
