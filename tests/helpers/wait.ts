/**
 * Polls fn every ~10 ms until it returns true. Throws `${what} did not happen within ${ms} ms`
 * if it never does: the bound only keeps a broken feature from hanging the run, it is not a
 * measurement.
 */
export async function waitUntil(what: string, fn: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() >= deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
