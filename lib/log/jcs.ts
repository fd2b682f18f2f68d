// RFC 8785 JSON Canonicalization Scheme (JCS).
// The canonical form is what gets hashed and signed, so anything that JSON itself could not
// round-trip unambiguously (NaN, lone surrogates, undefined in arrays, Dates, Maps…) throws
// instead of being coerced the way JSON.stringify would coerce it.
//
// The verifier canonicalises every event of a room (and the server every event it appends), so
// this is written for speed: one string built by concatenation, keys sorted by insertion (objects
// here have a handful of keys), well-formedness checked natively where the engine can.

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
  // RFC 8785 §3.2.2.3 is ECMAScript Number::toString, which String() applies to a finite number
  // as JSON.stringify does (and it maps -0 to "0" as required).
  return String(n);
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
  const w = new ByteWriter();
  w.value(value);
  return w.buf.slice(0, w.pos);
}

// ---- straight to UTF-8 ------------------------------------------------------------------------
// The verifier hashes every event's canonical bytes: writing them into one reused buffer skips
// the string (and its pieces) that canonicalize builds and the encoding after it. The same rules as
// ser() above, byte for byte (tests compare the two on random values); ASCII text without anything
// to escape, nearly all of an event, is copied a char code at a time.

const encoder = new TextEncoder();
/** Nesting depth up to which ByteWriter's cycle check keeps the open objects in an array. */
const STACK_ARRAY = 16;

export class ByteWriter {
  buf: Uint8Array;
  pos: number;
  /**
   * The objects being written, outermost first, for the cycle check: the first STACK_ARRAY in an
   * array (a few identity compares; a Set would give every object an identity hash first), any
   * deeper ones in a Set, so a deeply nested value costs O(depth), not O(depth²).
   */
  private readonly path: object[] = [];
  private readonly deep = new Set<object>();
  private depth = 0;

  constructor(capacity = 1024, start = 0) {
    this.buf = new Uint8Array(Math.max(capacity, start + 16));
    this.pos = start;
  }

  /** Starts over (keeping the buffer) with `start` bytes left in front, e.g. a hash prefix. */
  reset(start = 0): void {
    this.pos = start;
    this.path.length = 0;
    this.deep.clear();
    this.depth = 0;
  }

  private enter(o: object): void {
    if (this.path.includes(o) || (this.deep.size > 0 && this.deep.has(o))) throw new Error('jcs: cyclic structure');
    if (this.depth < STACK_ARRAY) this.path.push(o);
    else this.deep.add(o);
    this.depth++;
  }

  private leave(o: object): void {
    this.depth--;
    if (this.depth < STACK_ARRAY) this.path.pop();
    else this.deep.delete(o);
  }

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const grown = new Uint8Array(Math.max(2 * this.buf.length, this.pos + n));
    grown.set(this.buf.subarray(0, this.pos));
    this.buf = grown;
  }

  private byte(c: number): void {
    this.room(1);
    this.buf[this.pos++] = c;
  }

  /** Text already in its JSON form (a number, a literal, an escaped string). */
  private raw(text: string): void {
    this.room(3 * text.length);
    const buf = this.buf;
    let p = this.pos;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c >= 0x80) {
        this.pos += encoder.encodeInto(text, buf.subarray(this.pos)).written;
        return;
      }
      buf[p++] = c;
    }
    this.pos = p;
  }

  private string(s: string): void {
    this.room(s.length + 2);
    const buf = this.buf;
    let p = this.pos;
    buf[p++] = 0x22;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      // Non-ASCII, a quote, a backslash or a control: the general path (well-formedness, escapes, UTF-8).
      if (c >= 0x80 || c < 0x20 || c === 0x22 || c === 0x5c) return this.raw(str(s));
      buf[p++] = c;
    }
    buf[p++] = 0x22;
    this.pos = p;
  }

  value(v: unknown): void {
    if (v === null) return this.raw('null');
    switch (typeof v) {
      case 'string':
        return this.string(v);
      case 'number':
        return this.raw(num(v));
      case 'boolean':
        return this.raw(v ? 'true' : 'false');
      case 'object':
        break;
      default:
        throw new Error(`jcs: cannot serialise a ${typeof v}`);
    }
    const o = v as object;
    this.enter(o);
    if (Array.isArray(o)) {
      this.byte(0x5b);
      for (let i = 0; i < o.length; i++) {
        const item: unknown = o[i];
        if (item === undefined) throw new Error('jcs: undefined array element');
        if (i > 0) this.byte(0x2c);
        this.value(item);
      }
      this.byte(0x5d);
    } else if (isPlainObject(o)) {
      this.members(o, sortedKeys(o));
    } else {
      throw new Error('jcs: only plain objects and arrays can be serialised');
    }
    this.leave(o);
  }

  /** `{…}` of the members of `o` named in `keys` (sorted by UTF-16 code units), undefined ones left out. */
  private members(o: Record<string, unknown>, keys: readonly string[]): void {
    this.byte(0x7b);
    let first = true;
    for (const k of keys) {
      const item = o[k];
      if (item === undefined) continue;
      if (!first) this.byte(0x2c);
      first = false;
      this.string(k);
      this.byte(0x3a);
      this.value(item);
    }
    this.byte(0x7d);
  }

  /**
   * The JCS bytes of a plain object whose own keys the caller knows to be among `keys` (sorted by
   * UTF-16 code units), as value(o) writes them, without listing and sorting its keys: an event's
   * ten keys, for each of a room's events. The caller checks the shape (hasOnlyKeys).
   */
  knownObject(o: Record<string, unknown>, keys: readonly string[]): void {
    this.enter(o);
    this.members(o, keys);
    this.leave(o);
  }
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
  // for-in walks own and inherited enumerable keys: plain objects inherit none, so hasOwn keeps
  // it to Object.keys without the array.
  let count = 0;
  for (const k in a) {
    if (!Object.hasOwn(a, k)) continue;
    const va = a[k];
    if (va === undefined) continue; // absent in the canonical form
    count++;
    const vb = Object.hasOwn(b, k) ? b[k] : undefined;
    if (vb === undefined || !eq(va, vb, depth + 1)) return false;
  }
  for (const k in b) if (Object.hasOwn(b, k) && b[k] !== undefined) count--;
  return count === 0;
}
