/**
 * The arbiter's LLM client: any OpenAI-compatible chat-completions endpoint through the `openai`
 * package, one client per configured provider, tried in the configured order. Failures become
 * one of two kinds, because they call for different cures:
 *   - "provider": the endpoint is unreachable, slow, overloaded, or refuses our credentials —
 *     retrying later (or another provider) helps; the room's messages are not at fault;
 *   - "request": the endpoint refused this particular request (HTTP 400/413/422: too long,
 *     filtered) — a smaller batch may pass, and a single message that keeps failing is poison.
 * Error sentences are written here, from the status alone: never a URL, a key or a stack.
 */
import type { ArbiterProvider } from "../config";

type OpenAiLibrary = typeof import("openai").default;
/**
 * The `openai` package, loaded by the first call to a provider: a server without an arbiter (or
 * whose arbiter has not spoken yet) does not hold it in memory.
 */
let library: OpenAiLibrary | undefined;
async function openAi(): Promise<OpenAiLibrary> {
  return (library ??= (await import("openai")).default);
}

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface ChatAnswer {
  content: string | null;
  finishReason: string | null;
  /** Tokens the provider billed (prompt + completion), or an estimate when it does not say. */
  tokens: number;
}

export class LlmError extends Error {
  constructor(
    readonly kind: "provider" | "request",
    /** A sanitised sentence fragment: "did not answer in time", "failed (HTTP 503)". */
    readonly sentence: string,
  ) {
    super(sentence);
  }
}

export class Aborted extends Error {
  constructor() {
    super("the arbiter was stopped");
  }
}

export interface LlmProvider {
  readonly name: string;
  chat(messages: ChatMessage[], signal?: AbortSignal): Promise<ChatAnswer>;
}

export const MAX_OUTPUT_TOKENS = 4_096;

/** Maps whatever the client library threw to a sanitised, classified error (the library's own errors exist once it is loaded). */
export function classify(err: unknown, OpenAI: OpenAiLibrary | undefined = library): LlmError | Aborted {
  if (err instanceof Aborted) return new Aborted();
  if (!OpenAI) return err instanceof LlmError ? err : new LlmError("provider", "failed");
  if (err instanceof OpenAI.APIUserAbortError) return new Aborted();
  if (err instanceof OpenAI.APIConnectionTimeoutError) return new LlmError("provider", "did not answer in time");
  if (err instanceof OpenAI.APIConnectionError) return new LlmError("provider", "could not be reached");
  if (err instanceof OpenAI.APIError && typeof err.status === "number") {
    const s = err.status;
    if (s === 400 || s === 413 || s === 422) return new LlmError("request", `refused the request (HTTP ${s})`);
    if (s === 429) return new LlmError("provider", "is rate-limiting the server (HTTP 429)");
    if (s === 401 || s === 403) return new LlmError("provider", `refused the server's credentials (HTTP ${s})`);
    if (s === 404) return new LlmError("provider", "does not know the configured model or path (HTTP 404)");
    return new LlmError("provider", `failed (HTTP ${s})`);
  }
  if (err instanceof LlmError) return err;
  return new LlmError("provider", "failed");
}

export function openAiProvider(p: ArbiterProvider, timeoutMs: number): LlmProvider {
  // Retries are ours (with backoff, across providers), so the library makes one attempt.
  let client: InstanceType<OpenAiLibrary> | undefined;
  return {
    name: p.name,
    async chat(messages, signal) {
      if (signal?.aborted) throw new Aborted();
      // The library never removes its listener from the signal it is given: give it one per call.
      const call = new AbortController();
      const onAbort = () => call.abort();
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        client ??= new (await openAi())({ baseURL: p.baseUrl, apiKey: p.apiKey, maxRetries: 0, timeout: timeoutMs });
        const res = await client.chat.completions.create(
          { model: p.model, messages, response_format: { type: "json_object" }, temperature: 0, max_tokens: MAX_OUTPUT_TOKENS },
          { signal: call.signal },
        );
        const choice = res.choices?.[0];
        const content = choice?.message?.content ?? null;
        const estimate = Math.ceil((messages.reduce((n, m) => n + m.content.length, 0) + (content?.length ?? 0)) / 4);
        return { content, finishReason: choice?.finish_reason ?? null, tokens: res.usage?.total_tokens ?? estimate };
      } catch (err) {
        throw classify(err);
      } finally {
        signal?.removeEventListener("abort", onAbort);
      }
    },
  };
}

/** The configured providers in order (the first is the primary); empty when none is configured. */
export function configuredProviders(providers: ArbiterProvider[], timeoutMs: number): LlmProvider[] {
  return providers.map((p) => openAiProvider(p, timeoutMs));
}
