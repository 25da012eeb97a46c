import { isIP } from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { parseAllowedOrigins } from '../domain/web-push.js';
import { REPORT_MAX_AGE_DAYS } from '../domain/activity.js';
import { decodeSecretsKey } from '../domain/secrets.js';

/** A key-encryption key given in the environment: 32 random bytes in base64 (`openssl rand -base64 32`). */
const secretsKey = z.string().refine((v) => decodeSecretsKey(v) !== undefined, 'must be 32 bytes in base64 (openssl rand -base64 32)');

/** Every setting the server reads, parsed once at start-up. A bad value stops start-up naming the variable. */
const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z.string().url().optional(),
  // A session connection (not through a transaction-mode pooler) for LISTEN and the PostgreSQL queue backend.
  DATABASE_LISTEN_URL: z.string().url().optional(),
  // A streaming replica for the reads that need not see the caller's own writes (counts, lists, statistics).
  DATABASE_READ_URL: z.string().url().optional(),
  // Replay lag past which the replica is bypassed (its reads go to the primary) until it catches up.
  READ_MAX_LAG_SECONDS: z.coerce.number().min(0).default(10),
  // The key that seals the apps' credentials and secrets in the database (docs/secrets.md), or a file holding it;
  // neither: the embedded default keeps one in DATA_DIR/secrets.key, a server on DATABASE_URL refuses to start.
  SECRETS_KEY: secretsKey.optional(),
  SECRETS_KEY_FILE: z.string().min(1).optional(),
  // The key before the last rotation: it still opens what it sealed, while servers started before it run.
  SECRETS_KEY_PREVIOUS: secretsKey.optional(),
  EMBEDDED_PG_PORT: z.coerce.number().int().min(1).max(65535).default(54329),
  // Uses of a statement before each connection prepares it; 0 for a pooler that cannot keep prepared statements.
  DATABASE_PREPARE_THRESHOLD: z.coerce.number().int().min(0).default(5),
  REDIS_URL: z.string().url().optional(),
  // REDIS_URL names one node of a Redis Cluster; the client finds the others.
  REDIS_CLUSTER: z.stringbool().default(false),
  // On a Redis Cluster a queue's keys must share a slot: a prefix in braces ({pushd}) is a hash tag that does that.
  QUEUE_PREFIX: z
    .string()
    .regex(/^([A-Za-z0-9_-]{1,64}|\{[A-Za-z0-9_-]{1,62}\})$/, 'must be 1-64 letters, digits, _ or -, or such a name in braces')
    .optional(),
  // Queues per job kind, each under a hash tag of its own ({pushd:0}, {pushd:1}, …): on a Redis Cluster they spread
  // over the masters, and one notification's jobs (all in one) hold back only the sends that hash with it.
  QUEUE_PARTITIONS: z.coerce.number().int().min(1).max(64).default(1),
  ROLE: z.enum(['all', 'api', 'worker']).default('all'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Which X-Forwarded-For hops to believe: none by default (the client address is the socket's); a hop count,
  // or the addresses/CIDRs of the proxies in front of the API.
  TRUST_PROXY: z
    .string()
    .transform((v, ctx) => parseTrustProxy(v, ctx))
    .optional(),
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
  // API requests in progress in one process past which another is answered 503 (src/http/overload.ts); 0: no limit.
  MAX_REQUESTS_IN_FLIGHT: z.coerce.number().int().min(0).default(1000),
  // Token buckets per API key (README, Rate limits): a sustained rate per second and a burst; 0 per second means no limit.
  // read and write keys are backends; an sdk key ships in every copy of the app, so its bucket is per key and client address.
  // Read and write keys belong to backends, which send one notification a request: the limit stops a runaway
  // client, not traffic the server is built for.
  RATE_LIMIT_PER_SECOND: z.coerce.number().min(0).default(5000),
  RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(10000),
  RATE_LIMIT_SDK_PER_SECOND: z.coerce.number().min(0).default(10),
  RATE_LIMIT_SDK_BURST: z.coerce.number().int().min(1).default(200),
  APNS_ORIGIN_PRODUCTION: z.string().url().default('https://api.push.apple.com'),
  APNS_ORIGIN_SANDBOX: z.string().url().default('https://api.sandbox.push.apple.com'),
  // Live Activity broadcast channels (iOS 18): Apple's channel management hosts, and where broadcast pushes go.
  APNS_CHANNELS_ORIGIN_PRODUCTION: z.string().url().default('https://api-manage-broadcast.push.apple.com:2196'),
  APNS_CHANNELS_ORIGIN_SANDBOX: z.string().url().default('https://api-manage-broadcast.sandbox.push.apple.com:2195'),
  APNS_BROADCAST_ORIGIN_PRODUCTION: z.string().url().default('https://api.push.apple.com'),
  APNS_BROADCAST_ORIGIN_SANDBOX: z.string().url().default('https://api.sandbox.push.apple.com'),
  FCM_ORIGIN: z.string().url().default('https://fcm.googleapis.com'),
  GOOGLE_TOKEN_URL: z.string().url().default('https://oauth2.googleapis.com/token'),
  // Huawei Push Kit: where messages go, and where the OAuth access tokens (client credentials) come from.
  HMS_ORIGIN: z.string().url().default('https://push-api.cloud.huawei.com'),
  HMS_TOKEN_URL: z.string().url().default('https://oauth-login.cloud.huawei.com/oauth2/v3/token'),
  // https origins a web push subscription may point to beside the browsers' push services (a comma list).
  WEB_PUSH_ALLOWED_ORIGINS: z
    .string()
    .transform((v, ctx) => {
      try {
        return parseAllowedOrigins(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    })
    .default([]),
  GEOIP_DB_PATH: z.string().optional(),
  DELIVERY_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
  DELIVERY_BATCH_SIZE: z.coerce.number().int().min(1).max(10000).default(2000),
  // Devices read per fan-out page (one query, one checkpoint); each page is cut into batches of DELIVERY_BATCH_SIZE.
  FANOUT_PAGE_SIZE: z.coerce.number().int().min(1).max(50000).default(10000),
  // Devices per range of a broadcast split for its fan-out: one larger than this is cut into ranges of about so
  // many devices (at most 1,000), which any worker fans out at once; a smaller one stays one job.
  FANOUT_RANGE_DEVICES: z.coerce.number().int().min(1).max(10_000_000).default(100_000),
  // Streams in flight per gateway at most, across its connections: a memory bound. Within it each connection
  // carries what its gateway announces (APNs 1,000), and another opens, up to GATEWAY_MAX_CONNECTIONS, when they are full.
  GATEWAY_MAX_IN_FLIGHT: z.coerce.number().int().min(1).max(20000).default(2000),
  GATEWAY_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(64).default(4),
  // Worker threads that run the gateways (HTTP/2 to APNs and FCM); 0 runs them on the worker's main thread.
  // 0 suits a small host whose other cores run PostgreSQL and Redis; threads pay off where cores are spare.
  GATEWAY_THREADS: z.coerce.number().int().min(0).max(16).default(0),
  DELIVERY_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(8),
  RETRY_BASE_MS: z.coerce.number().int().min(1).default(1000),
  RETRY_MAX_MS: z.coerce.number().int().min(1).default(300_000),
  // How long a job stays locked to a worker without renewal; a killed worker's job is taken over after this.
  JOB_LOCK_MS: z.coerce.number().int().min(1000).default(30_000),
  SWEEP_AFTER_SECONDS: z.coerce.number().int().min(1).default(30),
  // How long POST /v6/transactional/notifications waits for the gateways (retries included) before it answers.
  // how often workers look for scheduled notifications (and local-time waves) that have come due
  SCHEDULE_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(1000),
  // how often workers look for journey entrants whose step has come due, and how many one transaction moves (and
  // sends one notification to, per step)
  JOURNEY_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(1000),
  JOURNEY_BATCH_SIZE: z.coerce.number().int().min(1).max(100_000).default(1000),
  TRANSACTIONAL_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5000),
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(25000),
  // An event a device sends this long after receiving a push counts as a conversion of that push.
  CONVERSION_WINDOW_HOURS: z.coerce.number().int().min(1).max(720).default(24),
  // How long an in-app message is kept from when it is published (3 months, as the public API keeps them); then
  // it leaves every stream and the workers' sweep deletes it.
  MESSAGE_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(90),
  // Days a push receipt is kept (its day partition is then dropped): at least the conversion window plus the
  // REPORT_MAX_AGE_DAYS an event may be reported late; unset, exactly that (8 days with the default window).
  RETENTION_RECEIPTS_DAYS: z.coerce.number().int().min(1).max(3650).optional(),
  // Whole days before today whose active devices are kept: a report may be dated REPORT_MAX_AGE_DAYS back, and a
  // day dropped while reports may still name it would count its devices active twice.
  RETENTION_ACTIVE_DEVICES_DAYS: z.coerce
    .number()
    .int()
    .min(REPORT_MAX_AGE_DAYS + 1)
    .max(3650)
    .default(REPORT_MAX_AGE_DAYS + 1),
  // Days push opens and event conversions are kept (by when they happened): what a notification's engagement
  // statistics show. At least one more than a report may be dated back, which a resent open is deduplicated over.
  RETENTION_ACTIVITY_DAYS: z.coerce
    .number()
    .int()
    .min(REPORT_MAX_AGE_DAYS + 1)
    .max(3650)
    .default(90),
  // Days a notification is kept, with its delivery batches, from when it was made, or its last send when it was
  // re-sent (a collapse_key or a transactional key) or is still sending: as long as its opens and conversions are
  // kept by default, whose statistics are read through it.
  RETENTION_NOTIFICATIONS_DAYS: z.coerce
    .number()
    .int()
    .min(REPORT_MAX_AGE_DAYS + 1)
    .max(3650)
    .default(90),
  // Days app sessions are kept (by when they started): only to count a resent report once, as the daily
  // statistics are counted when a session is stored.
  RETENTION_SESSIONS_DAYS: z.coerce
    .number()
    .int()
    .min(REPORT_MAX_AGE_DAYS + 1)
    .max(3650)
    .default(REPORT_MAX_AGE_DAYS + 1),
  // Days a journey entrant is kept from when it entered (its day partition is then dropped, whether or not it left):
  // beyond the 90 days one delay may last, so only a journey of several long waits outlives it.
  RETENTION_JOURNEY_ENTRANTS_DAYS: z.coerce.number().int().min(1).max(3650).default(180),
});

export type Config = z.infer<typeof envSchema> & { QUEUE_PREFIX: string; dataDir: string; RETENTION_RECEIPTS_DAYS: number };

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings mean "unset": docker-compose and shells often pass VAR= for optional settings.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid configuration: ${problems}`);
  }
  const { REDIS_URL, REDIS_CLUSTER, QUEUE_PREFIX } = parsed.data;
  if (parsed.data.SECRETS_KEY && parsed.data.SECRETS_KEY_FILE)
    throw new ConfigError('invalid configuration: SECRETS_KEY_FILE: give the key as SECRETS_KEY or as SECRETS_KEY_FILE, not both');
  if (REDIS_CLUSTER && !REDIS_URL) throw new ConfigError('invalid configuration: REDIS_CLUSTER: needs REDIS_URL, one node of the cluster');
  if (REDIS_CLUSTER && QUEUE_PREFIX && !QUEUE_PREFIX.startsWith('{'))
    throw new ConfigError(
      `invalid configuration: QUEUE_PREFIX: on a Redis Cluster it must be in braces ({${QUEUE_PREFIX}}), ` +
        "a hash tag that keeps each queue's keys in one slot",
    );
  const receiptsNeed = Math.ceil(parsed.data.CONVERSION_WINDOW_HOURS / 24) + REPORT_MAX_AGE_DAYS;
  const { RETENTION_RECEIPTS_DAYS = receiptsNeed } = parsed.data;
  if (RETENTION_RECEIPTS_DAYS < receiptsNeed)
    throw new ConfigError(
      `invalid configuration: RETENTION_RECEIPTS_DAYS: must be at least ${receiptsNeed} ` +
        `(CONVERSION_WINDOW_HOURS plus the ${REPORT_MAX_AGE_DAYS} days an event may be reported late)`,
    );
  return {
    ...parsed.data,
    RETENTION_RECEIPTS_DAYS,
    QUEUE_PREFIX: QUEUE_PREFIX ?? (REDIS_CLUSTER ? '{pushd}' : 'pushd'),
    dataDir: path.resolve(parsed.data.DATA_DIR),
  };
}

/** The config as it may be logged: passwords inside URLs and the secrets keys are masked. */
export function redactedConfig(config: Config): Record<string, unknown> {
  const mask = (url?: string) => {
    if (!url) return url;
    try {
      const u = new URL(url);
      if (u.password) u.password = '***';
      return u.toString();
    } catch {
      return '[unparseable url]';
    }
  };
  return {
    ...config,
    DATABASE_URL: mask(config.DATABASE_URL),
    DATABASE_LISTEN_URL: mask(config.DATABASE_LISTEN_URL),
    DATABASE_READ_URL: mask(config.DATABASE_READ_URL),
    REDIS_URL: mask(config.REDIS_URL),
    SECRETS_KEY: config.SECRETS_KEY && '***',
    SECRETS_KEY_PREVIOUS: config.SECRETS_KEY_PREVIOUS && '***',
  };
}

/** TRUST_PROXY: a hop count (Fastify trusts that many proxies) or a comma-separated list of addresses/CIDRs. */
function parseTrustProxy(value: string, ctx: z.RefinementCtx): number | string[] {
  if (/^\d+$/.test(value)) return Number(value);
  const entries = value.split(',').map((e) => e.trim());
  for (const entry of entries) {
    const [address, bits, ...rest] = entry.split('/');
    const version = isIP(address ?? '');
    const maxBits = version === 6 ? 128 : 32;
    if (!version || rest.length || (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= maxBits))) {
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(entry)} is not a hop count, an IP address or a CIDR` });
      return z.NEVER;
    }
  }
  return entries;
}
