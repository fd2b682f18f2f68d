/**
 * Secret screening at intake (SPEC 12). A room's log is append-only and public to anyone with the
 * URL, so text an agent or the owner writes that carries a recognisable credential is refused
 * (422 secret_detected) before it reaches the log: nothing is written, and the answer names the
 * kind of credential, the field and the offset, never the value.
 *
 * The screen is a table of patterns. Most kinds have a shape of their own (a vendor prefix, a fixed
 * length), so the pattern alone is close to exact; a check then drops documented placeholders
 * (AWS's …EXAMPLE keys, runs of x, elisions) and bodies too repetitive to be random. The kinds
 * without a shape of their own (a value after `password=`, `token:`, `Bearer`, in a URL's user
 * info) are only refused when the value reads as a literal, high-entropy string: not a variable,
 * call, environment reference, path, URL, mask (`********`) or placeholder (`<your token>`).
 *
 * What passes on purpose: hashes and ids (UUIDs, SHA-256 and git hex, base64 Merkle roots,
 * checkpoints, Ed25519 keys and signatures) carry no prefix and are only screened after a secret's
 * name (`token=<hex>` is refused, `leaf_hash=<hex>` is not); Stripe publishable keys (pk_…) are
 * public by design; unsigned JWTs (alg "none") prove nothing. The screen catches accidents, not
 * an agent set on leaking: a key split or encoded on purpose goes through.
 */
import { ParleyError } from "../errors";

export interface SecretFound {
  /** The kind of credential, one of SECRET_KINDS. */
  kind: string;
  /** Where the credential starts in the text, in characters (Unicode code points). */
  offset: number;
}

interface Rule {
  kind: string;
  /** How the detail names it: "what looks like <what>". */
  what: string;
  /** Global, with indices (`d`): the credential starts at group `at` (0: the whole match). */
  re: RegExp;
  at?: number;
  /** A further check on the match; a match it rejects is not a finding (the scan goes on). */
  check?: (m: RegExpExecArray, text: string) => boolean;
}

// ---- entropy and the shape of random strings ----

/** Shannon entropy in bits per character (code points). */
export function entropy(s: string): number {
  const counts = new Map<string, number>();
  let n = 0;
  for (const ch of s) {
    counts.set(ch, (counts.get(ch) ?? 0) + 1);
    n++;
  }
  let h = 0;
  for (const c of counts.values()) h -= (c / n) * Math.log2(c / n);
  return h;
}

/**
 * A random body of a known credential format: not a documented placeholder and not repetitive.
 * 2.5 bits per character: of 20,000 random 16-character base32 bodies (AWS key ids), none fell below.
 */
const MARKERS = /EXAMPLE|x{6}|X{6}|\.\.\.|…|\*{3}/;
const randomBody = (body: string) => !MARKERS.test(body) && entropy(body) >= 2.5;

/**
 * Entropy a literal value needs to count as random: 3 bits per character, less for short values
 * (a short string cannot reach it: 8 distinct characters are exactly 3 bits).
 */
const needed = (length: number) => Math.min(3, 0.8 * Math.log2(length));

/**
 * The characters a literal secret is written with: letters, digits and the symbols of base64,
 * hex, URL-safe tokens and generated passwords. Code and prose bring others (spaces, brackets,
 * commas, colons, quotes, angle brackets), so a value that has them is not taken for a secret.
 */
