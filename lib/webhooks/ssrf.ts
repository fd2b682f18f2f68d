// The guard between a webhook URL and the network (SPEC 12): a URL a room's reader typed must not
// make the server reach its own loopback, the cloud metadata service or the private network. The
// host is resolved on every attempt, every address it resolves to is checked, and the connection
// goes to the address that was checked (a lookup that returns it), so a DNS answer that changes
// between the check and the connection (rebinding) cannot move it.
import dns from "node:dns";
import http from "node:http";
import https from "node:https";
import net from "node:net";

/** Why an address is refused, or null when it is a public unicast address. */
export function forbiddenAddress(address: string): string | null {
  const ip = address.replace(/^\[|\]$/g, "").replace(/%.*$/, ""); // brackets and an IPv6 zone
  if (net.isIPv4(ip)) return forbiddenV4(v4Bytes(ip));
  if (net.isIPv6(ip)) return forbiddenV6(v6Bytes(ip));
  return "not an IP address";
}

const v4Bytes = (ip: string) => ip.split(".").map(Number);

function forbiddenV4([a = 0, b = 0, c = 0, d = 0]: number[]): string | null {
  if (a === 0) return a === 0 && b === 0 && c === 0 && d === 0 ? "unspecified (0.0.0.0)" : "this network (0.0.0.0/8)";
  if (a === 127) return "loopback (127.0.0.0/8)";
  if (a === 10) return "private (10.0.0.0/8)";
  if (a === 172 && b >= 16 && b <= 31) return "private (172.16.0.0/12)";
  if (a === 192 && b === 168) return "private (192.168.0.0/16)";
  if (a === 169 && b === 254) return "link-local (169.254.0.0/16, the cloud metadata address among them)";
  if (a === 100 && b >= 64 && b <= 127) return "shared carrier-grade NAT (100.64.0.0/10)";
  if (a === 192 && b === 0 && c === 0) return "IETF protocol assignments (192.0.0.0/24)";
  if ((a === 192 && b === 0 && c === 2) || (a === 198 && b === 51 && c === 100) || (a === 203 && b === 0 && c === 113)) return "documentation (TEST-NET)";
  if (a === 198 && (b === 18 || b === 19)) return "benchmarking (198.18.0.0/15)";
  if (a >= 224 && a <= 239) return "multicast (224.0.0.0/4)";
  if (a === 255 && b === 255 && c === 255 && d === 255) return "broadcast (255.255.255.255)";
  if (a >= 240) return "reserved (240.0.0.0/4)";
  return null;
}

/** The 16 bytes of an IPv6 address (net.isIPv6 has accepted it), an embedded dotted quad included. */
function v6Bytes(ip: string): number[] {
  let text = ip.toLowerCase();
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = v4Bytes(quad[1]!);
    text = `${text.slice(0, quad.index)}${((a! << 8) | b!).toString(16)}:${((c! << 8) | d!).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const part = (s: string) => (s ? s.split(":").map((h) => parseInt(h, 16)) : []);
  const left = part(head);
  const right = tail === undefined ? [] : part(tail);
  const words = [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}

function forbiddenV6(b: number[]): string | null {
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const word = (i: number) => (b[2 * i]! << 8) | b[2 * i + 1]!;
  if (zero(0, 16)) return "unspecified (::)";
  if (zero(0, 15) && b[15] === 1) return "loopback (::1)";
  const embedded = (v4: number[], form: string) => {
    const why = forbiddenV4(v4);
    return why ? `${why}, in its ${form} form` : null;
  };
  if (zero(0, 10) && word(5) === 0xffff) return embedded(b.slice(12), "IPv4-mapped IPv6");
  if (zero(0, 12)) return embedded(b.slice(12), "IPv4-compatible IPv6"); // ::a.b.c.d (deprecated)
  if (word(0) === 0x64 && word(1) === 0xff9b && zero(4, 12)) return embedded(b.slice(12), "NAT64 (64:ff9b::/96)");
  if (word(0) === 0x64 && word(1) === 0xff9b && word(2) === 1) return "local NAT64 (64:ff9b:1::/48)";
  if (word(0) === 0x2002) return embedded(b.slice(2, 6), "6to4 (2002::/16)");
  if (word(0) === 0x2001 && word(1) === 0) return "Teredo (2001::/32), which can tunnel to any IPv4 address";
  if (word(0) === 0x2001 && word(1) === 0xdb8) return "documentation (2001:db8::/32)";
  if (word(0) === 0x100 && zero(2, 8)) return "discard-only (100::/64)";
  if ((b[0]! & 0xfe) === 0xfc) return "unique local (fc00::/7)";
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return "link-local (fe80::/10)";
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0xc0) return "site-local (fec0::/10)";
  if (b[0] === 0xff) return "multicast (ff00::/8)";
  return null;
}

/** A URL refused before or at an attempt; `message` is a sentence for the agent or the delivery record. */
export class WebhookTargetError extends Error {}

export const MAX_URL_LENGTH = 2048;

/** http(s), a host, no credentials: the shape of a webhook URL (checked before any lookup). */
export function parseWebhookUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookTargetError("The url is not an absolute URL; send one such as https://example.com/hooks/parley.");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new WebhookTargetError(`The url's scheme is ${url.protocol.replace(/:$/, "")}; only http and https URLs can receive webhooks.`);
  }
  if (url.username || url.password) {
    throw new WebhookTargetError("The url carries a user name or password; put a token in its path or query instead (the X-Parley-Signature header authenticates every delivery).");
  }
  if (!url.hostname) throw new WebhookTargetError("The url has no host.");
  return url;
}

