/**
 * Reading the model's answer: one JSON object validated with `arbiterOutput` (SPEC 5.3). Models
 * wrap JSON in fences, stop mid-object when they run out of output tokens, or get one item wrong;
 * this module turns all of that into either a usable output or one sentence that tells the model
 * (in the corrective retry) what to fix.
 */
import { z } from "zod";
import { arbiterOutput, type ArbiterOutput } from "../schemas/arbiter";
import { describeIssues } from "../errors";

const revisionItem = arbiterOutput.shape.revisions.unwrap().element;
const threadItem = arbiterOutput.shape.threads.unwrap().element;
const discrepancyItem = arbiterOutput.shape.discrepancies.unwrap().element;

/**
 * A revision or discrepancy about a thread proposed in the same answer has no id yet: the model
 * names the thread's subject_key instead, and the worker resolves it once that thread exists.
 */
const keyedRevision = revisionItem.omit({ thread_id: true }).extend({ subject_key: z.string().trim().min(1).max(200) });
const keyedDiscrepancy = discrepancyItem.omit({ thread_id: true }).extend({ subject_key: z.string().trim().min(1).max(200) });
export type KeyedRevision = z.infer<typeof keyedRevision>;
export type KeyedDiscrepancy = z.infer<typeof keyedDiscrepancy>;

export interface ModelAnswer {
  output: ArbiterOutput;
  keyed: { revisions: KeyedRevision[]; discrepancies: KeyedDiscrepancy[] };
  /** Items left out because they were malformed (lenient reading only). */
  dropped: string[];
  /** The JSON was cut short and repaired. */
  salvaged: boolean;
}

export type ReadResult = { ok: true; answer: ModelAnswer } | { ok: false; problem: string };

/** The JSON text in an answer: without code fences or prose before the first brace. */
function jsonPart(text: string): string | undefined {
  const unfenced = text.replace(/^\s*```[a-zA-Z]*\s*/, "").replace(/\s*```\s*$/, "");
  const start = unfenced.indexOf("{");
  return start < 0 ? undefined : unfenced.slice(start);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Repairs JSON that was cut short: cuts it back to the last complete array element (or member of
 * the top-level object), so an incomplete last item is dropped, and closes the open brackets.
 * Tries the latest cut points first and returns the first one `accept` takes.
 */
export function salvageJson(text: string, accept: (value: unknown) => boolean = () => true): unknown {
  const stack: string[] = [];
  const cuts: { at: number; closers: string }[] = [];
  const closers = () => stack.map((c) => (c === "{" ? "}" : "]")).reverse().join("");
  let inString = false;
  let escaped = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === "\\") escaped = true;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === "{" || ch === "[") {
      stack.push(ch);
      if (ch === "[") cuts.push({ at: i + 1, closers: closers() });
    } else if (ch === "}" || ch === "]") {
      stack.pop();
      if (stack.length === 0) {
        cuts.push({ at: i + 1, closers: "" }); // complete; whatever follows is not ours
        break;
      }
      // A complete element of an array, or a complete member of the top-level object.
      if (stack.at(-1) === "[" || stack.length === 1) cuts.push({ at: i + 1, closers: closers() });
    } else if (ch === ",") {
      if (stack.at(-1) === "[" || stack.length === 1) cuts.push({ at: i, closers: closers() });
    }
  }
  for (const cut of cuts.reverse().slice(0, 64)) {
    try {
      const value: unknown = JSON.parse(text.slice(0, cut.at).trimEnd() + cut.closers);
      if (accept(value)) return value;
    } catch {
      /* try an earlier cut */
    }
  }
  return undefined;
}

/** Separates the revisions and discrepancies that name a thread by subject_key (no id yet). */
function splitKeyed(value: Record<string, unknown>): { rest: Record<string, unknown>; keyedRevisions: unknown[]; keyedDiscrepancies: unknown[] } {
  const byKey = (item: unknown) => isPlainObject(item) && (item.thread_id === undefined || item.thread_id === null) && typeof item.subject_key === "string";
  const rest = { ...value };
  const part = (name: "revisions" | "discrepancies") => {
    const list = value[name];
    if (!Array.isArray(list)) return [];
    rest[name] = list.filter((item) => !byKey(item));
    return list.filter(byKey);
  };
  return { rest, keyedRevisions: part("revisions"), keyedDiscrepancies: part("discrepancies") };
}

/**
 * Reads an answer. Strict (the first answer): any malformed item is a problem worth a corrective
 * retry. Lenient (the corrected answer): malformed items are dropped and the rest is used.
 */
export function readAnswer(text: string | null | undefined, mode: "strict" | "lenient"): ReadResult {
  if (!text || !text.trim()) return { ok: false, problem: "the answer was empty" };
  const json = jsonPart(text);
  if (json === undefined) return { ok: false, problem: "the answer contains no JSON object" };
  let value: unknown;
  let salvaged = false;
  try {
    value = JSON.parse(json.slice(0, json.lastIndexOf("}") + 1));
  } catch (err) {
    value = salvageJson(json, isPlainObject);
    if (value === undefined) return { ok: false, problem: `the answer is not valid JSON (${err instanceof Error ? err.message.slice(0, 120) : "parse error"})` };
    salvaged = true;
  }
  if (!isPlainObject(value)) return { ok: false, problem: "the answer must be one JSON object with the arrays threads, revisions and discrepancies" };

  const { rest, keyedRevisions, keyedDiscrepancies } = splitKeyed(value);
  const dropped: string[] = [];
  const keep = <T>(schema: z.ZodType<T>, items: unknown[], where: string): T[] | string => {
    const kept: T[] = [];
    for (const [i, item] of items.entries()) {
      const parsed = schema.safeParse(item);
      if (parsed.success) kept.push(parsed.data);
      else if (mode === "strict") return `${where}.${i}: ${describeIssues(parsed.error, "answer")}`;
      else dropped.push(`${where}.${i}: ${describeIssues(parsed.error, "answer")}`);
    }
    return kept;
  };

  const strict = arbiterOutput.safeParse(rest);
  let output: ArbiterOutput;
  if (strict.success) output = strict.data;
  else if (mode === "strict") return { ok: false, problem: describeIssues(strict.error, "answer") };
  else {
    const list = (name: string) => (Array.isArray(rest[name]) ? (rest[name] as unknown[]) : (rest[name] !== undefined && dropped.push(`${name}: not an array`), []));
    output = {
      threads: keep(threadItem, list("threads"), "threads") as ArbiterOutput["threads"],
      revisions: keep(revisionItem, list("revisions"), "revisions") as ArbiterOutput["revisions"],
      discrepancies: keep(discrepancyItem, list("discrepancies"), "discrepancies") as ArbiterOutput["discrepancies"],
    };
  }
  const revisions = keep(keyedRevision, keyedRevisions, "revisions");
  if (typeof revisions === "string") return { ok: false, problem: revisions };
  const discrepancies = keep(keyedDiscrepancy, keyedDiscrepancies, "discrepancies");
  if (typeof discrepancies === "string") return { ok: false, problem: discrepancies };
  return { ok: true, answer: { output, keyed: { revisions, discrepancies }, dropped, salvaged } };
}
