// Secret screening (SPEC 12): the pattern table of lib/domain/secrets.ts. Every key below is built
// here from a seeded generator, so no real-looking credential sits in the repository as a literal
// (push protection would flag one), and a failure reproduces.
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import { ParleyError } from "../../lib/errors";
import { SECRET_KINDS, entropy, findSecret, refuseSecrets } from "../../lib/domain/secrets";
import { signCheckpoint } from "../../lib/log/checkpoint";
import { bytesToBase64, bytesToHex } from "../../lib/log/bytes";

/** A seeded xorshift: the same fake keys on every run. */
function generator(seed: number) {
  let x = seed * 2654435761 || 1;
  const next = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
  return (alphabet: string, n: number) => Array.from({ length: n }, () => alphabet[Math.floor(next() * alphabet.length)]).join("");
}
const rand = generator(7);
const UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const LOWER = "abcdefghijklmnopqrstuvwxyz";
const DIGITS = "0123456789";
const ALNUM = UPPER + LOWER + DIGITS;
const B64 = ALNUM + "+/";
const B64URL = ALNUM + "-_";
const HEX = "0123456789abcdef";

// Prefixes are joined at run time, for the same reason.
const p = (...parts: string[]) => parts.join("");

const b64url = (s: string | Buffer) => Buffer.from(s).toString("base64url");
function jwt(alg: string, sign: (input: string) => string): string {
  const input = `${b64url(JSON.stringify({ alg, typ: "JWT" }))}.${b64url(JSON.stringify({ sub: "agent-7", iat: 1764583200 }))}`;
  return `${input}.${sign(input)}`;
}
const hs256 = () => jwt("HS256", (input) => crypto.createHmac("sha256", rand(ALNUM, 32)).update(input).digest("base64url"));
function es256(): string {
  const { privateKey } = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" });
  return jwt("ES256", (input) => crypto.sign("sha256", Buffer.from(input), { key: privateKey, dsaEncoding: "ieee-p1363" }).toString("base64url"));
}
const pem = (type: "rsa" | "ec" | "ed25519", format: "pkcs8" | "pkcs1" | "sec1" = "pkcs8") => {
  const { privateKey } = type === "rsa"
    ? crypto.generateKeyPairSync("rsa", { modulusLength: 1024 })
    : type === "ec"
      ? crypto.generateKeyPairSync("ec", { namedCurve: "P-256" })
      : crypto.generateKeyPairSync("ed25519");
  return privateKey.export({ type: format, format: "pem" }) as string;
};
const wrap64 = (s: string) => s.match(/.{1,70}/g)!.join("\n");
const openssh = () =>
  `-----BEGIN OPENSSH PRIVATE KEY-----\n${wrap64(Buffer.concat([Buffer.from("openssh-key-v1\0"), crypto.randomBytes(200)]).toString("base64"))}\n-----END OPENSSH PRIVATE KEY-----\n`;

