// RFC 8785 JSON Canonicalization Scheme (JCS).
// The canonical form is what gets hashed and signed, so anything that JSON itself could not
// round-trip unambiguously (NaN, lone surrogates, undefined in arrays, Dates, Maps…) throws
// instead of being coerced the way JSON.stringify would coerce it.
//
// The verifier canonicalises every event of a room (and the server every event it appends), so
// this is written for speed: one string built by concatenation, keys sorted by insertion (objects
// here have a handful of keys), well-formedness checked natively where the engine can.
import { utf8 } from './bytes';

// With the `u` flag a surrogate class matches only *unpaired* surrogates.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

const nativeWellFormed = (String.prototype as { isWellFormed?: (this: string) => boolean }).isWellFormed;

/** True when `s` has no lone surrogate (so it is valid Unicode and has one UTF-8 encoding). */
export const isWellFormed: (s: string) => boolean = nativeWellFormed
  ? (s) => nativeWellFormed.call(s)
  : (s) => !LONE_SURROGATE.test(s);

// What JSON escapes: the quote, the backslash and C0 controls.
// eslint-disable-next-line no-control-regex
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

function str(s: string): string {
  if (!isWellFormed(s)) throw new Error('jcs: string contains a lone surrogate');
  // JSON.stringify (ES2019+) escapes exactly as RFC 8785 §3.2.2.2 asks: \" \\ \b \t \n \f \r,
  // other C0 controls as lowercase \u00xx, everything else (incl. "/" and non-ASCII) literal. Most
  // strings have nothing to escape and are quoted as they are (a regex test is cheaper than the call).
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

function num(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`jcs: ${n} is not a finite number`);
  // RFC 8785 §3.2.2.3 is ECMAScript Number.prototype.toString, which JSON.stringify uses
  // (and it maps -0 to "0" as required).
  return JSON.stringify(n);
}

export function isPlainObject(v: object): v is Record<string, unknown> {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * Object.keys sorted by UTF-16 code units (RFC 8785 §3.2.3; JS `<` on strings compares code
 * units). Insertion sort: the objects canonicalised here have few keys, often nearly in order.
 */
export function sortedKeys(o: object): string[] {
  const keys = Object.keys(o);
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i]!;
    let j = i - 1;
    if (keys[j]! < k) continue;
    while (j >= 0 && keys[j]! > k) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = k;
  }
  return keys;
}

function ser(v: unknown, stack: Set<object>): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'string':
      return str(v);
    case 'number':
      return num(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'object':
      break;
    default:
      throw new Error(`jcs: cannot serialise a ${typeof v}`);
  }
  const o = v as object;
  if (stack.has(o)) throw new Error('jcs: cyclic structure');
  stack.add(o);
  let out: string;
  if (Array.isArray(o)) {
    out = '[';
    for (let i = 0; i < o.length; i++) {
      const item: unknown = o[i];
      if (item === undefined) throw new Error('jcs: undefined array element');
      out += i === 0 ? ser(item, stack) : `,${ser(item, stack)}`;
    }
    out += ']';
  } else if (isPlainObject(o)) {
    const keys = sortedKeys(o);
    out = '{';
    let first = true;
    for (const k of keys) {
      const value = o[k];
      if (value === undefined) continue; // absent optional fields are omitted, as JSON does
      out += `${first ? '' : ','}${str(k)}:${ser(value, stack)}`;
      first = false;
    }
    out += '}';
  } else {
    throw new Error('jcs: only plain objects and arrays can be serialised');
  }
  stack.delete(o);
  return out;
}

export function canonicalize(value: unknown): string {
  return ser(value, new Set());
}

export function canonicalBytes(value: unknown): Uint8Array {
  return utf8(canonicalize(value));
}

/**
 * Whether two JSON values have the same canonical form — `canonicalize(a) === canonicalize(b)` for
 * every value canonicalize accepts — without building either string: the verifier compares every
 * served projection item with its rebuilt one. Key order is ignored, members whose value is
 * undefined are absent, and 0 equals -0, as in the canonical form. Strings and numbers compare as
 * values, so two equal ones are equal even where canonicalize would refuse them (a lone
 * surrogate, NaN is never equal); anything but plain objects and arrays is compared through
 * canonicalize itself, and so is nesting past 64 levels (its cycle check then applies).
 */
export function canonicalEqual(a: unknown, b: unknown): boolean {
  return eq(a, b, 0);
}

const MAX_EQ_DEPTH = 64;

function eq(a: unknown, b: unknown, depth: number): boolean {
  if (a === b) return true; // one value, one form
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    // Distinct primitives (or a primitive and an object): equal only if their forms are, which
    // for strings, numbers, booleans and null they never are. Other kinds go to canonicalize.
    const simple = (v: unknown) => v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || typeof v === 'object';
    return simple(a) && simple(b) ? false : canonicalize(a) === canonicalize(b);
  }
  if (depth > MAX_EQ_DEPTH) return canonicalize(a) === canonicalize(b);
  return eqObject(a, b, depth);
}

function eqObject(a: object, b: object, depth: number): boolean {
  const arrA = Array.isArray(a);
  if (arrA !== Array.isArray(b)) return false;
  if (arrA) {
    const la = a as unknown[];
    const lb = b as unknown[];
    if (la.length !== lb.length) return false;
    for (let i = 0; i < la.length; i++) {
      if (la[i] === undefined || lb[i] === undefined) return canonicalize(la) === canonicalize(lb);
      if (!eq(la[i], lb[i], depth + 1)) return false;
    }
    return true;
  }
  if (!isPlainObject(a) || !isPlainObject(b)) return canonicalize(a) === canonicalize(b);
  let count = 0;
  for (const k of Object.keys(a)) {
    const va = a[k];
    if (va === undefined) continue; // absent in the canonical form
    count++;
    const vb = Object.hasOwn(b, k) ? b[k] : undefined;
    if (vb === undefined || !eq(va, vb, depth + 1)) return false;
  }
  for (const k of Object.keys(b)) if (b[k] !== undefined) count--;
  return count === 0;
}
