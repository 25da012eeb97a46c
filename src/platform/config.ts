import { isIP } from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { parseAllowedOrigins } from '../domain/web-push.js';
import { REPORT_MAX_AGE_DAYS } from '../domain/activity.js';
import { decodeSecretsKey } from '../domain/secrets.js';
import { deliverySettings } from './config-delivery.js';
import { retentionSettings } from './config-retention.js';
import { HELD_FLOOR, IN_PROGRESS_CAP, SHARE_WINDOW_MS } from './cpu-share.js';

/** A key-encryption key given in the environment: 32 random bytes in base64 (`openssl rand -base64 32`). */
const secretsKey = z.string().refine((v) => decodeSecretsKey(v) !== undefined, 'must be 32 bytes in base64 (openssl rand -base64 32)');

/**
 * Every setting the server reads, parsed once at start-up. A bad value stops start-up naming the variable. Each entry
 * carries its description (and, where the default is worked out at start-up, `defaultText`): docs/configuration.md is
 * generated from them (scripts/gen-config-docs.ts).
 */
/** A comma list of https origins, each checked: a bad one stops start-up naming it. */
const allowedOrigins = () =>
  z
    .string()
    .transform((v, ctx) => {
      try {
        return parseAllowedOrigins(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    })
    .default([]);

export const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000).describe('HTTP port.'),
  HOST: z.string().min(1).default('0.0.0.0').describe('HTTP bind address.'),
  DATA_DIR: z.string().min(1).default('./data').describe('Where the embedded PostgreSQL keeps its cluster (only without `DATABASE_URL`).'),
  DATABASE_URL: z
    .string()
    .url()
    .optional()
    .describe(
      'PostgreSQL URL (`postgres://user:password@host:5432/db`, password URL-encoded). Unset: embedded PostgreSQL ' +
        'under `DATA_DIR`. Each process holds a pool of `DATABASE_POOL_SIZE` connections and one that LISTENs for changes to keys and ' +
        "apps (through a pooler, that one needs session mode: `DATABASE_LISTEN_URL`). Keep autovacuum on (PostgreSQL's " +
        'default): the queries plan on its statistics, and a `devices` table that has grown without them (never ' +
        'analyzed) is read in thousands of rows to find one device.',
    ),
  DATABASE_LISTEN_URL: z
    .string()
    .url()
    .optional()
    .meta({
      description:
        'A session connection to the same database, for what a pooler in transaction mode cannot carry: the connection ' +
        'that LISTENs for changes to keys and apps, and the PostgreSQL queue backend (no `REDIS_URL`). Set it when ' +
        '`DATABASE_URL` goes through PgBouncer ([PgBouncer](deploying.md#at-scale-pgbouncer-and-read-replicas)).',
      defaultText: '`DATABASE_URL`',
    }),
  DATABASE_POOL_SIZE: z.coerce
    .number()
    .int()
    .min(2)
    .max(500)
    .default(10)
    .describe(
      'Connections a process opens to `DATABASE_URL` at most, as its load asks (2–500: with one, every request ' +
        'would queue behind the background work of the process). A request that commits on its own (a new device) ' +
        'waits for its WAL flush on its connection, so where flushes are slow (a synchronous standby, a disk slow ' +
        'to flush) such requests go no faster than this many a flush: raise it there ' +
        '([performance](performance.md)), within `max_connections` for every process. Through PgBouncer it counts ' +
        "against `max_client_conn`, and the pooler's `default_pool_size` is the bound to raise.",
    ),
  DATABASE_READ_URL: z
    .string()
    .url()
    .optional()
    .meta({
      description:
        "A streaming replica of the database, for the reads that need not see the caller's own writes: audience counts " +
        'and device pages, statistics, the notification and message lists. API processes hold another pool of ' +
        '`DATABASE_POOL_SIZE` connections to it.',
      defaultText: '— (the primary)',
    }),
  READ_MAX_LAG_SECONDS: z.coerce
    .number()
    .min(0)
    .default(10)
    .describe(
      'Replay lag past which the replica is bypassed (its reads go to the primary) until it catches up; the lag is read every second.',
    ),
  SECRETS_KEY: secretsKey.optional().meta({
    description:
      "The key that seals the apps' credentials and secrets in the database: 32 random bytes in base64 " +
      '(`openssl rand -base64 32`); see [secrets at rest](secrets.md).',
    defaultText: '— (the embedded default keeps one in `DATA_DIR/secrets.key`; a server on `DATABASE_URL` refuses to start)',
  }),
  SECRETS_KEY_FILE: z
    .string()
    .min(1)
    .optional()
    .describe('A file holding `SECRETS_KEY` (not both); read again when a stored value names a key it does not know.'),
  SECRETS_KEY_PREVIOUS: secretsKey
    .optional()
    .describe('The key before the last rotation: it still opens what it sealed while servers started before the rotation run.'),
  EMBEDDED_PG_PORT: z.coerce
    .number()
    .int()
    .min(1)
    .max(65535)
    .default(54329)
    .describe(
      'Port of the embedded PostgreSQL (127.0.0.1) when this process starts it; one already running on `DATA_DIR` is ' +
        'used on its own port.',
    ),
  DATABASE_PREPARE_THRESHOLD: z.coerce
    .number()
    .int()
    .min(0)
    .default(5)
    .describe(
      'A statement run this many times is prepared on each connection: PostgreSQL parses it once, and plans it once ' +
        "where a plan for any values is as good (statements holding an audience's filters are planned for their values " +
        'every run). Such a connection forgets its plans (`DISCARD PLANS`) after as long as the process had run when it ' +
        'made them, 5 s to 10 min, so plans made while the tables were new are made again; the connection is kept (a ' +
        'new one would read the catalogs again). `0` prepares none (PgBouncer in transaction mode before 1.21).',
    ),
  REDIS_URL: z
    .string()
    .url()
    .optional()
    .describe(
      'Redis URL (`redis://` or `rediss://` for TLS) for the job queue and the shared rate limits. Unset: the queue ' +
        'runs on PostgreSQL and each API process keeps its own limits.',
    ),
  REDIS_CLUSTER: z
    .stringbool()
    .default(false)
    .describe(
      '`true`: `REDIS_URL` names one node of a Redis Cluster (or its configuration endpoint); pushd asks it for the ' +
        'others and sends each command to the node that holds its slot, following redirections as slots move.',
    ),
  QUEUE_PREFIX: z
    .string()
    .regex(/^([A-Za-z0-9_-]{1,64}|\{[A-Za-z0-9_-]{1,62}\})$/, 'must be 1-64 letters, digits, _ or -, or such a name in braces')
    .optional()
    .meta({
      description:
        'Namespace of the queues and rate limits, so several deployments can share one Redis. On a Redis Cluster it ' +
        "must be in braces: a hash tag, so all of a deployment's keys share a slot as BullMQ's scripts need (a prefix " +
        'without them stops start-up).',
      defaultText: '`pushd` (`{pushd}` on a cluster)',
    }),
  QUEUE_PARTITIONS: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .default(1)
    .describe(
      'Queues per job kind on Redis, each under a hash tag of its own (`{pushd:0}`, `{pushd:1}`, …), all consumed by ' +
        'every worker: on a Redis Cluster they spread over the masters, and broadcasts in different partitions go side ' +
        'by side, in one behind what the other queued ([Redis Cluster](deploying.md#redis-cluster)). Above 1 each rate-limit bucket is ' +
        'also a hash tag of its own. `1` keeps the keys of one queue per kind; the PostgreSQL queue ignores it. 1–64.',
    ),
  ROLE: z
    .enum(['all', 'api', 'worker'])
    .default('all')
    .describe('`all` runs the API and the workers in one process; `api` only the HTTP API; `worker` only the delivery workers.'),
  API_REFERENCE_PAGE: z
    .stringbool()
    .default(true)
    .describe(
      'Serve the API reference at `/docs`: a page built from the OpenAPI document (`/documentation/json`, served either way), ' +
        'its scripts and styles served by pushd itself. `false` turns the page off.',
    ),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .describe(
      '`fatal`, `error`, `warn`, `info`, `debug` (adds one line per request, and one per cleanly sent small delivery ' +
        'batch: see [operations](deploying.md#operations)), `trace`, `silent`. Logs are JSON lines on stdout.',
    ),
  TRUST_PROXY: z
    .string()
    .transform((v, ctx) => parseTrustProxy(v, ctx))
    .optional()
    .describe(
      "Which `X-Forwarded-For` hops to believe: unset, none (the address is the connection's); a number, that many " +
        'proxies in front; or a comma-separated list of proxy addresses/CIDRs (`10.0.0.0/8,127.0.0.1`).',
    ),
  METRICS_TOKEN: z
    .string()
    .min(16)
    .optional()
    .describe(
      'A bearer token (16 characters or more: `openssl rand -hex 32`) that `GET /metrics` asks for (`Authorization: Bearer ' +
        '<token>`), on the API port and on `METRICS_BIND`. Unset, and without `METRICS_BIND`, the metrics are not served: ' +
        'the API port answers `/metrics` with a 404.',
    ),
  METRICS_BIND: z
    .string()
    .transform((v, ctx) => parseBind(v, ctx))
    .optional()
    .describe(
      'A listener of its own that serves only `GET /metrics`, as `host:port` (`127.0.0.1:9464`, `[::1]:9464`), in every ' +
        'role (a worker too). It asks for `METRICS_TOKEN` when that is set, else it answers whoever reaches it: bind it ' +
        'to loopback or a private network.',
    ),
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024)
    .describe('Largest accepted request body (≥ 1024); a larger one is answered 413 (see [errors](api/errors.md)).'),
  MAX_REQUESTS_IN_FLIGHT: z.coerce
    .number()
    .int()
    .min(0)
    .default(1000)
    .describe(
      'API requests (`/v3`, `/v5`, `/v6`) in progress in one process past which another is answered 503 with ' +
        '`Retry-After: 1` at once, instead of waiting behind them until clients time out and send again. A request ' +
        'counts from when its key is checked and its body read until it is answered (one whose body never comes holds ' +
        'no place); health, readiness and metrics are not counted. Metrics: `pushd_http_requests_in_flight`, ' +
        '`pushd_http_requests_shed_total`. `0` turns it off.',
    ),
  MAX_QUEUE_DELAY_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(60_000)
    .default(1000)
    .describe(
      "The longest an API request waits in one process before its database work starts: for its group's turn (a " +
        'notification to a few devices, a transactional send), for a database connection, or unread while the event ' +
        'loop is busy. A request that has waited this long for its turn is answered 503 with `Retry-After: 1` at once, ' +
        'and while anything has waited this long a new API request is too, before its body is read: offered more than ' +
        'the server absorbs, it refuses the excess at once and answers the rest within the bound instead of making ' +
        'every request wait longer and longer. A wait no queue shows (a starved CPU, a slow flush) counts too: while ' +
        'even the fastest API answers of one second took more than half the bound, new requests are refused the same ' +
        'way. And while the event loop is busy all the time with more requests held (in progress, or unread in its ' +
        `connections) than ${HELD_FLOOR / 2} clients at capacity keep, only a share of new requests is taken in, cut by 30 % every ` +
        `${SHARE_WINDOW_MS} ms until ` +
        `the loop has room to read and refuse the rest at once, and past ${IN_PROGRESS_CAP} in progress the rest is ` +
        "refused at once. The default leaves room for bursts and a busy machine's pauses; a " +
        'lower bound (150 ms) keeps the accepted requests faster past capacity. Metrics: ' +
        '`pushd_http_requests_shed_total`, `pushd_admission_share`. `0` turns it off.',
    ),
  MAX_CONNECTIONS: z.coerce
    .number()
    .int()
    .min(0)
    .default(10000)
    .describe(
      'Client connections one process holds open at most, on all its listening descriptors; past it a new ' +
        'connection is closed at once, unanswered, so clients that open more and more while answers are slow cannot take the ' +
        'file descriptors and memory the database and gateway connections need. Keep it under the open-file limit ' +
        '(`ulimit -n`). Metric: `pushd_http_connections_dropped_total`. `0` turns it off.',
    ),
  LISTEN_DESCRIPTORS: z.coerce
    .number()
    .int()
    .min(1)
    .max(256)
    .default(64)
    .describe(
      'Descriptors of the HTTP listening socket one process polls while its event loop is busy, each accepting one ' +
        'new connection a turn of the loop (libuv accepts one at a time). With one, a process whose loop is saturated ' +
        'takes in a few new connections a second, and clients that connect during an overload wait seconds in the ' +
        'kernel before admission control can answer them. The extra ones are polled from when three turns of the loop ' +
        'in a row last 20 ms or more until it has been on time for 5 s (polled, each costs a new connection a failed ' +
        '`accept`, about 3 µs).',
    ),
  RATE_LIMIT_PER_SECOND: z.coerce
    .number()
    .min(0)
    .default(5000)
    .describe('Sustained requests per second per read or write key; 0 turns the limit off.'),
  RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(10000).describe('Burst per read or write key (≥ 1).'),
  RATE_LIMIT_SDK_PER_SECOND: z.coerce
    .number()
    .min(0)
    .default(10)
    .describe('Sustained requests per second per sdk key and client address; 0 turns it off.'),
  RATE_LIMIT_SDK_BURST: z.coerce.number().int().min(1).default(200).describe('Burst per sdk key and client address (≥ 1).'),
  APNS_ORIGIN_PRODUCTION: z.string().url().default('https://api.push.apple.com').describe('APNs production gateway.'),
  APNS_ORIGIN_SANDBOX: z
    .string()
    .url()
    .default('https://api.sandbox.push.apple.com')
    .describe('APNs sandbox gateway (development devices).'),
  APNS_CHANNELS_ORIGIN_PRODUCTION: z
    .string()
    .url()
    .default('https://api-manage-broadcast.push.apple.com:2196')
    .describe('APNs channel management (Live Activity broadcast channels).'),
  APNS_CHANNELS_ORIGIN_SANDBOX: z
    .string()
    .url()
    .default('https://api-manage-broadcast.sandbox.push.apple.com:2195')
    .describe('The same, sandbox (channels created with `"development": true`).'),
  APNS_BROADCAST_ORIGIN_PRODUCTION: z
    .string()
    .url()
    .default('https://api.push.apple.com')
    .describe('Where broadcast pushes on a channel go.'),
  APNS_BROADCAST_ORIGIN_SANDBOX: z.string().url().default('https://api.sandbox.push.apple.com').describe('The same, sandbox.'),
  FCM_ORIGIN: z.string().url().default('https://fcm.googleapis.com').describe('FCM gateway.'),
  GOOGLE_TOKEN_URL: z
    .string()
    .url()
    .default('https://oauth2.googleapis.com/token')
    .describe('OAuth token endpoint for FCM service accounts.'),
  HMS_ORIGIN: z
    .string()
    .url()
    .default('https://push-api.cloud.huawei.com')
    .describe('Huawei Push Kit gateway (`/v1/<app id>/messages:send`).'),
  HMS_TOKEN_URL: z
    .string()
    .url()
    .default('https://oauth-login.cloud.huawei.com/oauth2/v3/token')
    .describe("Huawei's OAuth token endpoint (client credentials) for Push Kit."),
  WEB_PUSH_ALLOWED_ORIGINS: allowedOrigins().describe(
    "Comma list of https origins (`https://push.example.net`, `https://10.0.0.5:8443`) a web subscription's " +
      "endpoint may point to beside the browsers' push services ([Web Push](api/web-push.md)).",
  ),
  WEBHOOK_ALLOWED_ORIGINS: allowedOrigins().describe(
    'Comma list of https origins a [webhook](api/webhooks.md) may be sent to whatever address they resolve to ' +
      '(`https://hooks.internal:8443`): receivers on a private network. Every other URL must reach a public address.',
  ),
  WEBHOOK_BATCH_SIZE: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(100)
    .describe('Events one [webhook](api/webhooks.md) request carries at most, as a JSON array (1–1000).'),
  WEBHOOK_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(60_000)
    .default(10_000)
    .describe('How long a [webhook](api/webhooks.md) receiver has to answer a request before it counts as failed.'),
  WEBHOOK_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .max(256)
    .default(8)
    .describe('[Webhook](api/webhooks.md) requests a worker has in flight at once, a quarter while it runs delivery jobs.'),
  WEBHOOK_POLL_MS: z.coerce
    .number()
    .int()
    .min(10)
    .max(60_000)
    .default(500)
    .describe('How often workers look for [webhook](api/webhooks.md) events to send when the last look found none.'),
  WEBHOOK_LEASE_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .max(3_600_000)
    .default(300_000)
    .describe(
      'How long a worker holds the [webhook](api/webhooks.md) events it took: a worker that dies while sending them ' +
        'leaves them to be sent again by another when this ends (at least once). A round starts no batch of events past ' +
        'half of it (one begun is finished), so it is at least twice `WEBHOOK_TIMEOUT_MS`.',
    ),
  GEOIP_DB_PATH: z
    .string()
    .optional()
    .describe(
      "A MaxMind City database (`.mmdb`, e.g. GeoLite2-City): a device's IP address then gives it an approximate " +
        "location (used by the `location` filter when there is no GPS fix), a city and a country (shown as the device's " +
        "`location.geoip`; the country also fills the device's `country` when it sent none).",
    ),
  ...deliverySettings,
  ...retentionSettings,
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
  if (parsed.data.WEBHOOK_LEASE_MS < 2 * parsed.data.WEBHOOK_TIMEOUT_MS)
    throw new ConfigError(
      'invalid configuration: WEBHOOK_LEASE_MS: must be at least twice WEBHOOK_TIMEOUT_MS, so a request started ' +
        'within half the lease has its answer before another worker may take its events',
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
    METRICS_TOKEN: config.METRICS_TOKEN && '***',
  };
}

/** METRICS_BIND: `host:port`, an IPv6 address in brackets. */
function parseBind(value: string, ctx: z.RefinementCtx): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(value.trim());
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (!host || port > 65535 || (match?.[1] !== undefined && isIP(host) !== 6)) {
    ctx.addIssue({ code: 'custom', message: 'must be host:port (127.0.0.1:9464, [::1]:9464)' });
    return z.NEVER;
  }
  return { host, port };
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
