/**
 * A room bundle verified as it is read: `parley verify <bundle.json>` streams the file through
 * here, so a 100,000-event bundle is never in memory as text and objects at once. The JSON is
 * split, not parsed, byte by byte: the top-level object's values, each item of `events` and
 * `checkpoints`, and each item of `projections.messages` are cut out and handed to JSON.parse one
 * at a time, then to the one verifier (RoomVerifier). Browser-safe: bytes in, no node: imports.
 *
 * The input must be what JSON.parse would accept as a bundle; anything else (not JSON, trailing
 * text, a key given twice, a list that is not a list, a missing field) is a BundleFormatError,
 * never a verdict. The fields may come in any order: items read before the header (origin, room,
 * server_key) wait for it.
 */
import type { Message } from "../domain/message";
import type { LogEvent } from "./event";
import { BUNDLE_FORMAT, RoomVerifier, type BundleHead, type ServedProjections, type VerifyOptions, type VerifyReport } from "./verify";

/** The input is not a bundle the verifier can read (exit 3 in the CLI, not REFUTED). */
export class BundleFormatError extends Error {
  constructor(
    message: string,
    /** True when the bytes are not JSON at all, false when they are JSON but not a bundle. */
    readonly syntax: boolean,
  ) {
    super(message);
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** Bytes from an async source, with the unread part kept in one growing buffer. */
class ByteReader {
  buf = new Uint8Array(1 << 16);
  /** Everything before `start` is consumed and may be dropped. */
  start = 0;
  end = 0;
  private eof = false;
  private readonly it: AsyncIterator<Uint8Array>;
  // The scan of the value at `start` so far, kept when the buffer ran out in the middle of it.
  scanned = 0;
  /** No cut parsed in the unread bytes as they are (eachItem scans them); a read clears it. */
  noCut = false;
  /** A `},{` here or past it did not parse (parseToCut tries only before it); a read clears it. */
  cutCeiling = Infinity;
  private depth = 0;
  private inString = false;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.it = source[Symbol.asyncIterator]();
  }

  /** Reads another chunk behind the unread bytes (which may move to the front); false at the end. */
  async fill(): Promise<boolean> {
    while (!this.eof) {
      const { value, done } = await this.it.next();
      if (done) {
        this.eof = true;
        break;
      }
      if (value.length === 0) continue;
      const live = this.end - this.start;
      if (live + value.length > this.buf.length) {
        const grown = new Uint8Array(Math.max(2 * this.buf.length, live + value.length));
        grown.set(this.buf.subarray(this.start, this.end));
        this.buf = grown;
      } else if (this.start > 0) this.buf.copyWithin(0, this.start, this.end);
      this.start = 0;
      this.end = live;
      this.buf.set(value, this.end); // copied: the source may reuse its chunk
      this.end += value.length;
      this.noCut = false;
      this.cutCeiling = Infinity;
      return true;
    }
    return false;
  }

  /** The next non-space byte (not consumed); NEED_MORE when the buffer ends first, END at the end of the input. */
  peek(): number {
    while (this.start < this.end) {
      const c = this.buf[this.start]!;
      if (!isSpace(c)) return c;
      this.start++;
    }
    return this.eof ? END : NEED_MORE;
  }

  async next(): Promise<number> {
    for (;;) {
      const c = this.peek();
      if (c !== NEED_MORE) return c;
      await this.fill();
    }
  }

  async expect(byte: number, what: string): Promise<void> {
    if ((await this.next()) !== byte) throw new BundleFormatError(`expected ${what}`, true);
    this.start++;
  }

  /**
   * Where the JSON value at `start` (after spaces) ends, or -1 when the buffer ends first (call
   * again after fill: the scan goes on where it stopped). A container or string is scanned to its
   * closing byte, skipping quoted text with indexOf; a number or literal runs to the next
   * delimiter. JSON.parse checks the text afterwards, so this only has to find the end.
   */
  scanValue(): number {
    if (this.scanned === 0 && this.peek() < 0) return this.eof ? this.endOfInput() : -1;
    const buf = this.buf;
    const end = this.end;
    const first = buf[this.start]!;
    const scalar = first !== OPEN_BRACE && first !== OPEN_BRACKET && first !== QUOTE;
    let { depth, inString } = this;
    let i = this.start + this.scanned;
    while (i < end) {
      if (inString) {
        const q = buf.indexOf(QUOTE, i);
        if (q < 0 || q >= end) {
          i = end;
          break;
        }
        // A quote after an odd run of backslashes is escaped.
        let slashes = 0;
        for (let j = q - 1; buf[j] === BACKSLASH; j--) slashes++;
        i = q + 1;
        if (slashes % 2 === 0) {
          inString = false;
          if (depth === 0) return this.scanDone(i);
        }
        continue;
      }
      const c = buf[i]!;
      if (scalar) {
        if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || isSpace(c)) return this.scanDone(i);
      } else if (c === QUOTE) inString = true;
      else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (--depth === 0) return this.scanDone(i + 1);
      }
      i++;
    }
    if (this.eof) {
      if (scalar) return this.scanDone(i);
      return this.endOfInput();
    }
    this.scanned = i - this.start;
    this.depth = depth;
    this.inString = inString;
    return -1;
  }

  private scanDone(end: number): number {
    this.scanned = 0;
    this.depth = 0;
    this.inString = false;
    return end;
  }

  private endOfInput(): never {
    throw new BundleFormatError("unexpected end of input", true);
  }

  /** The next JSON value, parsed (consumed). */
  async value(): Promise<unknown> {
    for (;;) {
      const e = this.scanValue();
      if (e >= 0) {
        const bytes = this.buf.subarray(this.start, e);
        this.start = e;
        return parse(bytes);
      }
      await this.fill();
    }
  }
}

