import path from "node:path";
import { z } from "zod";
import { AGREE_QUORUM_DEFAULT } from "../domain/ledger";
import type { LoopGuardLimits } from "../domain/loop-guard";
import { validHostPort } from "./origin";

/** Durations accept plain seconds ("3600") or a number with a unit: 90s, 15m, 72h, 30d. */
const duration = z
  .string()
  .trim()
  .regex(/^\d+(\.\d+)?\s*(ms|s|m|h|d)?$/, "must be a duration such as 90s, 15m, 72h or 30d")
  .transform((raw) => {
    const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/.exec(raw)!;
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] ?? "s"]!;
    return Math.round(Number(m[1]) * unit);
  })
  .refine((ms) => ms > 0, "must be longer than zero");

const int = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const url = z
  .string()
  .trim()
  .url("must be an absolute URL such as https://parley.example")
  .transform((u) => u.replace(/\/+$/, ""));

/** Comma-separated host[:port] list, lower-cased, the default ports dropped (a Host header omits them). */
const hostList = z
  .string()
  .transform((raw) => raw.split(",").map((h) => h.trim().toLowerCase()).filter(Boolean))
  .refine((hosts) => hosts.every(validHostPort), "must be a comma-separated list of host[:port] such as parley.example,10.0.0.5:3000")
  .transform((hosts) => hosts.map((h) => h.replace(/:(80|443)$/, "")));

const schema = z.object({
  PORT: int(0, 65535).default(3000),
  HOST: z.string().trim().min(1).default("0.0.0.0"),
  PARLEY_DATA_DIR: z.string().trim().min(1).default("./data"),
  PARLEY_PUBLIC_URL: url.optional(),
  PARLEY_ALLOWED_HOSTS: hostList.default([]),
  PARLEY_DATABASE_URL: z
    .string()
    .trim()
    .regex(/^postgres(ql)?:\/\/\S+$/, "must be a PostgreSQL URL such as postgres://user:password@host:5432/parley")
    .optional(),
  PARLEY_DB_POOL_SIZE: int(1, 1000).default(10),
  PARLEY_KEY_FILE: z.string().trim().min(1).optional(),
  PARLEY_KEY: z.string().trim().regex(/^[0-9a-fA-F]{64}$/, "must be the server key's 32-byte Ed25519 seed as 64 hex digits").optional(),
  PARLEY_KEY_NAME: z.string().trim().regex(/^[^\s+]+$/, "must be one word without '+'").optional(),
  PARLEY_ADMIN_TOKEN: z.string().min(16, "must be at least 16 characters").optional(),
  PARLEY_ROOM_MESSAGE_CAP: int(1, 1_000_000).default(1000),
  PARLEY_ROOM_IDLE_TTL: duration.default(72 * 3_600_000),
  PARLEY_ROOM_MAX_TTL: duration.default(30 * 86_400_000),
  PARLEY_TRUST_PROXY: int(0, 10).default(0),
  PARLEY_RATE_ROOMS_PER_HOUR: int(0, 1_000_000).default(30),
  PARLEY_RATE_POSTS_PER_MINUTE: int(0, 1_000_000).default(120),
  PARLEY_RATE_AGENT_POSTS_PER_MINUTE: int(0, 1_000_000).default(30),
  PARLEY_RATE_REQUESTS_PER_MINUTE: int(0, 1_000_000).default(600),
  PARLEY_RATE_WEBHOOKS_PER_HOUR: int(0, 1_000_000).default(20),
  PARLEY_RATE_REPORTS_PER_HOUR: int(0, 1_000_000).default(10),
  // Operators (README "Operators"): the loop guard of open rooms, the admin console's session, reports.
  PARLEY_LOOP_GUARD_STREAK: int(0, 100_000).default(20),
  PARLEY_LOOP_GUARD_PAUSE: duration.default(60_000),
  PARLEY_LOOP_GUARD_PAIR: int(0, 100_000).default(60),
  PARLEY_LOOP_GUARD_WINDOW: duration.default(10 * 60_000),
  PARLEY_ADMIN_SESSION_TTL: duration.default(12 * 3_600_000),
  PARLEY_ADMIN_WEBHOOK_URL: url.optional(),
  // Webhooks (README "Webhooks"): the worker's pace, the retry schedule, when a webhook is disabled.
  PARLEY_WEBHOOK_ALLOW_PRIVATE: z.enum(["0", "1"], { error: "must be 0 or 1" }).default("0"),
  PARLEY_WEBHOOK_INTERVAL: duration.default(1_000),
  PARLEY_WEBHOOK_RETRY_BASE: duration.default(30_000),
  PARLEY_WEBHOOK_MAX_ATTEMPTS: int(1, 20).default(8),
  PARLEY_WEBHOOK_DISABLE_AFTER: int(1, 1_000).default(5),
  PARLEY_WEBHOOK_EXPIRY_NOTICE: duration.default(3_600_000),
  // Slow and greedy clients (README "Configuration"): 0 turns a cap off.
  PARLEY_REQUEST_READ_TIMEOUT: duration.default(30_000),
  PARLEY_STALLED_STREAM_TIMEOUT: duration.default(30_000),
  PARLEY_MAX_STREAMS_PER_CLIENT: int(0, 1_000_000).default(64),
  PARLEY_MAX_CONCURRENT_EXPORTS: int(0, 1_000).default(4),
  PARLEY_SWEEP_INTERVAL: duration.default(60_000),
  PARLEY_TURN_SWEEP_INTERVAL: duration.default(1_000),
  PARLEY_AGREE_QUORUM: int(1, 50).default(AGREE_QUORUM_DEFAULT),
  PARLEY_AGENT_HEARTBEAT_S: int(1, 86_400).default(60),
  PARLEY_ARBITER_BASE_URL: url.optional(),
  PARLEY_ARBITER_API_KEY: z.string().min(1).optional(),
  PARLEY_ARBITER_MODEL: z.string().min(1).optional(),
  NVIDIA_API_KEY: z.string().min(1).optional(),
  DEEPSEEK_API_KEY: z.string().min(1).optional(),
  // Arbiter tuning (SPEC 5.3); README "Arbiter" explains each.
  PARLEY_ARBITER_FALLBACKS: z.string().trim().regex(/^[a-z]+(\s*,\s*[a-z]+)*$/, "must be a comma-separated list such as custom,nvidia,deepseek").optional(),
  PARLEY_ARBITER_TIMEOUT: duration.default(60_000),
  PARLEY_ARBITER_RETRIES: int(0, 10).default(2),
  PARLEY_ARBITER_BACKOFF: duration.default(1_000),
  PARLEY_ARBITER_COALESCE: duration.default(1_500),
  PARLEY_ARBITER_TOKEN_BUDGET: int(1_000, 1_000_000).default(8_000),
  PARLEY_ARBITER_BATCH_MESSAGES: int(1, 200).default(25),
});

