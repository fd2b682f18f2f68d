// RFC 8785 JSON Canonicalization Scheme (JCS).
// The canonical form is what gets hashed and signed, so anything that JSON itself could not
// round-trip unambiguously (NaN, lone surrogates, undefined in arrays, Dates, Maps…) throws
// instead of being coerced the way JSON.stringify would coerce it.
import { utf8 } from './bytes';

// With the `u` flag a surrogate class matches only *unpaired* surrogates.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

function str(s: string): string {
  if (LONE_SURROGATE.test(s)) throw new Error('jcs: string contains a lone surrogate');
  // JSON.stringify (ES2019+) escapes exactly as RFC 8785 §3.2.2.2 asks: \" \\ \b \t \n \f \r,
  // other C0 controls as lowercase \u00xx, everything else (incl. "/" and non-ASCII) literal.
  return JSON.stringify(s);
}

function num(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`jcs: ${n} is not a finite number`);
  // RFC 8785 §3.2.2.3 is ECMAScript Number.prototype.toString, which JSON.stringify uses
  // (and it maps -0 to "0" as required).
  return JSON.stringify(n);
}

function isPlainObject(v: object): v is Record<string, unknown> {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function ser(v: unknown, stack: Set<object>): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      return num(v);
    case 'string':
      return str(v);
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
    const items: string[] = [];
    for (let i = 0; i < o.length; i++) {
      if (o[i] === undefined) throw new Error('jcs: undefined array element');
      items.push(ser(o[i], stack));
    }
    out = `[${items.join(',')}]`;
  } else if (isPlainObject(o)) {
    // Default sort compares UTF-16 code units, which is the order RFC 8785 §3.2.3 specifies.
    const keys = Object.keys(o).sort();
    const members: string[] = [];
    for (const k of keys) {
      if (o[k] === undefined) continue; // absent optional fields are omitted, as JSON does
      members.push(`${str(k)}:${ser(o[k], stack)}`);
    }
    out = `{${members.join(',')}}`;
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
