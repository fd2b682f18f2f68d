/**
 * Untrusted text (room descriptions, agent names, subjects, titles) on its way into the markdown
 * and plain text the service serves. Two rules:
 *
 * - Nothing a terminal or a renderer acts on goes out raw: C0 controls and DEL become their
 *   visible Control Pictures (ESC → ␛), C1 controls, bidirectional overrides and invisible tag
 *   characters become U+FFFD, a tab becomes a space.
 * - A value cannot leave the place it was put in: every line of a quote starts with "> " whatever
 *   ends it (CR, LF, CRLF, VT, FF, NEL, U+2028, U+2029), markdown that could act outside the quote
 *   (HTML, link reference definitions) or read like the document's own structure (headings,
 *   fences) is escaped, and a one-line value has its line breaks turned into spaces.
 */

/** Every sequence that some reader (CommonMark, a terminal, a language model) takes as a line end. */
const LINE_BREAK = /\r\n|[\n\r\v\f\u0085\u2028\u2029]/g;

/**
 * C0 and DEL, C1, bidi embeddings/overrides/isolates and marks, and the tag block (invisible
 * ASCII look-alikes). Line breaks are gone before this applies.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f\u0080-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|[\u{e0000}-\u{e007f}]/gu;

function replaceUnsafe(ch: string): string {
  const code = ch.codePointAt(0)!;
  if (code === 0x09) return " ";
  if (code < 0x20) return String.fromCodePoint(0x2400 + code); // Control Pictures: ␀ … ␟
  if (code === 0x7f) return "\u2421"; // ␡
  return "\ufffd";
}

const clean = (s: string) => s.replace(UNSAFE, replaceUnsafe);

/** One line of plain text: line breaks become spaces, controls become visible. */
export function plainLine(text: string): string {
  return clean(text.replace(LINE_BREAK, " "));
}

/**
 * Markdown constructs that work outside the quote they sit in, or that open a block a reader may
 * take for the document's own: an ATX or setext heading, a code fence or a link reference
 * definition at the start of a line (up to three spaces in), and raw HTML anywhere (a comment, a
 * tag, an autolink). Backslashes already before a `<` are doubled, so they cannot cancel its escape.
 */
function neutralise(line: string): string {
  return line
    .replace(/^( {0,3})(#|`{3}|~{3}|\[|[=-](?=[ =-]*$))/, "$1\\$2")
    .replace(/(\\*)<(?=[A-Za-z!?/])/g, "$1$1\\<");
}

/** A markdown block quote of untrusted text: every line starts with "> ", however the text ends its lines. */
export function quoteBlock(text: string): string {
  return text
    .split(LINE_BREAK)
    .map((line) => {
      const safe = neutralise(clean(line));
      return safe === "" ? ">" : `> ${safe}`;
    })
    .join("\n");
}

/** A markdown code span of an untrusted one-line value: its delimiter is longer than any backtick run in it. */
export function inlineCode(text: string): string {
  const value = plainLine(text);
  const longest = Math.max(0, ...(value.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longest + 1);
  const pad = value.startsWith("`") || value.endsWith("`") ? " " : "";
  return `${fence}${pad}${value}${pad}${fence}`;
}
