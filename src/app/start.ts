import { systemClock, type Clock } from '../platform/clock.js';
import { AppsRepository } from '../db/repositories/apps.js';
import { AppChanges } from '../db/app-changes.js';
import type { Db } from '../db/database.js';
import { createGatewayProvider, type CredentialsLookup, type GatewayRuntimeOptions } from '../gateways/runtime/create-provider.js';
import type { AppPushCredentials } from '../gateways/pool.js';
import { GroupRunner } from '../platform/group-runner.js';
import { buildServer } from '../http/server.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import { Metrics } from '../platform/metrics.js';
import { startPipeline, type Pipeline } from '../delivery/pipeline.js';
import { startJourneyPoller } from '../delivery/journeys.js';
import { startWebhookSender, WebhookPoster } from '../delivery/webhooks.js';
import { WebhookClient } from '../gateways/webhook-client.js';
import { WebhooksRepository } from '../db/repositories/webhooks.js';
import { jobSpecs } from '../delivery/jobs.js';
import { LargeBatchTurns } from '../delivery/delivery.js';
import { DirectDelivery, DIRECT_MAX_IN_FLIGHT } from '../delivery/direct-delivery.js';
import { DeliveryStore } from '../delivery/delivery-store.js';
import type { FrequencyCap } from '../domain/frequency-caps.js';
import { DeliveryRepository } from '../db/repositories/delivery.js';
import { backoffDelay, retryPolicyOf } from '../delivery/retry.js';
import { JobQueues } from '../delivery/queues.js';
import type { HttpContext } from '../http/context.js';
import { createContext } from './context.js';
import { ApnsChannels } from '../gateways/apns-channels.js';
import { openDatabaseRuntime, type DatabaseRuntime } from './runtime.js';
import type { Sealed, SecretColumn, SecretsKeyring } from '../domain/secrets.js';

export type Server = Awaited<ReturnType<typeof buildServer>>;

/** What a started process runs: the API parts only exist when ROLE is `all` or `api`. */
export interface Pushd {
  database: DatabaseRuntime;
  queues: JobQueues;
  pipeline: Pipeline;
  metrics: Metrics;
  api?: { ctx: HttpContext; server: Server };
}

/**
 * Components closed in the reverse order of start-up. A process registers each component as soon as it runs,
 * so a signal during start-up closes whatever was already started.
 */
export class Lifecycle {
  private readonly closers: { name: string; close: () => Promise<unknown> }[] = [];
  private readonly aborts: { name: string; abort: () => Promise<unknown> }[] = [];
  /** The component being closed now: what a shutdown that times out was waiting for. */
  closing: string | undefined;

  add(name: string, close: () => Promise<unknown>): void {
    this.closers.push({ name, close });
  }

  /**
   * What must be done even when the orderly close cannot finish (it timed out, a second signal, a crash): what
   * would outlive the process, as the embedded PostgreSQL in its own session does.
   */
  addAbort(name: string, abort: () => Promise<unknown>): void {
    this.aborts.push({ name, abort });
  }

  /** Runs every abort step at once, whatever the orderly close is doing; false when one failed (each is logged). */
  async abort(log: Logger): Promise<boolean> {
    const results = await Promise.allSettled(this.aborts.map((a) => a.abort()));
    results.forEach((r, i) => {
      if (r.status === 'rejected') log.error({ err: r.reason as Error, component: this.aborts[i]!.name }, 'error during abort');
    });
    return results.every((r) => r.status === 'fulfilled');
  }

  /** Closes everything; false when a component failed to close (each failure is logged, the rest still close). */
  async close(log: Logger): Promise<boolean> {
    let ok = true;
    for (const c of this.closers.splice(0).reverse()) {
      this.closing = c.name;
      try {
        await c.close();
      } catch (err) {
        ok = false;
        log.error({ err, component: c.name }, 'error during shutdown');
      }
    }
    this.closing = undefined;
    return ok;
  }
}

/**
 * The one start-up sequence (the server process and the test harness both use it): database (embedded or
 * DATABASE_URL, migrated), job queues (Redis when REDIS_URL is set, else PostgreSQL), the delivery pipeline
 * (workers unless ROLE=api), then, unless ROLE=worker, the request context and the HTTP server (not listening).
 */
/** What differs between processes beyond the settings (tests run the gateway threads from TypeScript sources). */
export interface StartOptions {
  gatewayThreadEntry?: URL;
  /** The system clock unless given (tests move time instead of waiting for it). */
  clock?: Clock;
}

