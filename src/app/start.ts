import { systemClock, type Clock } from '../platform/clock.js';
import { AppChanges } from '../db/app-changes.js';
import { buildServer } from '../http/server.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import { Metrics } from '../platform/metrics.js';
import { startPipeline, type DeliveryRuntime } from '../delivery/pipeline.js';
import { startJourneyPoller } from '../delivery/journeys.js';
import { startWebhookSender, WebhookPoster } from '../delivery/webhooks.js';
import { WebhookClient } from '../gateways/webhook-client.js';
import { jobSpecs } from '../delivery/jobs.js';
import { JobQueues } from '../delivery/queues.js';
import type { HttpContext } from '../http/context.js';
import type { Db } from '../db/database.js';
import type { SecretsKeyring } from '../domain/secrets.js';
import { createContext } from './context.js';
import { buildDeliveryRuntime, pipelineSettings } from './delivery-runtime.js';
import { createRepositories, type Repositories } from '../services/deps.js';
import { Admission } from '../platform/admission.js';
import { ApnsChannels } from '../gateways/apns-channels.js';
import { openDatabaseRuntime, type DatabaseRuntime } from './runtime.js';

export type Server = Awaited<ReturnType<typeof buildServer>>;

/** What a started process runs: the API parts only exist when ROLE is `all` or `api`. */
export interface Pushd {
  database: DatabaseRuntime;
  queues: JobQueues;
  /** what every send of this process goes through, built once */
  delivery: DeliveryRuntime;
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

/** What differs between processes beyond the settings (tests run the gateway threads from TypeScript sources). */
export interface StartOptions {
  gatewayThreadEntry?: URL;
  /** The system clock unless given (tests move time instead of waiting for it). */
  clock?: Clock;
}

/**
 * The one start-up sequence (the server process and the test harness both use it): database (embedded or
 * DATABASE_URL, migrated), job queues (Redis when REDIS_URL is set, else PostgreSQL), the one delivery runtime
 * (`buildDeliveryRuntime`), the delivery pipeline's workers (unless ROLE=api), then, unless ROLE=worker, the
 * request context and the HTTP server (not listening).
 */
export async function startPushd(config: Config, log: Logger, lifecycle: Lifecycle, options: StartOptions = {}): Promise<Pushd> {
  const database = await openDatabaseRuntime(config, log);
  lifecycle.add('database', () => database.close());
  const { embedded } = database;
  if (embedded) lifecycle.addAbort('embedded PostgreSQL', () => embedded.stop());
  const queues = openQueues(config, database.listenUrl);
  lifecycle.add('queues', () => queues.close());
  const appChanges = new AppChanges(database.listenUrl, log);
  await appChanges.start();
  lifecycle.add('app changes', () => appChanges.close());
  const metrics = new Metrics();
  if (database.replica) metrics.followReadReplica(database.replica);
  const clock = options.clock ?? systemClock;
  const secrets = database.secrets.keyring;
  const db = database.handle.db;
  const workers = config.ROLE !== 'api';
  // one of each repository for the process: its delivery, its webhooks and its services'
  const repos = createRepositories();
  const webhookPoster = startWebhooks(lifecycle, { config, log, db, repos, keyring: secrets, workers, queues });
  const delivery = buildDeliveryRuntime({
    config,
    log,
    db,
    repos,
    queues,
    metrics,
    clock,
    secrets,
    changes: appChanges,
    gatewayThreadEntry: options.gatewayThreadEntry,
  });
  lifecycle.add('gateways', () => delivery.gateways.close());
  // after the workers and the HTTP server: the sends they started finish before the gateways close
  lifecycle.add('direct deliveries', () => delivery.direct.close());
  const pipeline = workers
    ? startPipeline({ log, db, queues, clock, metrics, runtime: delivery, settings: pipelineSettings(config) })
    : null;
  // workers finish their in-flight jobs first
  if (pipeline) lifecycle.add('pipeline', () => pipeline.close());
  // what every context is made of (sends cut at creation go out from this process); the API's adds changes, replica
  // and channels
  const { scheduler, gateways, store } = delivery;
  const shared = {
    ...{ config, log, db, repos, queues, scheduler, gateways, metrics, clock, secrets },
    ...{ webhookPoster, sending: { store, direct: delivery.direct } },
  };
  if (config.ROLE === 'worker') {
    // a worker serves no API: its context only runs journeys' steps, whose batches it sends itself in turns
    startJourneys(lifecycle, config, log, createContext(shared));
    return { database, queues, delivery, metrics };
  }
  // Live Activity channels are managed (and broadcast to) from the API process that is asked
  const channels = new ApnsChannels({
    managementOrigin: { production: config.APNS_CHANNELS_ORIGIN_PRODUCTION, sandbox: config.APNS_CHANNELS_ORIGIN_SANDBOX },
    broadcastOrigin: { production: config.APNS_BROADCAST_ORIGIN_PRODUCTION, sandbox: config.APNS_BROADCAST_ORIGIN_SANDBOX },
  });
  lifecycle.add('apns channels', () => channels.close());
  // what a request waits for: its group's turn (the services' runners), a database connection, the event loop
  const admission = new Admission(config.MAX_QUEUE_DELAY_MS);
  admission.watch(database.handle.waitingSince);
  const stopAdmission = admission.start();
  metrics.followAdmission(admission);
  lifecycle.add('admission', async () => stopAdmission());
  const ctx = createContext({
    ...shared,
    appChanges,
    readDb: database.replica?.db,
    channels,
    admission,
  });
  if (workers) startJourneys(lifecycle, config, log, ctx);
  const server = await buildServer(ctx);
  lifecycle.add('http', () => server.close()); // stop accepting, let in-flight requests finish
  return { database, queues, delivery, metrics, api: { ctx, server } };
}

/** The job queues: on Redis when REDIS_URL is set, else on PostgreSQL; `listenUrl` is where they LISTEN for jobs. */
function openQueues(config: Config, listenUrl: string): JobQueues {
  return new JobQueues(
    config.REDIS_URL
      ? {
          kind: 'redis',
          redisUrl: config.REDIS_URL,
          redisCluster: config.REDIS_CLUSTER,
          databaseUrl: listenUrl,
          prefix: config.QUEUE_PREFIX,
          partitions: config.QUEUE_PARTITIONS,
        }
      : { kind: 'postgres', databaseUrl: listenUrl, prefix: config.QUEUE_PREFIX },
    jobSpecs({ deliveryAttempts: config.DELIVERY_MAX_ATTEMPTS }),
  );
}

/** The webhook client and what signs and sends through it (the sender's, an API's test ping, the command line's). */
export function createWebhookPoster(
  config: Config,
  { db, repos, keyring }: { db: Db; repos: Pick<Repositories, 'webhooks' | 'audit'>; keyring: SecretsKeyring },
) {
  const client = new WebhookClient({
    allowedOrigins: config.WEBHOOK_ALLOWED_ORIGINS,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    maxSockets: config.WEBHOOK_CONCURRENCY,
  });
  const deps = { db, webhooks: repos.webhooks, audit: repos.audit, transport: client, keyring };
  return { deps, poster: new WebhookPoster(deps), close: () => client.close() };
}

/** The webhook client every process has, and the outbox's sender where the workers run: apart from delivery. */
function startWebhooks(
  lifecycle: Lifecycle,
  deps: { config: Config; log: Logger; db: Db; repos: Repositories; keyring: SecretsKeyring; workers: boolean; queues: JobQueues },
): WebhookPoster {
  const { config } = deps;
  const made = createWebhookPoster(config, deps);
  lifecycle.add('webhook client', async () => made.close());
  if (deps.workers) {
    const sender = startWebhookSender({
      ...made.deps,
      log: deps.log,
      batchSize: config.WEBHOOK_BATCH_SIZE,
      concurrency: config.WEBHOOK_CONCURRENCY,
      pollMs: config.WEBHOOK_POLL_MS,
      leaseMs: config.WEBHOOK_LEASE_MS,
      busy: () => deps.queues.running > 0,
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
