/**
 * A stand-in LLM provider: a loopback HTTP server that speaks the OpenAI chat-completions
 * protocol (`POST /v1/chat/completions`). Tests script its replies call by call or give it a
 * handler that sees each request; it adds latency, fails on demand, counts calls and reports
 * `usage`. Without a script or handler it behaves as `dslModel`, a tiny deterministic "model".
 * It also counts the requests its client abandoned (closed the connection before the reply).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { subjectKey } from "../../lib/domain/ledger";
import type { RunningServer } from "../../server";
import { client, startTestServer } from "./server";

export interface PromptData {
  open_threads: { id: number; subject?: string; subject_key: string; value: string; status: string; owner: string }[];
  context: { id: number; agent: string; text: string }[];
  messages: { id: number; agent: string; text: string; reply_to?: number }[];
}

export interface FakeCall {
  /** 1-based number of this call. */
  n: number;
  body: any;
  system: string;
  /** The first user turn: the data section. */
  user: string;
  /** The data document parsed from the first user turn. */
  data: PromptData;
  /** True for a corrective retry (the conversation carries an earlier answer). */
  corrective: boolean;
  authorization: string | undefined;
  /** Set when the client closed the connection before this call was answered. */
  aborted: boolean;
}

export type FakeReply =
  | { content: string; finish_reason?: string; delayMs?: number; usage?: { prompt_tokens: number; completion_tokens: number } }
  | { status: number; body?: unknown; delayMs?: number }
  | { hangup: true; delayMs?: number };

export type FakeHandler = (call: FakeCall) => FakeReply | Promise<FakeReply>;

/** A reply whose content is this object as JSON. */
export const answer = (output: unknown): FakeReply => ({ content: JSON.stringify(output) });
export const EMPTY = answer({ threads: [], revisions: [], discrepancies: [] });

/** The JSON document of a prompt's data section (everything from the first brace). */
export function promptData(user: string): PromptData {
  return JSON.parse(user.slice(user.indexOf("{"))) as PromptData;
}

const VERB = /\b(PROPOSE|UPDATE|CONFIRM|CONTRADICT|RETRACT) ([^:.\n]+?)(?:: ([^.\n]+?))?(?=\.|\n|$)/g;

/**
 * A deterministic model for a small command language inside messages, e.g.
 * "Hello. PROPOSE delivery date: 1 December." / "CONFIRM delivery date." / "UPDATE price: 90 EUR".
 * It answers as a careful model would: existing threads by id, threads proposed in the same
 * answer by subject_key, a PROPOSE of an existing subject as an update (owner) or contradict
 * (anyone else), the quote copied from the message.
 */
export function dslModel(call: FakeCall): FakeReply {
  const { open_threads, messages } = call.data;
  const threads: unknown[] = [];
  const revisions: unknown[] = [];
  const proposedHere = new Map<string, string>(); // key → agent who proposed it in this answer
  for (const m of messages) {
    for (const match of m.text.matchAll(VERB)) {
      const [quote, verb, subject, value] = match as unknown as [string, string, string, string | undefined];
      const key = subjectKey(subject.trim());
      const open = open_threads.find((t) => t.subject_key === key && t.status !== "cancelled");
      const target = open ? { thread_id: open.id } : proposedHere.has(key) ? { subject_key: key } : undefined;
      const owner = open ? open.owner : proposedHere.get(key);
      const item = (kind: string, v?: string) => revisions.push({ ...target, kind, ...(v ? { value: v.trim() } : {}), source_msg_id: m.id, quote });
      if (verb === "PROPOSE") {
        if (!target) {
          threads.push({ subject: subject.trim(), subject_key: key, value: (value ?? "").trim(), source_msg_id: m.id, quote });
          proposedHere.set(key, m.agent);
        } else item(owner === m.agent ? "update" : "contradict", value);
      } else if (target) {
        item(verb.toLowerCase(), value);
      }
    }
  }
  return answer({ threads, revisions, discrepancies: [] });
}

export interface FakeLlm {
  /** Base URL to configure (ends in /v1). */
  baseUrl: string;
  calls: FakeCall[];
  readonly count: number;
  /** Requests whose client closed the connection before the reply (not the fake's own hang-ups). */
  readonly aborted: number;
  /** Replies for the next calls, in order; afterwards the handler answers. */
  script(...replies: (FakeReply | FakeHandler)[]): void;
  setHandler(handler: FakeHandler): void;
  /** Latency added to every reply (ms). */
  latencyMs: number;
  reset(): void;
  close(): Promise<void>;
}

