import { z } from "zod";
import { agentNameProblem } from "../domain/names";

// Control characters (C0, DEL, C1) are never part of a name.
// eslint-disable-next-line no-control-regex
export const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Strings the log can hold. The canonical form (RFC 8785) has no encoding for an unpaired UTF-16
 * surrogate, and PostgreSQL text cannot store NUL; both are refused here, at validation, so no such
 * value reaches an append. Every input string goes through `str`.
 */
// With the `u` flag a surrogate class matches only *unpaired* surrogates.
// eslint-disable-next-line no-control-regex
const UNSTORABLE = /[\uD800-\uDFFF\u0000]/u;
export const storable = (s: string) => !UNSTORABLE.test(s);
export const str = (error = "must be a string") =>
  z.string({ error }).refine(storable, "must be valid Unicode text: no unpaired surrogate (\\ud800-\\udfff) and no NUL character");

/** For text the service did not get from a client (the arbiter's model): cleaned, not refused. */
export function clipStorable(s: string, max: number): string {
  let out = s.replace(new RegExp(UNSTORABLE, "gu"), "\uFFFD");
  if (out.length > max) out = out.slice(0, /[\uD800-\uDBFF]/.test(out[max - 1]!) ? max - 1 : max); // never split a pair
  return out;
}

/**
 * Every field that takes an agent's name (lib/domain/names): NFKC-normalised, then trimmed; no
 * invisible, format or bidirectional control characters, and nothing that is or looks like a
 * service name. The normalised name is what is stored; names compare by `agentKey`.
 */
export const agentId = str()
  .normalize("NFKC")
  .superRefine((s, ctx) => {
    const problem = agentNameProblem(s);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  })
  .trim()
  .min(1, "must not be empty or whitespace only")
  .max(100, "must be at most 100 characters")
  .refine((s) => !CONTROL.test(s), "must not contain control characters");

export const messageText = str()
  .min(1, "must not be empty")
  .max(10_000, "must be at most 10000 characters")
  .refine((s) => s.trim().length > 0, "must not be whitespace only");

export const description = str()
  .trim()
  .max(500, "must be at most 500 characters");

/** Query integers arrive as strings; a non-number is a validation error naming the parameter. */
export const queryInt = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  str()
    .regex(/^-?\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

/** `limit`: default 100, above 500 clamped to 500 (compat), below 1 rejected. */
export const pageLimit = (max = 500, dflt = 100) =>
  str()
    .regex(/^-?\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(1, "must be at least 1"))
    .transform((n) => Math.min(n, max))
    .optional()
    .transform((n) => n ?? dflt);

export const HEX64 = /^[0-9a-f]{64}$/i;
export const hex64 = str().regex(HEX64, "must be 64 hex digits");

/** Trimmed text of at most `max` characters; `nonEmpty` also at least one. */
export const text = (max: number) => str().trim().max(max, `must be at most ${max} characters`);
export const nonEmpty = (max: number) => text(max).min(1, "must not be empty");

/** A whole number in [min, max], named in the message ("a whole number of seconds"). */
export const int = (name: string, min: number, max: number) =>
  z.number({ error: `must be ${name}` }).int(`must be ${name}`).min(min, `must be at least ${min}`).max(max, `must be at most ${max}`);

export const leaseToken = str("must be the lease token the claim returned").min(1, "must be the lease token the claim returned").max(200);
export const auth = z.enum(["signed", "anon"]);