/** One realistic fake per kind; each is the whole text, and the credential starts at 0 unless `at` says where. */
const POSITIVES: { kind: string; text: string; at?: number }[] = [
  { kind: "private_key", text: pem("rsa", "pkcs1") },
  { kind: "private_key", text: pem("rsa") },
  { kind: "private_key", text: pem("ec", "sec1") },
  { kind: "private_key", text: pem("ed25519") },
  { kind: "private_key", text: openssh() },
  // A service-account JSON pasted into a message: the newlines are escapes.
  { kind: "private_key", text: `{"type": "service_account", "private_key": "${pem("rsa").replace(/\n/g, "\\n")}"}`, at: 44 },
  { kind: "jwt", text: hs256() },
  { kind: "jwt", text: es256() },
  { kind: "aws_access_key_id", text: p("AKIA", rand(UPPER + "234567", 16)) },
  { kind: "aws_access_key_id", text: p("ASIA", rand(UPPER + "234567", 16)) },
  { kind: "aws_secret_access_key", text: `aws_secret_access_key = ${rand(B64, 40)}`, at: 24 },
  { kind: "aws_secret_access_key", text: `"SecretAccessKey": "${rand(B64, 40)}"`, at: 20 },
  { kind: "github_token", text: p("gh", "p_", rand(ALNUM, 36)) },
  { kind: "github_token", text: p("gh", "s_", rand(ALNUM, 36)) },
  { kind: "github_token", text: p("github", "_pat_", rand(ALNUM, 22), "_", rand(ALNUM, 59)) },
  { kind: "gitlab_token", text: p("gl", "pat-", rand(ALNUM + "_-", 20)) },
  { kind: "slack_token", text: p("xo", "xb-", rand(DIGITS, 12), "-", rand(DIGITS, 13), "-", rand(ALNUM, 24)) },
  { kind: "slack_token", text: p("xa", "pp-1-", rand(UPPER + DIGITS, 11), "-", rand(DIGITS, 13), "-", rand(HEX, 64)) },
  { kind: "slack_webhook_url", text: p("https://hooks.", "slack.com/services/T", rand(UPPER + DIGITS, 8), "/B", rand(UPPER + DIGITS, 10), "/", rand(ALNUM, 24)) },
  { kind: "discord_webhook_url", text: p("https://discord.com/api/", "webhooks/", rand(DIGITS, 18), "/", rand(B64URL, 68)) },
  { kind: "stripe_secret_key", text: p("sk", "_live_", rand(ALNUM, 24)) },
  { kind: "stripe_secret_key", text: p("rk", "_test_", rand(ALNUM, 99)) },
  { kind: "stripe_webhook_secret", text: p("wh", "sec_", rand(ALNUM, 32)) },
  { kind: "openai_api_key", text: p("sk-", "proj-", rand(B64URL, 156)) },
  { kind: "openai_api_key", text: p("sk-", rand(ALNUM, 20), "T3Blbk", "FJ", rand(ALNUM, 20)) },
  { kind: "anthropic_api_key", text: p("sk-", "ant-api03-", rand(B64URL, 93), "AA") },
  { kind: "google_api_key", text: p("AI", "za", rand(B64URL, 35)) },
  { kind: "google_oauth_client_secret", text: p("GOC", "SPX-", rand(B64URL, 28)) },
  { kind: "google_oauth_token", text: p("ya", "29.", rand(B64URL, 150)) },
  { kind: "npm_token", text: p("np", "m_", rand(ALNUM, 36)) },
  { kind: "pypi_token", text: p("pypi-", "AgEIcHlwaS5vcmc", rand(B64URL, 120)) },
  { kind: "huggingface_token", text: p("hf", "_", rand(UPPER + LOWER, 34)) },
  { kind: "sendgrid_api_key", text: p("SG", ".", rand(B64URL, 22), ".", rand(B64URL, 43)) },
  { kind: "digitalocean_token", text: p("do", "p_v1_", rand(HEX, 64)) },
  { kind: "url_password", text: `postgres://app:${rand(ALNUM, 20)}@db.internal:5432/prod`, at: 15 },
  { kind: "bearer_token", text: `Authorization: Bearer ${rand(B64URL, 32)}`, at: 22 },
  { kind: "basic_auth", text: `Authorization: Basic ${Buffer.from(`deploy:${rand(ALNUM, 20)}`).toString("base64")}`, at: 21 },
  // Assignments: every way a name meets its value.
  { kind: "secret_assignment", text: `password = "${rand(ALNUM, 20)}"`, at: 12 },
  { kind: "secret_assignment", text: `password: '${rand(ALNUM, 6)}#${rand(ALNUM, 6)}!'`, at: 11 },
  { kind: "secret_assignment", text: `DB_PASSWORD=${rand(ALNUM, 24)}`, at: 12 },
  { kind: "secret_assignment", text: `{"api_key": "${rand(HEX, 32)}"}`, at: 13 },
  { kind: "secret_assignment", text: `{\\"token\\": \\"${rand(ALNUM, 30)}\\"}`, at: 14 },
  { kind: "secret_assignment", text: `dbPassword: "${rand(ALNUM, 16)}"`, at: 13 },
  { kind: "secret_assignment", text: `clientSecret := "${rand(ALNUM, 40)}"`, at: 17 },
  { kind: "secret_assignment", text: `x-api-key: ${rand(ALNUM, 40)}`, at: 11 },
  { kind: "secret_assignment", text: `secret = b'${rand(B64, 44)}'`, at: 11 },
  { kind: "secret_assignment", text: `ACCESS_TOKEN=${rand(HEX, 40)}`, at: 13 },
  { kind: "secret_assignment", text: `session_token => '${rand(B64URL, 43)}'`, at: 18 },
  { kind: "secret_assignment", text: `curl --token ${rand(ALNUM, 32)} https://api.example.com`, at: 13 },
  { kind: "secret_assignment", text: `curl --password=${rand(ALNUM, 16)}`, at: 16 },
  { kind: "secret_assignment", text: `GET /callback?state=ok&access_token=${rand(B64URL, 40)}&expires=3600`, at: 36 },
  { kind: "secret_assignment", text: `lease_token: ${rand(B64URL, 43)}`, at: 13 },
  { kind: "secret_assignment", text: `DefaultEndpointsProtocol=https;AccountName=store;AccountKey=${rand(B64, 86)}==;`, at: 60 },
];