export async function startPushd(config: Config, log: Logger, lifecycle: Lifecycle, options: StartOptions = {}): Promise<Pushd> {
  const database = await openDatabaseRuntime(config, log);
  lifecycle.add('database', () => database.close());
  const { embedded } = database;
  if (embedded) lifecycle.addAbort('embedded PostgreSQL', () => embedded.stop());
  const queues = new JobQueues(
    config.REDIS_URL
      ? {
          kind: 'redis',
          redisUrl: config.REDIS_URL,
          redisCluster: config.REDIS_CLUSTER,
          databaseUrl: database.listenUrl,
          prefix: config.QUEUE_PREFIX,
          partitions: config.QUEUE_PARTITIONS,
        }
      : { kind: 'postgres', databaseUrl: database.listenUrl, prefix: config.QUEUE_PREFIX },
    jobSpecs({ deliveryAttempts: config.DELIVERY_MAX_ATTEMPTS }),
  );
  lifecycle.add('queues', () => queues.close());
  const appChanges = new AppChanges(database.listenUrl, log);
  await appChanges.start();
  lifecycle.add('app changes', () => appChanges.close());
  const metrics = new Metrics();
  if (database.replica) metrics.followReadReplica(database.replica);
  const workers = config.ROLE !== 'api';
  // The API sends transactional notifications itself: an API-only process has gateways of its own (on its thread).
  const gateways = createGatewayProvider(
    gatewayRuntimeOptions(config, options, workers ? config.GATEWAY_THREADS : 0),
    log,
    credentialsLookup(database.handle.db, database.secrets.keyring, appChanges),
  );
  if (!workers) lifecycle.add('gateways', () => gateways.close());
  const clock = options.clock ?? systemClock;
  // the apps' frequency caps, read by every batch: kept while their changes are followed
  const frequencyCaps = appChanges.cache<string, FrequencyCap[] | null>();
  const webhookApps = appChanges.cache<'batch', string[]>();
  const pipeline = startPipeline({
    config,
    log,
    db: database.handle.db,
    queues,
    workers,
    clock,
    gateways,
    metrics,
    frequencyCaps,
    webhookApps,
  });
  // workers finish their in-flight batches, then gateways close
  lifecycle.add('pipeline', () => pipeline.close());
  const webhookPoster = startWebhooks(lifecycle, { config, log, db: database.handle.db, keyring: database.secrets.keyring, workers });
  // what every context is made of; the API's adds its sending, changes, replica and channels
  const shared = {
    config,
    log,
    db: database.handle.db,
    queues,
    scheduler: pipeline.scheduler,
    gateways,
    metrics,
    clock,
    secrets: database.secrets.keyring,
    webhookPoster,
  };
  if (config.ROLE === 'worker') {
    // a worker serves no API: its context only runs journeys' steps, its sends going through the queue
    startJourneys(lifecycle, config, log, createContext(shared));
    return { database, queues, pipeline, metrics };
  }
  const policy = retryPolicyOf(config);
  const store = new DeliveryStore(database.handle.db, new DeliveryRepository(), frequencyCaps, webhookApps);
  const direct = new DirectDelivery({
    log,
    metrics,
    gateways,
    clock,
    store,
    scheduler: pipeline.scheduler,
    maxAttempts: policy.attempts,
    maxInFlight: DIRECT_MAX_IN_FLIGHT,
    largeTurns: new LargeBatchTurns(config.DELIVERY_CONCURRENCY),
    leaseMs: config.SWEEP_AFTER_SECONDS * 1000,
    backoff: (attemptsMade, err) => backoffDelay(policy, attemptsMade, err),
  });
  // after the HTTP server: the sends its last requests started finish before the pipeline and gateways close
  lifecycle.add('direct deliveries', () => direct.close());
  // Live Activity channels are managed (and broadcast to) from the API process that is asked
  const channels = new ApnsChannels({
    managementOrigin: { production: config.APNS_CHANNELS_ORIGIN_PRODUCTION, sandbox: config.APNS_CHANNELS_ORIGIN_SANDBOX },
    broadcastOrigin: { production: config.APNS_BROADCAST_ORIGIN_PRODUCTION, sandbox: config.APNS_BROADCAST_ORIGIN_SANDBOX },
  });
  lifecycle.add('apns channels', () => channels.close());
  const ctx = createContext({
    ...shared,
    sending: { store, direct },
    appChanges,
    readDb: database.replica?.db,
    channels,
  });
  if (workers) startJourneys(lifecycle, config, log, ctx);
  const server = await buildServer(ctx);
  lifecycle.add('http', () => server.close()); // stop accepting, let in-flight requests finish
  return { database, queues, pipeline, metrics, api: { ctx, server } };
}

