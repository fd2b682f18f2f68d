/**
 * SPEC 7: `?format=md|markdown|txt` → markdown; else an Accept with text/html → HTML; else one
 * with text/markdown or application/json → markdown; else HTML (compat).
 */
export function wantsMarkdown(format: string | null | undefined, accept: string | null | undefined): boolean {
  if (format && ["md", "markdown", "txt"].includes(format.toLowerCase())) return true;
  const a = (accept ?? "").toLowerCase();
  if (a.includes("text/html")) return false;
  return a.includes("text/markdown") || a.includes("application/json");
}

export const ROOM_PATH = /^\/([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\/?$/;