const SECRET_ALPHABET = /^[A-Za-z0-9+/=_.~!@#$%^&*-]+$/;
/** Values that stand for a secret rather than being one: templates, environment references, masks. */
const PLACEHOLDER_START = /^[$%*]/;
/** Unquoted, these also start YAML tags, anchors and comments, and home paths. */
const UNQUOTED_START = /^[#&!~]/;
const PLACEHOLDER_WORDS = /example|sample|placeholder|redacted|change[_-]?me|dummy|your|passw(?:or)?d|secret|token|mask|\.\.\.|\*\*\*|xxxx/i;
/** Leetspeak undone, so p@ssw0rd and s3cr3t read as the words they are. */
const unleet = (s: string) => s.toLowerCase().replace(/[$5]/g, "s").replace(/[@4]/g, "a").replace(/0/g, "o").replace(/1/g, "i").replace(/3/g, "e").replace(/7/g, "t");
/** Member access: config.db.password, os.environ, self.token, process.env.API_KEY. */
const MEMBER = /^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$/;
/** Paths and e-mail addresses (URLs have a colon, outside the alphabet). */
const PATH_OR_EMAIL = /^(?:(?:~|\.{1,2})?\/[\w.@-]+(?:\/[\w.@-]*)*|[^@\s]+@[^@\s]+\.[A-Za-z]{2,})$/;

/**
 * A name rather than a value: words joined by _ - . or camelCase, each word lower case,
 * Capitalised or ALL CAPS, with optional trailing digits (DB_PASSWORD, token_v2, userPassword2,
 * encryption.key, Summer2024). A random string almost always has a letter after a digit inside
 * one word (aB3dEf, 9f86d0…), or a word of mixed case (YzEVkSbrd…7332: "EVk").
 */
function nameLike(v: string): boolean {
  return v.split(/[_.-]|(?<=[a-z])(?=[A-Z])/).every((part) => /^(?:[A-Z]?[a-z]*|[A-Z]+)\d*$/.test(part));
}

/**
 * A literal, machine-random value, as found after a secret's name: written with SECRET_ALPHABET,
 * at least 8 characters (12 unquoted: shorter unquoted values are mostly ids and badges), letters
 * and something else, not a placeholder, a name, a path or member access, and with entropy enough
 * for its length. Unquoted, `=` may only pad the end (a=b=c is code).
 */
export function literalSecret(value: string, quoted: boolean): boolean {
  const v = quoted ? value : value.replace(/[.!]+$/, "");
  if ([...v].length < (quoted ? 8 : 12) || !SECRET_ALPHABET.test(v)) return false;
  if (PLACEHOLDER_START.test(v) || (!quoted && (UNQUOTED_START.test(v) || /=[^=]/.test(v)))) return false;
  if (PLACEHOLDER_WORDS.test(v) || PLACEHOLDER_WORDS.test(unleet(v)) || PATH_OR_EMAIL.test(v)) return false;
  if (!/[A-Za-z]/.test(v) || !/[^A-Za-z]/.test(v) || MEMBER.test(v) || nameLike(v)) return false;
  return entropy(v) >= needed(v.length);
}

// ---- the table ----

/** Not in the middle of a longer token. */
const B = String.raw`(?<![A-Za-z0-9_-])`;
/** The token ends here. */
const E = String.raw`(?![A-Za-z0-9_-])`;
const re = (source: string, flags = "") => new RegExp(source, `gd${flags}`);
const group = (m: RegExpExecArray, i: number) => m[i] ?? "";

function base64UrlJson(segment: string): unknown {
  try {
    return JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
}

/** The names a secret goes by in an assignment (matched case-insensitively, at a word start). */
const SECRET_NAME = [
  String.raw`(?:(?:auth|access|refresh|api|bot|app|oauth|session|bearer|client|id|csrf|xsrf|webhook)[_-]?)?(?:token|secret)`,
  String.raw`pass(?:word|wd|phrase)?`,
  "pwd",
  String.raw`(?:api|access|secret|private|signing|encryption|master|auth|app|client|account|license)[_-]?key(?:[_-]?base)?`,
].join("|");
const QUOTE_CLOSE = String.raw`(?:["'\]]|\\["'])?`;
const SEPARATOR = String.raw`(${QUOTE_CLOSE}[ \t]*(?::=|=>|={1,3}|:)[ \t]*|[ \t]+)`;
const VALUE = [
  String.raw`[bruf]?\\?"([^"\\\n]{1,400})\\?"`,
  String.raw`[bruf]?\\?'([^'\\\n]{1,400})\\?'`,
  "`([^`\\n]{1,400})`",
  // Unquoted: the alphabet (without &, which separates query parameters), = only as padding, and
  // it must end the word: `token: Record<string>` is a type, not a value.
  String.raw`([A-Za-z0-9+/_.~!@#$%^*-]{1,400}={0,3})(?![^\s,;&)\]}"'\`])`,
].join("|");

/** A name starts at i: the text's start, after a non-alphanumeric, or at a camelCase hump. */
function wordStart(text: string, i: number): boolean {
  if (i === 0) return true;
  const prev = text[i - 1]!;
  if (!/[A-Za-z0-9]/.test(prev)) return true;
  return /[a-z0-9]/.test(prev) && /[A-Z]/.test(text[i]!);
}

function assignment(m: RegExpExecArray, text: string): boolean {
  if (!wordStart(text, m.index)) return false;
  // A bare space separates a name from its value only after a command-line flag: --token abc.
  if (/^[ \t]+$/.test(group(m, 2)) && text.slice(Math.max(0, m.index - 2), m.index) !== "--") return false;
  const quoted = m[3] ?? m[4] ?? m[5];
  return quoted !== undefined ? literalSecret(quoted, true) : literalSecret(group(m, 6), false);
}

const RULES: Rule[] = [
  {
    kind: "private_key",
    what: "a PEM private key",
    re: re(String.raw`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`),
    // Only with its base64 body: the header alone (in code that checks for it) is no secret.
    check: (m, text) => {
      let body = text.slice(m.index + m[0].length, m.index + m[0].length + 600);
      const end = body.indexOf("-----END");
      if (end >= 0) body = body.slice(0, end);
      const run = /[A-Za-z0-9+/]{40,}/.exec(body);
      return run !== null && entropy(run[0]) >= 3.5;
    },
  },
  {
    kind: "jwt",
    what: "a signed JSON Web Token",
    re: re(String.raw`${B}eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{2,}\.([A-Za-z0-9_-]{16,})`),
    check: (m) => {
      const header = base64UrlJson(m[0].slice(0, m[0].indexOf(".")));
      const alg = header && typeof header === "object" ? (header as { alg?: unknown }).alg : undefined;
      return typeof alg === "string" && alg.toLowerCase() !== "none" && randomBody(group(m, 1));
    },
  },
  {
    kind: "aws_access_key_id",
    what: "an AWS access key id",
    re: re(String.raw`${B}(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])([A-Z0-9]{16})(?![A-Za-z0-9])`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "aws_secret_access_key",
    what: "an AWS secret access key",
    re: re(
      String.raw`(?<![A-Za-z0-9])(?:aws[_-]?secret(?:[_-]?access)?[_-]?key|secret[_-]?access[_-]?key)${QUOTE_CLOSE}[ \t]*(?::=|=>|={1,3}|:)[ \t]*[bru]?\\?["'\`]?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])`,
      "i",
    ),
    at: 1,
    check: (m) => !MARKERS.test(group(m, 1)) && entropy(group(m, 1)) >= 3.5,
  },
  {
    kind: "github_token",
    what: "a GitHub token",
    re: re(String.raw`${B}(?:gh[pousr]_([A-Za-z0-9]{36,251})|github_pat_([A-Za-z0-9_]{50,}))${E}`),
    check: (m) => randomBody(m[1] ?? group(m, 2)),
  },
  {
    kind: "gitlab_token",
    what: "a GitLab token",
    re: re(String.raw`${B}gl(?:pat|dt|rt|ptt|oas|cbt|soat|ffct|imt|agent|ft|wt)-([A-Za-z0-9_-]{20,})`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "slack_token",
    what: "a Slack token",
    re: re(String.raw`${B}(?:xox[abposre]|xapp)-(\d+-[0-9A-Za-z-]{16,})`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "slack_webhook_url",
    what: "a Slack webhook URL",
    re: re(String.raw`(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/((?:[A-Za-z0-9_-]+/){1,4}[A-Za-z0-9_-]{16,})`),
    check: (m) => randomBody(group(m, 1).slice(group(m, 1).lastIndexOf("/") + 1)),
  },
  {
    kind: "discord_webhook_url",
    what: "a Discord webhook URL",
    re: re(String.raw`(?:https?://)?(?:canary\.|ptb\.)?discord(?:app)?\.com/api/webhooks/\d{5,}/([A-Za-z0-9_-]{40,})`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "stripe_secret_key",
    what: "a Stripe secret or restricted key",
    re: re(String.raw`${B}(?:sk|rk)_(?:live|test)_([0-9A-Za-z]{16,})${E}`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "stripe_webhook_secret",
    what: "a Stripe webhook signing secret",
    re: re(String.raw`${B}whsec_([0-9A-Za-z+/=]{24,})`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "anthropic_api_key",
    what: "an Anthropic API key",
    re: re(String.raw`${B}sk-ant-[a-z]{2,8}\d{0,3}-([A-Za-z0-9_-]{32,})`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "openai_api_key",
    what: "an OpenAI API key",
    re: re(String.raw`${B}sk-(?:(?:proj|svcacct|admin)-([A-Za-z0-9_-]{32,})|([A-Za-z0-9_-]{16,}T3BlbkFJ[A-Za-z0-9_-]{16,})|([A-Za-z0-9]{48}))${E}`),
    check: (m) => randomBody(m[1] ?? m[2] ?? group(m, 3)),
  },
  {
    kind: "google_api_key",
    what: "a Google API key",
    re: re(String.raw`${B}AIza([0-9A-Za-z_-]{35})${E}`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "google_oauth_client_secret",
    what: "a Google OAuth client secret",
    re: re(String.raw`${B}GOCSPX-([0-9A-Za-z_-]{28})${E}`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "google_oauth_token",
    what: "a Google OAuth access token",
    re: re(String.raw`${B}ya29\.([0-9A-Za-z_-]{30,})`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "npm_token",
    what: "an npm access token",
    re: re(String.raw`${B}npm_([A-Za-z0-9]{36})${E}`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "pypi_token",
    what: "a PyPI API token",
    re: re(String.raw`${B}pypi-AgEIcHlwaS5vcmc([A-Za-z0-9_-]{40,})`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "huggingface_token",
    what: "a Hugging Face access token",
    re: re(String.raw`${B}hf_([A-Za-z]{34})${E}`),
    // Letters only, so a camelCase name could take the shape: a random body is about half capitals.
    check: (m) => {
      const caps = group(m, 1).replace(/[^A-Z]/g, "").length;
      return caps >= 8 && caps <= 26 && randomBody(group(m, 1));
    },
  },
  {
    kind: "sendgrid_api_key",
    what: "a SendGrid API key",
    re: re(String.raw`${B}SG\.[A-Za-z0-9_-]{22}\.([A-Za-z0-9_-]{43})${E}`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "digitalocean_token",
    what: "a DigitalOcean token",
    re: re(String.raw`${B}do[opr]_v1_([a-f0-9]{64})${E}`),
    check: (m) => randomBody(group(m, 1)),
  },
  {
    kind: "url_password",
    what: "a password in a URL",
    re: re(String.raw`(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/?#@"'<>\[\]]{0,100}:([^\s/?#@"'<>]{1,200})@`),
    at: 1,
    check: (m) => literalSecret(decodeURIComponentSafe(group(m, 1)), false),
  },
  {
    kind: "bearer_token",
    what: "a bearer token",
    re: re(String.raw`(?<![A-Za-z0-9])(?:[Bb]earer|BEARER)[ \t]+([A-Za-z0-9._~+/-]{8,}=*)`),
    at: 1,
    check: (m) => literalSecret(group(m, 1), false),
  },
  {
    kind: "basic_auth",
    what: "HTTP Basic credentials",
    re: re(String.raw`(?<![A-Za-z0-9])(?:[Bb]asic|BASIC)[ \t]+([A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])`),
    at: 1,
    check: (m) => {
      const decoded = Buffer.from(group(m, 1), "base64").toString("utf8");
      const colon = decoded.indexOf(":");
      const printable = [...decoded].every((ch) => ch >= " " && ch !== "\ufffd");
      return colon > 0 && printable && literalSecret(decoded.slice(colon + 1), true);
    },
  },
  {
    kind: "secret_assignment",
    what: "a password, token, secret or API key written out after its name",
    re: re(String.raw`(${SECRET_NAME})${SEPARATOR}(?:${VALUE})`, "i"),
    check: assignment,
  },
];

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** The credential kinds the screen knows, in the order it reports a tie. */
export const SECRET_KINDS: readonly { kind: string; what: string }[] = RULES.map(({ kind, what }) => ({ kind, what }));

/** Where the value of an assignment starts (the match starts at the name). */
function startOf(rule: Rule, m: RegExpExecArray): number {
  if (rule.kind === "secret_assignment") {
    for (const i of [3, 4, 5, 6]) if (m[i] !== undefined) return m.indices![i]![0];
  }
  const at = rule.at ?? 0;
  return at === 0 ? m.index : m.indices![at]![0];
}

function firstMatch(rule: Rule, text: string): number | undefined {
  // The table's own expression, from the start: the scan is synchronous, so nothing else moves
  // its lastIndex meanwhile (a copy per scan cost a third of the scan).
  const pattern = rule.re;
  pattern.lastIndex = 0;
  for (let m = pattern.exec(text); m; m = pattern.exec(text)) {
    if (!rule.check || rule.check(m, text)) return startOf(rule, m);
    pattern.lastIndex = m.index + 1; // overlapping candidates: try from the next character
  }
  return undefined;
}

/** The first credential in the text (the earliest; on a tie, the most specific kind), or undefined. */
export function findSecret(text: string): SecretFound | undefined {
  let best: { kind: string; index: number } | undefined;
  for (const rule of RULES) {
    const index = firstMatch(rule, text);
    if (index !== undefined && (!best || index < best.index)) best = { kind: rule.kind, index };
  }
  return best && { kind: best.kind, offset: [...text.slice(0, best.index)].length };
}

function walk(value: unknown, path: string[]): { found: SecretFound; field: string } | undefined {
  if (typeof value === "string") {
    const found = findSecret(value);
    return found && { found, field: path.join(".") };
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const hit = walk(value[i], [...path, String(i)]);
      if (hit) return hit;
    }
  } else if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      const hit = walk(v, [...path, k]);
      if (hit) return hit;
    }
  }
  return undefined;
}

/**
 * Refuses a payload any of whose strings (nested objects and arrays too) carries a credential:
 * 422 secret_detected with `kind`, `field` (dotted, arrays by index: artifacts.0.ref) and `offset`.
 * Called by appendEvent inside the write transaction, so the throw writes nothing.
 */
export function refuseSecrets(payload: Record<string, unknown>): void {
  const hit = walk(payload, []);
  if (!hit) return;
  const { found, field } = hit;
  const what = RULES.find((r) => r.kind === found.kind)!.what;
  throw new ParleyError(
    "secret_detected",
    `${field}: at character ${found.offset} this text carries what looks like ${what} (${found.kind}). ` +
      "The room's log is public and permanent, so nothing was written: remove the credential or put a placeholder such as <REDACTED> in its place and send again, and revoke it if it was real.",
    { fields: { kind: found.kind, field, offset: found.offset } },
  );
}