/** One OpenAI-compatible endpoint the arbiter may call. */
export interface ArbiterProvider {
  name: "custom" | "nvidia" | "deepseek";
  baseUrl: string;
  apiKey: string;
  model: string;
}

export interface ArbiterConfig {
  /** Tried in this order: the first is the primary, the others are fallbacks. Empty: no arbiter. */
  providers: ArbiterProvider[];
  timeoutMs: number;
  /** Extra attempts per batch after the first (with exponential backoff from `backoffMs`). */
  retries: number;
  backoffMs: number;
  /** Premium rooms: messages arriving within this window go into one call. */
  coalesceMs: number;
  /** Estimated prompt tokens per call (chars / 4). */
  tokenBudget: number;
  /** New messages per call at most. */
  batchMessages: number;
}

export const NVIDIA_BASE_URL = "https://integrate.api.nvidia.com/v1";
export const NVIDIA_DEFAULT_MODEL = "meta/llama-3.3-70b-instruct";
export const DEEPSEEK_BASE_URL = "https://api.deepseek.com";
export const DEEPSEEK_DEFAULT_MODEL = "deepseek-chat";

function arbiterProviders(e: z.infer<typeof schema>): ArbiterProvider[] {
  if (e.PARLEY_ARBITER_BASE_URL && !e.PARLEY_ARBITER_MODEL) {
    throw new ConfigError("Invalid configuration: PARLEY_ARBITER_MODEL is required when PARLEY_ARBITER_BASE_URL is set.");
  }
  if (!e.PARLEY_ARBITER_BASE_URL && (e.PARLEY_ARBITER_MODEL || e.PARLEY_ARBITER_API_KEY)) {
    throw new ConfigError("Invalid configuration: PARLEY_ARBITER_BASE_URL is required when PARLEY_ARBITER_MODEL or PARLEY_ARBITER_API_KEY is set.");
  }
  const available: Partial<Record<ArbiterProvider["name"], ArbiterProvider>> = {};
  if (e.PARLEY_ARBITER_BASE_URL && e.PARLEY_ARBITER_MODEL) {
    // Local endpoints often need no key; the client library insists on one.
    available.custom = { name: "custom", baseUrl: e.PARLEY_ARBITER_BASE_URL, apiKey: e.PARLEY_ARBITER_API_KEY ?? "none", model: e.PARLEY_ARBITER_MODEL };
  }
  if (e.NVIDIA_API_KEY) available.nvidia = { name: "nvidia", baseUrl: NVIDIA_BASE_URL, apiKey: e.NVIDIA_API_KEY, model: NVIDIA_DEFAULT_MODEL };
  if (e.DEEPSEEK_API_KEY) available.deepseek = { name: "deepseek", baseUrl: DEEPSEEK_BASE_URL, apiKey: e.DEEPSEEK_API_KEY, model: DEEPSEEK_DEFAULT_MODEL };
  if (!e.PARLEY_ARBITER_FALLBACKS) return Object.values(available);
  const names = e.PARLEY_ARBITER_FALLBACKS.split(",").map((n) => n.trim());
  return [...new Set(names)].map((name) => {
    if (!["custom", "nvidia", "deepseek"].includes(name)) {
      throw new ConfigError(`Invalid configuration: PARLEY_ARBITER_FALLBACKS names "${name}"; use custom, nvidia or deepseek.`);
    }
    const provider = available[name as ArbiterProvider["name"]];
    if (!provider) {
      const needs = { custom: "PARLEY_ARBITER_BASE_URL and PARLEY_ARBITER_MODEL", nvidia: "NVIDIA_API_KEY", deepseek: "DEEPSEEK_API_KEY" }[name as ArbiterProvider["name"]];
      throw new ConfigError(`Invalid configuration: PARLEY_ARBITER_FALLBACKS names "${name}", which needs ${needs}.`);
    }
    return provider;
  });
}