describe("findSecret: every kind is recognised", () => {
  for (const [i, c] of POSITIVES.entries()) {
    test(`${c.kind} #${i}: ${c.text.slice(0, 24).replace(/\n/g, "\\n")}…`, () => {
      assert.deepEqual(findSecret(c.text), { kind: c.kind, offset: c.at ?? 0 }, c.text);
      // The same credential inside prose: the offset moves with it.
      assert.deepEqual(findSecret(`Here it is: ${c.text} (do not share)`), { kind: c.kind, offset: (c.at ?? 0) + 12 }, c.text);
    });
  }

  test("every kind of the table has a positive case", () => {
    assert.deepEqual([...new Set(POSITIVES.map((c) => c.kind))].sort(), SECRET_KINDS.map((k) => k.kind).sort());
  });

  test("a random value of mixed-case letters ending in digits is a value, not a name; names with trailing digits pass", () => {
    for (const value of ["YzEVkSbrdWjVAHEB7332", "aPVZVxhlSwfxGppUD970", "BrCzWGxKaTmxSKrMu005"]) {
      assert.equal(findSecret(`password="${value}"`)?.kind, "secret_assignment", value);
    }
    for (const name of ["Summer2024", "userPassword2", "DB_PASSWORD_V2", "token_v2"]) assert.equal(findSecret(`password="${name}"`), undefined, name);
  });

  test("the offset counts characters (code points), not UTF-16 units", () => {
    const key = p("gh", "p_", rand(ALNUM, 36));
    assert.deepEqual(findSecret(`😀😀 ${key}`), { kind: "github_token", offset: 3 });
  });

  test("the earliest credential is reported; on a tie, the specific kind beats the assignment", () => {
    const gh = p("gh", "p_", rand(ALNUM, 36));
    const aws = p("AKIA", rand(UPPER + "234567", 16));
    assert.deepEqual(findSecret(`${aws} then ${gh}`), { kind: "aws_access_key_id", offset: 0 });
    assert.deepEqual(findSecret(`OPENAI_API_KEY=${p("sk-", "proj-", rand(B64URL, 80))}`), { kind: "openai_api_key", offset: 15 });
    assert.deepEqual(findSecret(`Authorization: Bearer ${hs256()}`), { kind: "jwt", offset: 22 });
    assert.deepEqual(findSecret(`https://x-access-token:${gh}@github.com/o/r.git`), { kind: "github_token", offset: 23 });
  });
});