/** The webhook client and what signs and sends through it (the sender's, an API's test ping, the command line's). */
export function createWebhookPoster(config: Config, db: Db, keyring: SecretsKeyring) {
  const client = new WebhookClient({
    allowedOrigins: config.WEBHOOK_ALLOWED_ORIGINS,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    maxSockets: config.WEBHOOK_CONCURRENCY,
  });
  const deps = { db, webhooks: new WebhooksRepository(), transport: client, keyring };
  return { deps, poster: new WebhookPoster(deps), close: () => client.close() };
}

/** The webhook client every process has, and the outbox's sender where the workers run: apart from delivery. */
function startWebhooks(
  lifecycle: Lifecycle,
  deps: { config: Config; log: Logger; db: Db; keyring: SecretsKeyring; workers: boolean },
): WebhookPoster {
  const { config } = deps;
  const made = createWebhookPoster(config, deps.db, deps.keyring);
  lifecycle.add('webhook client', async () => made.close());
  if (deps.workers) {
    const sender = startWebhookSender({
      ...made.deps,
      log: deps.log,
      batchSize: config.WEBHOOK_BATCH_SIZE,
      concurrency: config.WEBHOOK_CONCURRENCY,
      pollMs: config.WEBHOOK_POLL_MS,
    });
    lifecycle.add('webhook sender', () => sender.stop());
  }
  return made.poster;
}

/** Journeys' steps run where the workers do: registered after the pipeline, so it stops before the workers close. */
function startJourneys(lifecycle: Lifecycle, config: Config, log: Logger, ctx: HttpContext): void {
  const poller = startJourneyPoller({ steps: ctx.services.journeyEngine, log, intervalMs: config.JOURNEY_POLL_MS });
  lifecycle.add('journeys', () => poller.stop());
}

function gatewayRuntimeOptions(config: Config, options: StartOptions, threads: number): GatewayRuntimeOptions {
  const limits = { maxInFlight: config.GATEWAY_MAX_IN_FLIGHT, maxConnections: config.GATEWAY_MAX_CONNECTIONS };
  return {
    pool: {
      apnsOriginProduction: config.APNS_ORIGIN_PRODUCTION,
      apnsOriginSandbox: config.APNS_ORIGIN_SANDBOX,
      fcmOrigin: config.FCM_ORIGIN,
      googleTokenUrl: config.GOOGLE_TOKEN_URL,
      webPushAllowedOrigins: config.WEB_PUSH_ALLOWED_ORIGINS,
      hmsOrigin: config.HMS_ORIGIN,
      hmsTokenUrl: config.HMS_TOKEN_URL,
      apns: limits,
      fcm: limits,
    },
    threads,
    logLevel: config.LOG_LEVEL,
    closeTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    threadEntry: options.gatewayThreadEntry,
  };
}

/**
 * The gateways read an app's credentials as stored, for every batch: opened here and kept while the changes to them
 * are followed, so a change applies to the next batch. The reads of concurrent batches are one statement: those asked
 * while one runs go in the next, so each still sees what was stored when it asked.
 */
function credentialsLookup(db: Db, secrets: SecretsKeyring, changes: AppChanges): CredentialsLookup {
  const open = (sealed: Sealed | null, column: SecretColumn) => sealed && secrets.openJson(sealed, column);
  const apps = new AppsRepository();
  const reads = new GroupRunner<string, AppPushCredentials | null>(
    async (ids) => {
      const found = await apps.pushCredentialsOf(db, [...new Set(ids)]);
      return ids.map((id) => {
        const app = found.get(id);
        try {
          const value = app
            ? {
                id: app.id,
                bundleId: app.bundle_id,
                apnsCredentials: open(app.apns_credentials, 'apns_credentials'),
                fcmCredentials: open(app.fcm_credentials, 'fcm_credentials'),
                webPushCredentials: open(app.web_push_credentials, 'web_push_credentials'),
                hmsCredentials: open(app.hms_credentials, 'hms_credentials'),
              }
            : null;
          return { status: 'fulfilled', value };
        } catch (err) {
          // a value this process cannot open (sealed under a key it was not given): no send, never one with garbage
          return { status: 'rejected', reason: err };
        }
      });
    },
    { maxInFlight: 1, maxGroup: 100 },
  );
  const kept = changes.cache<string, AppPushCredentials>();
  return async (appId) => (await kept.get(appId, async () => (await reads.submit(appId)) ?? undefined)) ?? null;
}