export interface WebhookConfig {
  /** Deliveries may go to loopback and private addresses (tests, local development). */
  allowPrivate: boolean;
  /** How often the worker looks for due deliveries. */
  intervalMs: number;
  /** The first retry's delay; each further one doubles it (with jitter). */
  retryBaseMs: number;
  /** Attempts of a delivery before it is dead. */
  maxAttempts: number;
  /** Dead deliveries in a row that disable a webhook. */
  disableAfter: number;
  /** Alerts webhooks hear of a room's expiry this long before it. */
  expiryNoticeMs: number;
}

export type Config = {
  port: number;
  host: string;
  dataDir: string;
  /** PostgreSQL for several instances; unset: SQLite under dataDir. */
  databaseUrl?: string;
  /** Connections per instance to PostgreSQL. */
  dbPoolSize: number;
  publicUrl?: string;
  /** Without publicUrl: request Hosts (besides loopback) whose origin may be printed (lib/config/origin.ts). */
  allowedHosts: string[];
  keyFile: string;
  /** The server key given in the environment (PARLEY_KEY), instead of the key file. */
  keySeedHex?: string;
  keyName: string;
  adminToken?: string;
  /** How long an admin console session lasts. */
  adminSessionTtlMs: number;
  /** Abuse reports are also POSTed here (one attempt). */
  adminWebhookUrl?: string;
  /** The loop guard of open rooms (lib/domain/loop-guard.ts). */
  loopGuard: LoopGuardLimits;
  roomMessageCap: number;
  roomIdleTtlMs: number;
  roomMaxTtlMs: number;
  trustProxy: number;
  rate: { roomsPerHour: number; postsPerMinute: number; agentPostsPerMinute: number; requestsPerMinute: number; webhooksPerHour: number; reportsPerHour: number };
  webhooks: WebhookConfig;
  /** A request whose headers and body are not all in after this long is closed (408). */
  requestReadTimeoutMs: number;
  /** A streamed response (SSE, export) whose client reads nothing for this long is dropped. */
  stalledStreamTimeoutMs: number;
  /** SSE streams and long-polls one client address may hold at once (0: no cap). */
  maxStreamsPerClient: number;
  /** Whole-room exports and verifications running at once, over all clients (0: no cap). */
  maxConcurrentExports: number;
  sweepIntervalMs: number;
  /** How often turns past their deadline are skipped. */
  turnSweepIntervalMs: number;
  agreeQuorum: number;
  /** Task board: an agent silent for 3 of these intervals (seconds) is lost. */
  agentHeartbeatS: number;
  arbiterConfigured: boolean;
  arbiter: ArbiterConfig;
};

export class ConfigError extends Error {}

