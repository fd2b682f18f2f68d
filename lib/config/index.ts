import path from "node:path";
import { z } from "zod";

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

const schema = z.object({
  PORT: int(0, 65535).default(3000),
  HOST: z.string().trim().min(1).default("0.0.0.0"),
  PARLEY_DATA_DIR: z.string().trim().min(1).default("./data"),
  PARLEY_PUBLIC_URL: url.optional(),
  PARLEY_KEY_FILE: z.string().trim().min(1).optional(),
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
  PARLEY_SWEEP_INTERVAL: duration.default(60_000),
  PARLEY_AGREE_QUORUM: int(1, 50).default(2),
  PARLEY_ARBITER_BASE_URL: url.optional(),
  PARLEY_ARBITER_API_KEY: z.string().min(1).optional(),
  PARLEY_ARBITER_MODEL: z.string().min(1).optional(),
  NVIDIA_API_KEY: z.string().min(1).optional(),
  DEEPSEEK_API_KEY: z.string().min(1).optional(),
});

export type Config = {
  port: number;
  host: string;
  dataDir: string;
  publicUrl?: string;
  keyFile: string;
  keyName: string;
  adminToken?: string;
  roomMessageCap: number;
  roomIdleTtlMs: number;
  roomMaxTtlMs: number;
  trustProxy: number;
  rate: { roomsPerHour: number; postsPerMinute: number; agentPostsPerMinute: number; requestsPerMinute: number };
  sweepIntervalMs: number;
  agreeQuorum: number;
  arbiterConfigured: boolean;
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
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir,
    publicUrl: e.PARLEY_PUBLIC_URL,
    keyFile: path.resolve(e.PARLEY_KEY_FILE ?? path.join(dataDir, "server.key")),
    keyName: e.PARLEY_KEY_NAME ?? (e.PARLEY_PUBLIC_URL ? new URL(e.PARLEY_PUBLIC_URL).host : "localhost"),
    adminToken: e.PARLEY_ADMIN_TOKEN,
    roomMessageCap: e.PARLEY_ROOM_MESSAGE_CAP,
    roomIdleTtlMs: e.PARLEY_ROOM_IDLE_TTL,
    roomMaxTtlMs: e.PARLEY_ROOM_MAX_TTL,
    trustProxy: e.PARLEY_TRUST_PROXY,
    rate: {
      roomsPerHour: e.PARLEY_RATE_ROOMS_PER_HOUR,
      postsPerMinute: e.PARLEY_RATE_POSTS_PER_MINUTE,
      agentPostsPerMinute: e.PARLEY_RATE_AGENT_POSTS_PER_MINUTE,
      requestsPerMinute: e.PARLEY_RATE_REQUESTS_PER_MINUTE,
    },
    sweepIntervalMs: e.PARLEY_SWEEP_INTERVAL,
    agreeQuorum: e.PARLEY_AGREE_QUORUM,
    arbiterConfigured: Boolean(
      (e.PARLEY_ARBITER_BASE_URL && e.PARLEY_ARBITER_MODEL) || e.NVIDIA_API_KEY || e.DEEPSEEK_API_KEY,
    ),
  };
}

/** Host used in checkpoint origins: the public URL's host, else "localhost" (SPEC 2). */
export function checkpointHost(config: Config): string {
  return config.publicUrl ? new URL(config.publicUrl).host : "localhost";
}
