/**
 * One extraction run over a room (SPEC 5.3): the messages after the watermark (or all of them for
 * a full rescan), in batches that fit the token budget, each answered by the model and applied
 * through `applyExtraction` under the ledger's rules on behalf of the messages' authors.
 *
 * Failures never block the room: a batch whose answer is unusable is split until the message at
 * fault is alone, and a message that keeps failing is recorded (arbiter.failed) and skipped. A
 * provider that does not answer at all is an outage: the run stops, the watermark stays where the
 * last applied batch left it, and the caller gets 502 arbiter_failed with a sanitised sentence.
 */
import { messageFromRow } from "../store/rows";
import type { ArbiterConfig } from "../config";
import { subjectKey } from "../domain/ledger";
import type { Message } from "../domain/message";
import { ParleyError } from "../errors";
import type { ArbiterOutput } from "../schemas/arbiter";
import { applyExtraction, recordExtractionError, skipPoisonMessage } from "../services/arbiter-apply";
import type { Services } from "../services/context";
import { requireRoom } from "../services/access";
import { readAnswer, type ModelAnswer } from "./answer";
import { Aborted, LlmError, type ChatMessage, type LlmProvider } from "./client";
import { composePrompt, correctionPrompt, type Prompt } from "./prompt";
import type { ExtractionSummary } from "../schemas/arbiter-summary";

export interface ExtractDeps {
  providers: LlmProvider[];
  config: ArbiterConfig;
  signal?: AbortSignal;
}

const CONTEXT_MESSAGES = 5;
const PAGE = 500;

/** The provider is not usable at all (down, refusing us, or answering nothing usable to anything). */
class Outage extends Error {
  constructor(readonly reason: string, readonly attempts: number) {
    super(reason);
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Aborted());
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Aborted());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Exponential backoff with ±25 % jitter, capped at 30 s. */
const backoff = (base: number, attempt: number) => Math.min(30_000, base * 2 ** attempt * (0.75 + Math.random() * 0.5));