/** Ed25519 keys, signatures and checkpoints as the service makes them. */
function ed25519Samples(n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
    const pub = new Uint8Array(publicKey.export({ format: "der", type: "spki" }).subarray(-32));
    const sig = new Uint8Array(crypto.sign(null, crypto.randomBytes(40), privateKey));
    const root = new Uint8Array(crypto.randomBytes(32));
    const checkpoint = signCheckpoint({
      origin: `parley.example/room/${crypto.randomUUID()}`,
      size: i + 1,
      root,
      keyName: "parley.example",
      pubkey: pub,
      sign: (msg) => new Uint8Array(crypto.sign(null, msg, privateKey)),
    });
    out.push(
      bytesToHex(pub), bytesToHex(sig), bytesToBase64(pub), bytesToBase64(sig), Buffer.from(sig).toString("base64url"), bytesToBase64(root), checkpoint,
      `pubkey_hex: ${bytesToHex(pub)}, signature_hex: "${bytesToHex(sig)}"`,
      JSON.stringify({ seq: i + 1, leaf_hash: bytesToHex(root), checkpoint }),
      `memory_root=${bytesToBase64(root)} root: ${bytesToBase64(root)}`,
    );
  }
  return out;
}

describe("findSecret: what must pass", () => {
  const sha = () => crypto.createHash("sha256").update(crypto.randomBytes(16)).digest("hex");
  const bulk: [string, () => string][] = [
    ["UUIDs", () => crypto.randomUUID()],
    ["UUIDs, upper case, in a sentence", () => `room ${crypto.randomUUID().toUpperCase()} is open`],
    ["SHA-256 hex", sha],
    ["SHA-256 hex, upper case", () => sha().toUpperCase()],
    ["SHA-256 as a named hash", () => `context_hash: "${sha()}" and sha256=${sha()}`],
    ["git commit hashes", () => `commit ${sha().slice(0, 40)} (short ${sha().slice(0, 7)})`],
    ["SHA-256 base64", () => crypto.createHash("sha256").update(crypto.randomBytes(16)).digest("base64")],
    ["random base64 of 30 bytes (the length of an AWS secret)", () => crypto.randomBytes(30).toString("base64")],
    ["room URLs", () => `http://localhost:3000/${crypto.randomUUID()} https://parley.example/room/${crypto.randomUUID()}#msg-12 /api/rooms/${crypto.randomUUID()}/messages?since=3&wait=25`],
  ];
  for (const [name, make] of bulk) {
    test(`${name} (500 samples)`, () => {
      for (let i = 0; i < 500; i++) {
        const s = make();
        assert.equal(findSecret(s), undefined, s);
      }
    });
  }

  test("Ed25519 public keys and signatures (hex, base64, base64url), Merkle roots and signed checkpoints (200 keys)", () => {
    for (const s of ed25519Samples(200)) assert.equal(findSecret(s), undefined, s);
  });

  const PROSE = [
    'password = os.environ["DB_PASSWORD"]',
    'api_key = os.getenv("OPENAI_API_KEY")',
    "token=<your token>",
    "password: ********",
    "password: ****1234",
    'password: "••••••••"',
    "const token = await getToken();",
    "const token = crypto.randomBytes(32).toString(\"base64url\");",
    "password: string; token?: string | null",
    "export GITHUB_TOKEN=$(gh auth token)",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    'password = "${DB_PASSWORD}"',
    "password = config.database.password",
    "self.token = token",
    "password=hunter2",
    "password: Summer2024",
    'secret = "changeme-now-please"',
    'password = "your-password-here"',
    'api_key: "sk-...abcd"',
    "token: REDACTED_0000",
    "Authorization: Bearer <owner_token>",
    "Authorization: Bearer $PARLEY_OWNER_TOKEN",
    "Authorization: Basic dXNlcjpwYXNzd29yZA==",
    "Use Basic Authentication with your password.",
    "postgres://parley:parley@localhost:5432/parley",
    "redis://:${REDIS_PASSWORD}@cache:6379",
    "The password is the one we agreed on; the token expires in 3600 seconds.",
    "max_tokens: 4096, input_tokens=1234, token_budget=8000",
    "token_type: bearer, token_url = https://oauth2.example.com/token",
    "passwords: 3, bypass=Xk9fT2mQ7pL4 is a flag value",
    "pwd: /home/alice/projects/parley and PWD=/Users/Alice/Code",
    'if (pem.startsWith("-----BEGIN PRIVATE KEY-----")) { … }',
    "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
    `unsigned: ${b64url(JSON.stringify({ alg: "none" }))}.${b64url(JSON.stringify({ sub: "x" }))}.`,
    `alg none with junk: ${b64url(JSON.stringify({ alg: "none" }))}.${b64url(JSON.stringify({ sub: "x" }))}.${rand(B64URL, 20)}`,
    `publishable: ${p("pk", "_live_", rand(ALNUM, 24))}`,
    `AWS docs: ${p("AKIA", "IOSFODNN7", "EXAMPLE")} and aws_secret_access_key = ${p("wJalrXUtnFEMI/K7MDENG/bPxRfiCY", "EXAMPLEKEY")}`,
    `placeholders: ${p("gh", "p_")}${"x".repeat(36)} ${p("xo", "xb-")}0000-${"X".repeat(24)} ${p("sk", "_live_")}${"0".repeat(24)}`,
    `slack docs: ${p("https://hooks.", "slack.com/services/T00000000/B00000000/")}${"X".repeat(24)}`,
    "ghp_ tokens start with ghp_, Stripe secret keys with sk_live_, OpenAI keys with sk-proj-.",
    "agent_id: bob, auth: signed, nonce: nnnnnnnnnnnnnnnnnnnn, key_ref: parley.example",
    "version=v1.2.3 build: 2026-12-01T10:00:00Z",
    "The CSRF check compares csrf_token == session.csrf_token",
    'def login(password: str = None, token: str = "") -> bool:',
    "mysql -u root -p",
  ];
  for (const text of PROSE) {
    test(`prose and code: ${text.slice(0, 60).replace(/\n/g, "\\n")}`, () => assert.equal(findSecret(text), undefined));
  }
});

