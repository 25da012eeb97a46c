import type { Db } from '../db/database.js';
import type { AppChanges } from '../db/app-changes.js';
import type { FrequencyCap } from '../domain/frequency-caps.js';
import type { SecretsKeyring } from '../domain/secrets.js';
import { LargeBatchTurns } from '../delivery/delivery.js';
import { DeliveryStore } from '../delivery/delivery-store.js';
import { DIRECT_MAX_IN_FLIGHT, DirectDelivery } from '../delivery/direct-delivery.js';
import type { JobQueues } from '../delivery/queues.js';
import { queueScheduler, type DeliveryRuntime, type PipelineSettings } from '../delivery/pipeline.js';
import type { DeliveryRepositories } from '../delivery/repositories.js';
import { retentionOf } from '../delivery/retention.js';
import { backoffDelay, retryPolicyOf } from '../delivery/retry.js';
import { createGatewayProvider, type GatewayRuntimeOptions } from '../gateways/runtime/create-provider.js';
import { GATEWAY_REQUEST_TIMEOUT_MS } from '../gateways/types.js';
import type { AppPushCredentials } from '../gateways/pool.js';
import type { Clock } from '../platform/clock.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';

export interface DeliveryRuntimeDeps {
  config: Config;
  log: Logger;
  db: Db;
  /** the process's repositories (`createRepositories`) */
  repos: DeliveryRepositories;
  queues: JobQueues;
  metrics: Metrics;
  clock: Clock;
  secrets: SecretsKeyring;
  /** the app changes this process follows: its caches of credentials and frequency caps */
  changes: AppChanges;
  /** the module a gateway thread runs (tests run it from the TypeScript sources) */
  gatewayThreadEntry?: URL;
}

/**
 * The process's one delivery runtime, whatever its role: the gateways, the delivery store every attempt records
 * through (so their records share statements), one pool of large-batch turns, and the direct sends, which the
 * API's services and the pipeline's workers share.
 */
export function buildDeliveryRuntime(deps: DeliveryRuntimeDeps): DeliveryRuntime {
  const { config, log, db, metrics, clock, repos } = deps;
  const workers = config.ROLE !== 'api';
  // The API sends transactional notifications itself: an API-only process has gateways of its own (on its thread).
  const gateways = createGatewayProvider(gatewayRuntimeOptions(config, workers ? config.GATEWAY_THREADS : 0, deps.gatewayThreadEntry), log);
  // what every batch reads of its app is kept while the app's changes are followed: its push credentials, its
  // frequency caps, and whether it has a webhook endpoint for batches' outcomes (the push path pays nothing without)
  const store = new DeliveryStore({
    db,
    repos,
    secrets: deps.secrets,
    credentials: deps.changes.cache<string, AppPushCredentials>(),
    caps: deps.changes.cache<string, FrequencyCap[] | null>(),
    eventApps: deps.changes.cache<'batch', string[]>(),
  });
  const scheduler = queueScheduler(deps.queues);
  const policy = retryPolicyOf(config);
  const largeTurns = new LargeBatchTurns(config.DELIVERY_CONCURRENCY);
  const direct = new DirectDelivery({
    log,
    metrics,
    gateways,
    clock,
    store,
    scheduler,
    maxAttempts: policy.attempts,
    maxInFlight: DIRECT_MAX_IN_FLIGHT,
    largeTurns,
    journeyTurns: new LargeBatchTurns(config.DELIVERY_CONCURRENCY),
    leaseMs: config.SWEEP_AFTER_SECONDS * 1000,
    backoff: (attemptsMade, err) => backoffDelay(policy, attemptsMade, err),
  });
  return { repos, scheduler, gateways, store, largeTurns, direct };
}

/** The settings the pipeline's workers run by. */
export function pipelineSettings(config: Config): PipelineSettings {
  return {
    largeBatchesAtOnce: config.DELIVERY_CONCURRENCY,
    jobLockMs: config.JOB_LOCK_MS,
    pageSize: config.FANOUT_PAGE_SIZE,
    batchSize: config.DELIVERY_BATCH_SIZE,
    rangeDevices: config.FANOUT_RANGE_DEVICES,
    retry: retryPolicyOf(config),
    retention: retentionOf(config),
    sweepAfterSeconds: config.SWEEP_AFTER_SECONDS,
    // a transactional send's last attempt starts before its deadline and may wait for an OAuth token, then for
    // the push (a small audience's one attempt, the same without the deadline)
    heldSeconds: Math.ceil((config.TRANSACTIONAL_TIMEOUT_MS + 2 * GATEWAY_REQUEST_TIMEOUT_MS) / 1000),
    schedulePollMs: config.SCHEDULE_POLL_MS,
  };
}

function gatewayRuntimeOptions(config: Config, threads: number, threadEntry: URL | undefined): GatewayRuntimeOptions {
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
    threadEntry,
  };
}