const normalise = (s: string) =>
  s
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[\u2018\u2019\u201b`]/g, "'")
    .replace(/[\u201c\u201d\u201e«»]/g, '"')
    .replace(/\s+/g, " ")
    .trim();
const words = (s: string) => s.match(/[\p{L}\p{N}]+/gu) ?? [];

/**
 * True when a quote is taken from the message: verbatim (up to case, spacing and quotation
 * marks), or — for quotes stitched together with "…" — when nearly all its words are there. An
 * item whose quote is not in its source message was not said by that message's author.
 */
export function quoteFits(quote: string, text: string): boolean {
  const q = normalise(quote).replace(/^["'\s.…]+|["'\s.…]+$/g, "");
  if (!q) return false;
  const t = normalise(text);
  if (t.includes(q)) return true;
  const have = new Set(words(t));
  const want = words(q);
  return want.length > 0 && want.filter((w) => have.has(w)).length / want.length >= 0.75;
}

/** Every message of the room after `since`, oldest first. */
async function messagesAfter(svc: Services, room: string, since: number): Promise<Message[]> {
  const out: Message[] = [];
  for (let cursor = since; ; ) {
    const rows = await svc.store.listMessages(room, cursor, PAGE);
    out.push(...rows.map(messageFromRow));
    if (rows.length < PAGE) return out;
    cursor = rows.at(-1)!.seq;
  }
}

/** Up to `count` messages just before message `before`, oldest first (ids are event seqs, so sparse). */
async function messagesBefore(svc: Services, room: string, before: number, count: number): Promise<Message[]> {
  for (let span = 64; ; span *= 4) {
    const since = Math.max(0, before - 1 - span);
    const rows = (await svc.store.listMessages(room, since, before - 1 - since)).filter((r) => r.seq < before);
    if (rows.length >= count || since === 0) return rows.slice(-count).map(messageFromRow);
  }
}

class Run {
  readonly summary: ExtractionSummary;
  private debt = { calls: 0, tokens: 0 };
  /** Whether any call of this run got a usable answer: the provider works, so a failing message is at fault. */
  private answered = false;

  constructor(
    private readonly svc: Services,
    private readonly room: string,
    private readonly deps: ExtractDeps,
    full: boolean,
  ) {
    this.summary = {
      full, messages: 0, from_msg_id: null, to_msg_id: null, batches: 0, calls: 0, tokens: 0, applied: 0, skipped: 0,
      skipped_items: [], failed_messages: [], corrected: 0, salvaged: 0, last_extracted_msg_id: 0,
    };
  }

  /** Calls and tokens spent since the last write, handed to the next one so the room's counters see them. */
  takeDebt() {
    const debt = this.debt;
    this.debt = { calls: 0, tokens: 0 };
    return debt;
  }

  private skip(item: string, reason: string) {
    this.summary.skipped++;
    if (this.summary.skipped_items.length < 50) this.summary.skipped_items.push({ item, reason });
  }

  private async call(provider: LlmProvider, messages: ChatMessage[]) {
    // Every attempt counts as a call, answered or not; tokens are what the provider billed.
    this.debt.calls++;
    this.summary.calls++;
    const answer = await provider.chat(messages, this.deps.signal);
    this.debt.tokens += answer.tokens;
    this.summary.tokens += answer.tokens;
    return answer;
  }

  /** One attempt: each provider in order; an unusable answer gets one corrective retry. */
  private async ask(prompt: Prompt): Promise<{ ok: true; answer: ModelAnswer } | { ok: false; kind: "provider" | "content"; reason: string }> {
    let content: string | undefined;
    let provider: string | undefined;
    const several = this.deps.providers.length > 1;
    for (const p of this.deps.providers) {
      try {
        const base: ChatMessage[] = [{ role: "system", content: prompt.system }, { role: "user", content: prompt.user }];
        const first = await this.call(p, base);
        const read = readAnswer(first.content, "strict");
        if (read.ok) {
          if (read.answer.salvaged) this.summary.salvaged++;
          return read;
        }
        const second = await this.call(p, [
          ...base,
          { role: "assistant", content: (first.content ?? "").slice(0, 8_000) },
          { role: "user", content: correctionPrompt(read.problem) },
        ]);
        const again = readAnswer(second.content, "lenient");
        if (again.ok) {
          this.summary.corrected++;
          if (again.answer.salvaged) this.summary.salvaged++;
          return again;
        }
        content = "the model's answer could not be used, even after a corrective retry";
      } catch (err) {
        if (err instanceof Aborted) throw err;
        const e = err instanceof LlmError ? err : new LlmError("provider", "failed");
        if (e.kind === "request") content = `the LLM provider ${e.sentence}`;
        else provider = several ? `no configured LLM provider answered (the last one ${e.sentence})` : `the LLM provider ${e.sentence}`;
      }
    }
    return content ? { ok: false, kind: "content", reason: content } : { ok: false, kind: "provider", reason: provider ?? "the LLM provider failed" };
  }

  /** Provider failures are retried with backoff; an unusable answer is returned at once (splitting is its cure). */
  private async askWithRetries(prompt: Prompt) {
    const { retries, backoffMs } = this.deps.config;
    for (let attempt = 0; ; attempt++) {
      const result = await this.ask(prompt);
      if (result.ok) this.answered = true;
      if (result.ok || result.kind === "content") return result;
      if (attempt >= retries) throw new Outage(result.reason, attempt + 1);
      await sleep(backoff(backoffMs, attempt), this.deps.signal);
    }
  }

  /** Asks about one harmless message instead of `like`: true when the provider answers it usably. */
  private async probe(like: Message): Promise<boolean> {
    const harmless: Message = { ...like, agent_id: "probe", text: "Hello, everyone.", reply_to: null };
    const { config } = this.deps;
    const prompt = composePrompt([harmless], [], [], { tokenBudget: config.tokenBudget, batchMessages: 1 });
    const result = await this.ask(prompt);
    if (result.ok) this.answered = true;
    return result.ok;
  }

  /** Extracts from the first messages of `fresh` that fit one prompt; returns how many it consumed. */
  async processSome(fresh: Message[], context: Message[]): Promise<number> {
    const { config } = this.deps;
    const threads = await this.svc.store.listThreads(this.room);
    const prompt = composePrompt(fresh, context, threads, { tokenBudget: config.tokenBudget, batchMessages: config.batchMessages, contextMessages: CONTEXT_MESSAGES });
    const batch = fresh.slice(0, prompt.included);
    let result = await this.askWithRetries(prompt);
    if (result.ok) {
      await this.apply(batch, result.answer);
      return batch.length;
    }
    if (batch.length > 1) {
      // Isolate the message at fault: the first half now, the rest goes back to the caller's loop.
      const half = Math.ceil(batch.length / 2);
      for (let done = 0; done < half; ) done += await this.processSome(batch.slice(done, half), [...context, ...batch.slice(0, done)]);
      return half;
    }
    for (let attempt = 0; attempt < config.retries; attempt++) {
      await sleep(backoff(config.backoffMs, attempt), this.deps.signal);
      result = await this.askWithRetries(prompt);
      if (result.ok) {
        await this.apply(batch, result.answer);
        return 1;
      }
    }
    const msg = batch[0]!;
    // Before blaming the message, make sure the provider can answer anything at all: a wrong
    // model name or an unsupported parameter fails every request, and must not skip every message.
    if (!this.answered && !(await this.probe(msg))) throw new Outage(result.reason, config.retries + 1);
    await skipPoisonMessage(this.svc, this.room, msg.id, `Message ${msg.id} was skipped by the arbiter: ${result.reason} (${config.retries + 1} attempts).`, this.takeDebt());
    this.summary.failed_messages.push(msg.id);
    return 1;
  }

  /**
   * Messages the arbiter already took items from. A rescan does not take more from them: the
   * model sees the ledger those items made and may read the message differently against it (the
   * proposal that opened a thread looks like an update of that thread), so items are keyed by
   * their source message, whatever their kind.
   */
  private async extractedMessages(): Promise<Set<number>> {
    const done = new Set<number>();
    for (const r of await this.svc.store.listRevisions(this.room)) if (r.via === "arbiter" && r.source_msg_id !== null) done.add(r.source_msg_id);
    for (const d of await this.svc.store.listDiscrepancies(this.room)) if (d.recorded_by === "arbiter" && d.source_msg_id !== null) done.add(d.source_msg_id);
    return done;
  }

  /**
   * Applies an answer. Items whose quote is not in their source message are dropped. Revisions of
   * threads proposed in the same answer name them by subject_key; they are applied in a second
   * step (a "phase") once those threads exist, so the batch is applied in message order, in as
   * many transactions as it has such messages plus one.
   */
  async apply(batch: Message[], answer: ModelAnswer): Promise<void> {
    this.summary.batches++;
    for (const d of answer.dropped) this.skip("malformed item", d);
    const byId = new Map(batch.map((m) => [m.id, m]));
    const done = await this.extractedMessages();
    const fromDone = (id: number, label: string) => {
      if (!done.has(id)) return false;
      this.skip(label, `message ${id} was already extracted`);
      return true;
    };
    const evidenced = <T extends { source_msg_id: number; quote: string }>(items: T[], label: (t: T) => string): T[] =>
      items.filter((t) => {
        const m = byId.get(t.source_msg_id);
        if (!m) return true; // outside the batch: applyExtraction says so
        if (fromDone(m.id, label(t))) return false;
        if (quoteFits(t.quote, m.text)) return true;
        this.skip(label(t), t.quote ? `its quote does not appear in message ${m.id}` : `it quotes nothing from message ${m.id}`);
        return false;
      });
    const { keyed } = answer;
    const threads = evidenced(answer.output.threads, (t) => `thread "${t.subject}"`);
    const revisions = evidenced(answer.output.revisions, (r) => `${r.kind} of thread ${r.thread_id}`);
    const keyedRevisions = evidenced(keyed.revisions, (r) => `${r.kind} of "${r.subject_key}"`);
    const output = { discrepancies: answer.output.discrepancies.filter((d) => !fromDone(d.source_msg_id, "discrepancy")) };

    const keyedSources = new Set([...keyedRevisions, ...keyed.discrepancies].map((x) => x.source_msg_id));
    const phases: Message[][] = [];
    for (const m of batch) {
      if (phases.length === 0 || (keyedSources.has(m.id) && phases.at(-1)!.length > 0)) phases.push([]);
      phases.at(-1)!.push(m);
    }
    const bySource = <T extends { source_msg_id: number }>(a: T, b: T) => a.source_msg_id - b.source_msg_id;
    for (const [index, phase] of phases.entries()) {
      const ids = new Set(phase.map((m) => m.id));
      // Items naming a message outside the batch go with the first phase, where applyExtraction refuses them.
      const mine = (x: { source_msg_id: number }) => ids.has(x.source_msg_id) || (index === 0 && !byId.has(x.source_msg_id));
      const open = (await this.svc.store.listThreads(this.room)).filter((t) => t.status !== "cancelled");
      const resolve = (key: string) => open.find((t) => t.subject_key === subjectKey(key));
      const resolvedRevisions: ArbiterOutput["revisions"] = [];
      for (const { subject_key, ...r } of keyedRevisions.filter(mine)) {
        const t = resolve(subject_key);
        if (t) resolvedRevisions.push({ ...r, thread_id: t.id });
        else this.skip(`${r.kind} of "${subject_key}"`, "no open thread has this subject_key");
      }
      const resolvedDiscrepancies: ArbiterOutput["discrepancies"] = keyed.discrepancies.filter((d) => mine(d) && !fromDone(d.source_msg_id, "discrepancy")).map(({ subject_key, ...d }) => {
        const t = resolve(subject_key);
        return t ? { ...d, thread_id: t.id } : d;
      });
      const part: ArbiterOutput = {
        threads: threads.filter(mine),
        revisions: [...revisions.filter(mine), ...resolvedRevisions].sort(bySource),
        discrepancies: [...output.discrepancies.filter(mine), ...resolvedDiscrepancies].sort(bySource),
      };
      const result = await applyExtraction(this.svc, this.room, { messages: phase, output: part, ...this.takeDebt() });
      this.summary.applied += result.applied;
      for (const s of result.skipped) this.skip(s.item, s.reason);
    }
  }
}

/**
 * Runs the arbiter over a room. Callers serialise runs per room (lib/arbiter/index.ts). Throws
 * 502 arbiter_failed on an outage, after recording the sentence as the room's last_extraction_error.
 */
export async function extractRoom(svc: Services, rawRoomId: string, opts: { full: boolean }, deps: ExtractDeps): Promise<ExtractionSummary> {
  const room = await requireRoom(svc, rawRoomId);
  const run = new Run(svc, room.uuid, deps, opts.full);
  const fresh = await messagesAfter(svc, room.uuid, opts.full ? 0 : room.arbiterWatermark);
  const s = run.summary;
  s.messages = fresh.length;
  s.from_msg_id = fresh[0]?.id ?? null;
  s.to_msg_id = fresh.at(-1)?.id ?? null;
  s.last_extracted_msg_id = room.arbiterWatermark;
  if (fresh.length === 0) return s;

  let context = await messagesBefore(svc, room.uuid, fresh[0]!.id, CONTEXT_MESSAGES);
  try {
    for (let i = 0; i < fresh.length; ) {
      const n = await run.processSome(fresh.slice(i), context);
      context = [...context, ...fresh.slice(i, i + n)].slice(-CONTEXT_MESSAGES);
      i += n;
    }
  } catch (err) {
    if (!(err instanceof Outage)) throw err;
    const at = (await requireRoom(svc, room.uuid)).arbiterWatermark;
    const attempts = err.attempts > 1 ? ` (${err.attempts} attempts)` : "";
    const where = at > 0 ? `The ledger reflects the chat up to message ${at}` : "No message has been extracted yet";
    const sentence = `The arbiter could not extract new messages: ${err.reason}${attempts}. ${where}; try POST /context/refresh again later.`;
    await recordExtractionError(svc, room.uuid, sentence, run.takeDebt());
    throw new ParleyError("arbiter_failed", sentence);
  }
  s.last_extracted_msg_id = (await requireRoom(svc, room.uuid)).arbiterWatermark;
  return s;
}