describe("entropy", () => {
  test("bits per character", () => {
    assert.equal(entropy("aaaaaaaa"), 0);
    assert.equal(entropy("abcdefgh"), 3);
    assert.equal(entropy("😀😀ab"), 1.5, "code points, not UTF-16 units");
  });
});

describe("refuseSecrets", () => {
  const key = p("gh", "p_", rand(ALNUM, 36));

  test("a clean payload passes, numbers and nesting included", () => {
    refuseSecrets({ text: "hello", reply_to: 3, artifacts: [{ type: "commit", ref: "a".repeat(40), sha256: "b".repeat(64) }], nested: { deep: [null, true, "fine"] } });
  });

  test("422 secret_detected naming kind, field (nested, arrays by index) and offset; the value is never echoed", () => {
    const payload = { task_id: 1, summary: "done", artifacts: [{ type: "url", ref: "https://example.com" }, { type: "text", ref: "ok", note: `token is ${key}` }] };
    let thrown: unknown;
    try {
      refuseSecrets(payload);
    } catch (err) {
      thrown = err;
    }
    assert.ok(thrown instanceof ParleyError, "a ParleyError");
    assert.equal(thrown.status, 422);
    const body = thrown.toJSON();
    assert.equal(body.code, "secret_detected");
    assert.equal(body.kind, "github_token");
    assert.equal(body.field, "artifacts.1.note");
    assert.equal(body.offset, 9);
    assert.match(body.detail, /^artifacts\.1\.note: at character 9 .*GitHub token \(github_token\)/);
    assert.match(body.detail, /public and permanent/);
    assert.match(body.detail, /placeholder/);
    assert.ok(!body.detail.includes(key.slice(4)), "the detail does not repeat the secret");
  });

  test("the first field in payload order is the one named", () => {
    assert.throws(() => refuseSecrets({ subject: "price", value: `AKIA${rand(UPPER, 16)}`, quote: key }), (err: ParleyError) => err.toJSON().field === "value");
  });

  test("other errors keep their JSON body", () => {
    assert.deepEqual(new ParleyError("rate_limited", "slow down", { retryAfter: 3 }).toJSON(), { detail: "slow down", code: "rate_limited" });
  });
});
