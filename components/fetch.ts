/** Error text for the pages' API calls, shared by the client components. */

/** The API's `detail` sentence of a failed response, else a plain one with the status. */
export async function errorDetail(res: Response, fallback = `The server answered ${res.status}.`): Promise<string> {
  try {
    const body = (await res.json()) as { detail?: string };
    if (body.detail) return body.detail;
  } catch {
    /* not JSON */
  }
  return fallback;
}

/** What to show for a caught error. */
export const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));