/** Parses the environment once; a missing or malformed value stops start-up with a sentence naming it. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Empty strings mean "unset", as in most .env files.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".")} ${i.message}`);
    throw new ConfigError(`Invalid configuration: ${issues.join("; ")}.`);
  }
  const e = parsed.data;
  if (e.PARLEY_ROOM_MAX_TTL < e.PARLEY_ROOM_IDLE_TTL) {
    throw new ConfigError("Invalid configuration: PARLEY_ROOM_MAX_TTL must not be shorter than PARLEY_ROOM_IDLE_TTL.");
  }
  const dataDir = path.resolve(e.PARLEY_DATA_DIR);
  const providers = arbiterProviders(e);
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir,
    databaseUrl: e.PARLEY_DATABASE_URL,
    dbPoolSize: e.PARLEY_DB_POOL_SIZE,
    publicUrl: e.PARLEY_PUBLIC_URL,
    allowedHosts: e.PARLEY_ALLOWED_HOSTS,
    keyFile: path.resolve(e.PARLEY_KEY_FILE ?? path.join(dataDir, "server.key")),
    keySeedHex: e.PARLEY_KEY,
    keyName: e.PARLEY_KEY_NAME ?? (e.PARLEY_PUBLIC_URL ? new URL(e.PARLEY_PUBLIC_URL).host : "localhost"),
    adminToken: e.PARLEY_ADMIN_TOKEN,
    adminSessionTtlMs: e.PARLEY_ADMIN_SESSION_TTL,
    adminWebhookUrl: e.PARLEY_ADMIN_WEBHOOK_URL,
    loopGuard: {
      streak: e.PARLEY_LOOP_GUARD_STREAK,
      pauseMs: e.PARLEY_LOOP_GUARD_PAUSE,
      pair: e.PARLEY_LOOP_GUARD_PAIR,
      windowMs: e.PARLEY_LOOP_GUARD_WINDOW,
    },
    roomMessageCap: e.PARLEY_ROOM_MESSAGE_CAP,
    roomIdleTtlMs: e.PARLEY_ROOM_IDLE_TTL,
    roomMaxTtlMs: e.PARLEY_ROOM_MAX_TTL,
    trustProxy: e.PARLEY_TRUST_PROXY,
    rate: {
      roomsPerHour: e.PARLEY_RATE_ROOMS_PER_HOUR,
      postsPerMinute: e.PARLEY_RATE_POSTS_PER_MINUTE,
      agentPostsPerMinute: e.PARLEY_RATE_AGENT_POSTS_PER_MINUTE,
      requestsPerMinute: e.PARLEY_RATE_REQUESTS_PER_MINUTE,
      webhooksPerHour: e.PARLEY_RATE_WEBHOOKS_PER_HOUR,
      reportsPerHour: e.PARLEY_RATE_REPORTS_PER_HOUR,
    },
    webhooks: {
      allowPrivate: e.PARLEY_WEBHOOK_ALLOW_PRIVATE === "1",
      intervalMs: e.PARLEY_WEBHOOK_INTERVAL,
      retryBaseMs: e.PARLEY_WEBHOOK_RETRY_BASE,
      maxAttempts: e.PARLEY_WEBHOOK_MAX_ATTEMPTS,
      disableAfter: e.PARLEY_WEBHOOK_DISABLE_AFTER,
      expiryNoticeMs: e.PARLEY_WEBHOOK_EXPIRY_NOTICE,
    },
    requestReadTimeoutMs: e.PARLEY_REQUEST_READ_TIMEOUT,
    stalledStreamTimeoutMs: e.PARLEY_STALLED_STREAM_TIMEOUT,
    maxStreamsPerClient: e.PARLEY_MAX_STREAMS_PER_CLIENT,
    maxConcurrentExports: e.PARLEY_MAX_CONCURRENT_EXPORTS,
    sweepIntervalMs: e.PARLEY_SWEEP_INTERVAL,
    turnSweepIntervalMs: e.PARLEY_TURN_SWEEP_INTERVAL,
    agreeQuorum: e.PARLEY_AGREE_QUORUM,
    agentHeartbeatS: e.PARLEY_AGENT_HEARTBEAT_S,
    arbiterConfigured: providers.length > 0,
    arbiter: {
      providers,
      timeoutMs: e.PARLEY_ARBITER_TIMEOUT,
      retries: e.PARLEY_ARBITER_RETRIES,
      backoffMs: e.PARLEY_ARBITER_BACKOFF,
      coalesceMs: e.PARLEY_ARBITER_COALESCE,
      tokenBudget: e.PARLEY_ARBITER_TOKEN_BUDGET,
      batchMessages: e.PARLEY_ARBITER_BATCH_MESSAGES,
    },
  };
}

/** Host used in checkpoint origins: the public URL's host, else "localhost" (SPEC 2). */
export function checkpointHost(config: Config): string {
  return config.publicUrl ? new URL(config.publicUrl).host : "localhost";
}