const NEED_MORE = -2;
const END = -1;

const decoder = new TextDecoder();

function parse(bytes: Uint8Array, prefix = "", suffix = ""): unknown {
  try {
    return JSON.parse(prefix + decoder.decode(bytes) + suffix);
  } catch {
    throw new BundleFormatError("not JSON", true);
  }
}

/** Unread buffers shorter than this are scanned item by item: a cut (below) would save little. */
const CUT_MIN = 4096;

/** The last `},{` in buf[after + 1, before): the index of its comma, or -1. */
function lastCut(buf: Uint8Array, after: number, before: number): number {
  for (let i = before - 1; i > after; ) {
    const open = buf.lastIndexOf(OPEN_BRACE, i);
    if (open - 1 <= after) return -1;
    if (buf[open - 1] === COMMA && buf[open - 2] === CLOSE_BRACE) return open - 1;
    i = open - 1;
  }
  return -1;
}

/**
 * Parses the items from `from` up to a `},{` after `after` in the buffer, when that is where one
 * item ends and the next begins, and hands them to `item`; returns the comma's index, or -1. JSON.parse
 * of "[" + text + "]" succeeds exactly when the text is a list of whole values: a `},{` inside a
 * string leaves the string open, one inside a nested value leaves a bracket open, one past the
 * end of the list leaves a "]" unmatched, and the parse fails. So the bytes before the cut need no
 * scan of ours. Tried at the buffer's last `},{`, then at the last one before its middle (the list
 * may end in the buffer). Until the next read, no `},{` at or past one that did not parse is tried
 * again (r.cutCeiling: the text up to it stays unparsable), and a buffer where both tries fail is
 * left to the scan (r.noCut); so a failed parse is rare (a `},{` inside the string of the last
 * items) and always followed by a successful one or the scan.
 */
function parseToCut(r: ByteReader, from: number, after: number, item: (value: unknown) => void): number {
  const buf = r.buf;
  let cut = lastCut(buf, after, Math.min(r.end - 1, r.cutCeiling));
  for (let tries = 0; cut >= 0 && tries < 2; tries++) {
    let items: unknown[] | null;
    try {
      items = parse(buf.subarray(from, cut), "[", "]") as unknown[];
    } catch {
      items = null; // not an item boundary, or not JSON: the scan says which, as it would have
    }
    if (items) {
      for (const x of items) item(x);
      return cut;
    }
    r.cutCeiling = cut;
    cut = lastCut(buf, after, Math.min(cut, after + Math.floor((r.end - after) / 2)));
  }
  r.noCut = true;
  return -1;
}

/**
 * Calls `item` for each element of the JSON array next in the input. The elements already in the
 * buffer are parsed together, as one array: JSON.parse once per chunk read, not once per element.
 * Where they end is found by a cut at a `},{` that is an item boundary (parseToCut), else by
 * scanning them (ByteReader.scanValue).
 */
async function eachItem(r: ByteReader, what: string, item: (value: unknown) => void): Promise<void> {
  if ((await r.next()) !== OPEN_BRACKET) throw new BundleFormatError(`${what} is not a list`, false);
  r.start++;
  if ((await r.next()) === CLOSE_BRACKET) {
    r.start++;
    return;
  }
  let separator = false; // an item was read: a , or the closing ] comes next
  for (;;) {
    let from = -1;
    let to = -1;
    let closed = false;
    for (;;) {
      if (separator) {
        const c = r.peek();
        if (c === NEED_MORE) break;
        if (c === CLOSE_BRACKET) {
          closed = true;
          break;
        }
        if (c !== COMMA) throw new BundleFormatError(`expected , or ] in ${what}`, true);
        r.start++;
        separator = false;
      }
      if (from < 0) from = r.start;
      if (!r.noCut && r.scanned === 0 && r.end - r.start >= CUT_MIN && r.peek() === OPEN_BRACE) {
        const cut = parseToCut(r, from, r.start, item);
        if (cut >= 0) {
          // Every item up to the cut is handed over, those scanned before it included.
          r.start = cut;
          from = to = -1;
          separator = true;
          continue;
        }
      }
      const e = r.scanValue();
      if (e < 0) break;
      r.start = to = e;
      separator = true;
    }
    if (to >= 0) for (const x of parse(r.buf.subarray(from, to), "[", "]") as unknown[]) item(x);
    if (closed) {
      r.start++;
      return;
    }
    await r.fill();
  }
}