export async function startFakeLlm(opts: { handler?: FakeHandler; latencyMs?: number } = {}): Promise<FakeLlm> {
  let handler: FakeHandler = opts.handler ?? dslModel;
  let queue: (FakeReply | FakeHandler)[] = [];
  const calls: FakeCall[] = [];

  let aborted = 0;
  let closing = false;

  const server = http.createServer((req, res) => {
    let call: FakeCall | undefined;
    let hungUp = false;
    // The client gave up when the connection closes before the reply was written (and not
    // because this fake hung up or is shutting down).
    const gone = new Promise<void>((resolve) =>
      res.on("close", () => {
        if (!res.writableEnded && !hungUp && !closing) {
          aborted++;
          if (call) call.aborted = true;
        }
        resolve();
      }),
    );
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (raw += chunk));
    req.on("end", () => {
      void (async () => {
        if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
          res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "not found" } }));
          return;
        }
        const body = JSON.parse(raw);
        const msgs = body.messages as { role: string; content: string }[];
        const user = msgs.find((m) => m.role === "user")?.content ?? "";
        call = {
          n: calls.length + 1,
          body,
          system: msgs.find((m) => m.role === "system")?.content ?? "",
          user,
          data: promptData(user),
          corrective: msgs.length > 2,
          authorization: req.headers.authorization,
          aborted: false,
        };
        calls.push(call);
        const next = queue.shift() ?? handler;
        const reply = typeof next === "function" ? await next(call) : next;
        const delay = (reply.delayMs ?? 0) + fake.latencyMs;
        if (delay > 0) {
          // A client that leaves during the delay ends the wait: nobody is left to answer.
          let timer: ReturnType<typeof setTimeout> | undefined;
          await Promise.race([new Promise((r) => (timer = setTimeout(r, delay))), gone]);
          clearTimeout(timer);
        }
        if (res.destroyed) return;
        if ("hangup" in reply) {
          hungUp = true;
          return void req.socket.destroy();
        }
        if ("status" in reply) {
          res.writeHead(reply.status, { "content-type": "application/json" }).end(JSON.stringify(reply.body ?? { error: { message: `fake failure ${reply.status}`, type: "server_error" } }));
          return;
        }
        const promptTokens = Math.ceil(msgs.reduce((n, m) => n + m.content.length, 0) / 4);
        const usage = reply.usage ?? { prompt_tokens: promptTokens, completion_tokens: Math.ceil(reply.content.length / 4) };
        res.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify({
            id: `chatcmpl-fake-${call.n}`,
            object: "chat.completion",
            created: Math.floor(Date.now() / 1000),
            model: body.model,
            choices: [{ index: 0, message: { role: "assistant", content: reply.content }, finish_reason: reply.finish_reason ?? "stop" }],
            usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
          }),
        );
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  const fake: FakeLlm = {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    calls,
    get count() {
      return calls.length;
    },
    get aborted() {
      return aborted;
    },
    script: (...replies) => void (queue = [...queue, ...replies]),
    setHandler: (h) => void (handler = h),
    latencyMs: opts.latencyMs ?? 0,
    reset() {
      calls.length = 0;
      aborted = 0;
      queue = [];
      handler = opts.handler ?? dslModel;
    },
    async close() {
      closing = true;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return fake;
}

/** Server settings that point the arbiter at a fake provider, with test-sized delays. */
export function arbiterEnv(llm: { baseUrl: string }, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PARLEY_ARBITER_BASE_URL: llm.baseUrl,
    PARLEY_ARBITER_MODEL: "fake-model",
    PARLEY_ARBITER_API_KEY: "sk-test-SECRET-key-0123456789",
    PARLEY_ARBITER_BACKOFF: "5ms",
    PARLEY_ARBITER_RETRIES: "2",
    PARLEY_ARBITER_COALESCE: "300ms",
    PARLEY_ARBITER_TIMEOUT: "5s",
    ...extra,
  };
}

export interface ArbiterApi {
  llm: FakeLlm;
  server: RunningServer;
  api: ReturnType<typeof client>;
  /** Shuts the server, then the fake LLM if this call started it. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * A real server whose arbiter talks to a fake LLM: the given one, or a new one. A plain factory,
 * not a hook registrar: callers decide when to start and close it.
 */
export async function startArbiterApi(env: Record<string, string> = {}, opts: { llm?: FakeLlm } = {}): Promise<ArbiterApi> {
  const llm = opts.llm ?? (await startFakeLlm());
  const ownLlm = !opts.llm;
  let server: RunningServer;
  try {
    server = await startTestServer(arbiterEnv(llm, env));
  } catch (err) {
    if (ownLlm) await llm.close();
    throw err;
  }
  let closed: Promise<void> | undefined;
  return {
    llm,
    server,
    api: client(server.url),
    close() {
      closed ??= (async () => {
        try {
          await server.close();
        } finally {
          if (ownLlm) await llm.close();
        }
      })();
      return closed;
    },
  };
}
