import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { Lifecycle, startPushd, type Server } from '../../src/app/start.js';
import type { HttpContext } from '../../src/http/context.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { loadConfig, type Config } from '../../src/platform/config.js';
import { pino, type DestinationStream } from 'pino';
import { createLogger, redactPaths } from '../../src/platform/logger.js';
import type { Clock } from '../../src/platform/clock.js';
import type { DeliveryRuntime } from '../../src/delivery/pipeline.js';
import type { QueueBackendKind } from '../../src/delivery/queues.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { GATEWAY_THREAD_ENTRY } from './gateway-thread.js';
import type { SecretsKeyring } from '../../src/domain/secrets.js';
import { TEST_SECRETS_KEY } from '../engines/secrets-key.js';
import { TEST_METRICS_TOKEN } from '../engines/metrics-token.js';

export type { Server };

export interface Harness {
  ctx: HttpContext;
  server: Server;
  db: DatabaseHandle;
  databaseUrl: string;
  /** queue namespace of this harness; a worker process started by a test must use the same */
  queuePrefix: string;
  config: Config;
  /** the keys the server seals and opens the apps' secrets with (SECRETS_KEY: the test key unless `env` says) */
  secrets: SecretsKeyring;
  /** the process's one delivery runtime: its gateways, store, large-batch turns and direct sends */
  delivery: DeliveryRuntime;
  /**
   * Creates an app with its three keys and its identity secret through the same service the CLI uses. Identity
   * verification is then turned off (as for an app created before it existed) unless `identityVerification` is set:
   * the tests of other things bind user ids with the sdk key without hashes, as apps that predate it do.
   */
  createApp(
    bundleId?: string,
    opts?: { identityVerification?: boolean },
  ): Promise<{
    app: { id: string; bundle_id: string; name: string };
    keys: { read: string; write: string; sdk: string };
    identity_secret: string;
  }>;
  close(): Promise<void>;
}

export { TEST_METRICS_TOKEN };
/** The header that brings TEST_METRICS_TOKEN to /metrics. */
export const metricsAuth = { authorization: `Bearer ${TEST_METRICS_TOKEN}` };

export const redisUrl = (): string | null => inject('redisUrl');

/** Basic credential header: username (empty or bundle id) and key. */
export function basic(key: string, username = ''): string {
  return `Basic ${Buffer.from(`${username}:${key}`).toString('base64')}`;
}

/**
 * A fresh database (migrated) and the real HTTP server on it, started by the same sequence as the server process;
 * `queue` picks the BullMQ backend. Workers run only when `workers` is set (delivery tests); env overrides go
 * through the real config parser (given as a function, they are made from the fresh database's URL).
 * `adminDatabaseUrl` names another server than the test PostgreSQL to create the database on.
 */
export async function createHarness(
  opts: {
    queue?: QueueBackendKind;
    workers?: boolean;
    env?: Record<string, string> | ((databaseUrl: string) => Record<string, string>);
    clock?: Clock;
    adminDatabaseUrl?: string;
    /** where the server's log lines go instead of stdout (at LOG_LEVEL, silent unless TEST_LOG_LEVEL or `env` say) */
    logTo?: DestinationStream;
  } = {},
): Promise<Harness> {
  const adminUrl = opts.adminDatabaseUrl ?? inject('adminDatabaseUrl');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const databaseUrl = withDatabase(adminUrl, name);

  const kind = opts.queue ?? 'postgres';
  const rUrl = redisUrl();
  if (kind === 'redis' && !rUrl) throw new Error('redis harness requested without Redis');
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    ...(kind === 'redis' ? { REDIS_URL: rUrl! } : {}),
    QUEUE_PREFIX: name,
    SECRETS_KEY: TEST_SECRETS_KEY,
    ROLE: opts.workers ? 'all' : 'api',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    // the suite's servers share a busy machine's cores, where a late turn is not overload: the tests of admission
    // control turn it on
    MAX_QUEUE_DELAY_MS: '0',
    ...(typeof opts.env === 'function' ? opts.env(databaseUrl) : opts.env),
  });
  const log = opts.logTo ? pino({ level: config.LOG_LEVEL, redact: redactPaths }, opts.logTo) : createLogger(config.LOG_LEVEL);
  const lifecycle = new Lifecycle();
  const pushd = await startPushd(config, log, lifecycle, { gatewayThreadEntry: GATEWAY_THREAD_ENTRY, clock: opts.clock });
  const { ctx, server } = pushd.api!;
  await server.ready();
  const db = pushd.database.handle;

  return {
    ctx,
    server,
    db,
    databaseUrl,
    queuePrefix: name,
    config,
    secrets: pushd.database.secrets.keyring,
    delivery: pushd.delivery,
    async createApp(bundleId = `com.test.${randomBytes(4).toString('hex')}`, { identityVerification = false } = {}) {
      const apps = new AppService({ db: db.db, secrets: pushd.database.secrets.keyring, repos: createRepositories() });
      const created = await apps.createApp(bundleId);
      if (!identityVerification) await apps.setIdentityVerification(created.app.id, 'off');
      return created;
    },
    async close() {
      await lifecycle.close(log);
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await a.end();
    },
  };
}

/**
 * A harness for the whole file: started before its tests, closed after them. The returned object stands for the
 * harness (property reads go to it), so tests write `h.server` as with createHarness.
 */
export function useHarness(opts: Parameters<typeof createHarness>[0] = {}): Harness {
  let harness: Harness | undefined;
  beforeAll(async () => {
    harness = await createHarness(opts);
  });
  afterAll(async () => harness?.close());
  return new Proxy({} as Harness, {
    get(_target, key) {
      if (!harness) throw new Error('the harness is used before its beforeAll ran');
      return harness[key as keyof Harness];
    },
  });
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/**
 * A clock a test moves by hand: scheduled sends come due when the test says so, not when time passes. `run()` lets
 * it go on with real time from where it stands (pacing is measured in real time), until the next `set`.
 */
export class ManualClock implements Clock {
  private runningSince: number | null = null;
  constructor(private at = new Date()) {}
  now(): Date {
    return new Date(this.at.getTime() + (this.runningSince === null ? 0 : Date.now() - this.runningSince));
  }
  set(at: Date | string): void {
    this.at = new Date(at);
    this.runningSince = null;
  }
  advance(ms: number): void {
    this.set(new Date(this.now().getTime() + ms));
  }
  run(): void {
    this.at = this.now();
    this.runningSince = Date.now();
  }
}