/** Calls `member` for each key of the JSON object next in the input; it reads the value. */
async function eachMember(r: ByteReader, what: string, member: (key: string) => Promise<void>): Promise<void> {
  if ((await r.next()) !== OPEN_BRACE) throw new BundleFormatError(`${what} is not an object`, false);
  r.start++;
  if ((await r.next()) === CLOSE_BRACE) {
    r.start++;
    return;
  }
  const seen = new Set<string>();
  for (;;) {
    if ((await r.next()) !== QUOTE) throw new BundleFormatError(`expected a key in ${what}`, true);
    const key = (await r.value()) as string;
    // JSON.parse would keep the last of two; a stream cannot take back what it verified.
    if (seen.has(key)) throw new BundleFormatError(`${what} has the key "${key}" twice`, false);
    seen.add(key);
    await r.expect(COLON, ":");
    await member(key);
    const c = await r.next();
    r.start++;
    if (c === CLOSE_BRACE) return;
    if (c !== COMMA) throw new BundleFormatError(`expected , or } in ${what}`, true);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Verifies the bundle in `source` (its bytes, e.g. a file's read stream or a response body) in one
 * pass. Throws BundleFormatError when it is not a readable bundle. `opts` may depend on the
 * bundle's header (the CLI's --key trusts a key under the bundle's key name).
 */
export async function verifyBundleStream(source: AsyncIterable<Uint8Array>, opts: VerifyOptions | ((head: BundleHead) => VerifyOptions)): Promise<VerifyReport> {
  const r = new ByteReader(source);
  const first = await r.next();
  if (first !== OPEN_BRACE) throw new BundleFormatError(first === -1 ? "empty, not JSON" : "not a JSON object", first === -1);
  const head: Partial<BundleHead> & { format?: unknown } = {};
  let verifier: RoomVerifier | null = null;
  // What arrives before the header is complete waits in order (the export writes the header first).
  const waiting: ((v: RoomVerifier) => void)[] = [];
  const feed = (f: (v: RoomVerifier) => void) => (verifier ? f(verifier) : waiting.push(f));
  const headerDone = () => {
    if (verifier || !("origin" in head && "room" in head && "server_key" in head)) return;
    if (typeof head.origin !== "string" || typeof head.room !== "string" || !isObject(head.server_key) || typeof head.server_key.key_name !== "string" || typeof head.server_key.pubkey_hex !== "string") {
      throw new BundleFormatError("the bundle's origin, room or server_key is malformed", false);
    }
    verifier = new RoomVerifier(head as BundleHead, typeof opts === "function" ? opts(head as BundleHead) : opts);
    for (const f of waiting.splice(0)) f(verifier);
  };
  let events = false;
  let checkpoints = false;

  await eachMember(r, "the bundle", async (key) => {
    if (key === "events") {
      events = true;
      await eachItem(r, "events", (e) => feed((v) => v.event(e as LogEvent)));
      feed((v) => v.endEvents());
    } else if (key === "checkpoints") {
      checkpoints = true;
      await eachItem(r, "checkpoints", (note) => feed((v) => v.checkpoint(note as string)));
    } else if (key === "projections" && (await r.next()) === OPEN_BRACE) {
      const rest: Record<string, unknown> = {};
      await eachMember(r, "projections", async (k) => {
        if (k === "messages" && (await r.next()) === OPEN_BRACKET) await eachItem(r, "messages", (m) => feed((v) => v.servedMessage(m as Message)));
        else rest[k] = await r.value();
      });
      feed((v) => v.servedProjections(rest as ServedProjections));
    } else {
      const value = await r.value();
      if (key === "format" || key === "origin" || key === "room" || key === "server_key") {
        (head as Record<string, unknown>)[key] = value;
        if (key === "format" && value !== BUNDLE_FORMAT) throw new BundleFormatError(`its format is not ${BUNDLE_FORMAT}, or it has no events list`, false);
        headerDone();
      } else if (key === "projections" && value !== null && value !== undefined) {
        throw new BundleFormatError("projections is not an object", false);
      }
    }
  });
  if ((await r.next()) !== END) throw new BundleFormatError("text after the bundle", true);
  if (head.format !== BUNDLE_FORMAT || !events) throw new BundleFormatError(`its format is not ${BUNDLE_FORMAT}, or it has no events list`, false);
  if (!checkpoints) throw new BundleFormatError("the bundle has no checkpoints list", false);
  if (!verifier) throw new BundleFormatError("the bundle's origin, room or server_key is missing", false);
  return (verifier as RoomVerifier).finish();
}