export type Lookup = (hostname: string) => Promise<{ address: string; family: number }[]>;
const systemLookup: Lookup = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

export interface GuardOptions {
  /** PARLEY_WEBHOOK_ALLOW_PRIVATE: any address is accepted (tests, local development). */
  allowPrivate: boolean;
  /** The resolver (tests give one; the system's otherwise). */
  lookup?: Lookup;
}

/**
 * The address to connect to: the URL's IP, or every address its host resolves to checked and the
 * first one chosen. Throws WebhookTargetError naming the refused address and why.
 */
export async function resolveTarget(url: URL, opts: GuardOptions): Promise<{ address: string; family: 4 | 6 }> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  let addresses: { address: string; family: number }[];
  if (net.isIP(host)) addresses = [{ address: host, family: net.isIP(host) }];
  else {
    try {
      addresses = await (opts.lookup ?? systemLookup)(host);
    } catch (err) {
      throw new WebhookTargetError(`The host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? "lookup failed"}).`);
    }
    if (addresses.length === 0) throw new WebhookTargetError(`The host ${host} does not resolve to any address.`);
  }
  if (!opts.allowPrivate) {
    for (const { address } of addresses) {
      const why = forbiddenAddress(address);
      if (why) {
        const via = address === host ? "" : ` (${host} resolves to ${address})`;
        throw new WebhookTargetError(`Webhooks cannot be sent to ${address}${via}: it is ${why}. Use a public http(s) address.`);
      }
    }
  }
  const first = addresses[0]!;
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}

export const ATTEMPT_TIMEOUT_MS = 5_000;
/** Of a receiver's answer only this much is read: its status is what counts. */
export const MAX_ANSWER_BYTES = 4 * 1024;

export interface AttemptResult {
  /** The receiver's HTTP status, when it answered. */
  status: number | null;
  /** 2xx. */
  ok: boolean;
  /** Why it failed, in a sentence (never the receiver's body). */
  error: string | null;
}

/**
 * POSTs `body` to `url` once: the guard first (on every attempt: a host may resolve elsewhere now),
 * the connection pinned to the checked address (TLS still verifies the URL's host name), no
 * redirects, the whole attempt within the timeout, at most MAX_ANSWER_BYTES of the answer read.
 */
export async function postOnce(
  rawUrl: string,
  body: string,
  headers: Record<string, string>,
  opts: GuardOptions & { timeoutMs?: number },
): Promise<AttemptResult> {
  const timeoutMs = opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
  const started = Date.now();
  const fail = (error: string, status: number | null = null): AttemptResult => ({ status, ok: false, error });
  let url: URL;
  let target: { address: string; family: 4 | 6 };
  try {
    url = parseWebhookUrl(rawUrl);
    target = await withTimeout(resolveTarget(url, opts), timeoutMs, `The host ${new URL(rawUrl).hostname} did not resolve within ${timeoutMs / 1000} s.`);
  } catch (err) {
    return fail(err instanceof WebhookTargetError ? err.message : String(err));
  }
  const left = Math.max(1, timeoutMs - (Date.now() - started));
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const done = (r: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(r);
    };
    const pinned: net.LookupFunction = (_host, options, callback) => {
      const cb = callback as (...args: unknown[]) => void;
      if ((options as dns.LookupAllOptions).all) cb(null, [{ address: target.address, family: target.family }]);
      else cb(null, target.address, target.family);
    };
    const request = url.protocol === "https:" ? https.request : http.request;
    const req = request(url, {
      method: "POST",
      headers: { ...headers, "Content-Length": String(Buffer.byteLength(body)) },
      lookup: pinned,
      agent: false, // a fresh connection each time: no pooled socket to another address is reused
    });
    const timer = setTimeout(() => done(fail(`No answer within ${timeoutMs / 1000} s.`)), left);
    req.on("error", (err: NodeJS.ErrnoException) => done(fail(`The connection failed: ${err.code ?? err.message}.`)));
    req.on("response", (res) => {
      const status = res.statusCode ?? 0;
      let read = 0;
      const finish = () => {
        if (status >= 200 && status < 300) done({ status, ok: true, error: null });
        else if (status >= 300 && status < 400) done(fail(`The receiver answered ${status}, a redirect; redirects are not followed.`, status));
        else done(fail(`The receiver answered ${status}.`, status));
      };
      res.on("data", (chunk: Buffer) => {
        read += chunk.length;
        if (read >= MAX_ANSWER_BYTES) finish(); // enough: the rest is not read
      });
      res.on("end", finish);
      res.on("error", finish);
    });
    req.end(body);
  });
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new WebhookTargetError(message)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
