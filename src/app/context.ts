import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import type { Clock } from '../platform/clock.js';
import type { SecretsKeyring } from '../domain/secrets.js';
import type { AppChanges } from '../db/app-changes.js';
import type { HttpContext } from '../http/context.js';
import type { Config } from '../platform/config.js';
import { createGeoIp } from '../platform/geoip.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { NO_ADMISSION, type Admission } from '../platform/admission.js';
import type { NotificationScheduler } from '../delivery/jobs.js';
import type { JobQueues } from '../delivery/queues.js';
import { ActivityService } from '../services/activity.js';
import { AppService } from '../services/apps.js';
import { AudienceService } from '../services/audiences.js';
import { AuditService } from '../services/audit.js';
import { DeviceService } from '../services/devices.js';
import { MessageStreamService } from '../services/message-streams.js';
import { MessageService } from '../services/messages.js';
import { NotificationService } from '../services/notifications.js';
import { StatsService } from '../services/stats.js';
import { TransactionalService } from '../services/transactional.js';
import { serviceDeps, type Repositories, type ServiceDeps } from '../services/deps.js';
import { LiveActivityService, type ChannelApi } from '../services/live-activities.js';
import { DeliveryStore } from '../delivery/delivery-store.js';
import type { GatewayProvider } from '../gateways/provider.js';
import type { DirectDelivery } from '../delivery/direct-delivery.js';
import { retryPolicyOf } from '../delivery/retry.js';
import { JourneyService } from '../services/journeys.js';
import { JourneyEngine } from '../services/journey-engine.js';
import { WebhookService } from '../services/webhooks.js';
import { TemplateService } from '../services/templates.js';
import type { WebhookPoster } from '../delivery/webhooks.js';

/** What the composition root builds the API's services from (`src/app/start.ts` starts each of these first). */
export interface ContextDeps {
  config: Config;
  log: Logger;
  db: Db;
  /** the process's repositories, one of each (none: the context builds its own) */
  repos?: Repositories;
  queues: JobQueues;
  scheduler: NotificationScheduler;
  gateways: GatewayProvider;
  metrics: Metrics;
  clock: Clock;
  /** seals and opens the apps' credentials and identity secrets */
  secrets: SecretsKeyring;
  /**
   * what sends in this process: the delivery store its sends record through (one for all, so their records share
   * statements), and the sender of the small audiences the API cuts (none: the queue delivers them)
   */
  sending?: { store: DeliveryStore; direct: DirectDelivery | null };
  /** the changes this process follows, for the keys and apps' settings it keeps (none: every request reads them) */
  appChanges?: AppChanges | null;
  /** where the reads that need not see the caller's own writes go: a replica while it keeps up, else the primary */
  readDb?: Db;
  /** APNs' channel API, for Live Activity broadcast channels (none: this process cannot manage them) */
  channels?: ChannelApi | null;
  /** refuses requests whose work cannot start within its bound (none: nothing is refused for time) */
  admission?: Admission;
  /** sends webhook requests (a test ping) from this process (none: it cannot) */
  webhookPoster?: WebhookPoster | null;
}

/** Wires the services the API serves from, once at start-up: the shared dependencies once, each service its part. */
export function createContext(deps: ContextDeps): HttpContext {
  const { config, log, db, queues, metrics, clock } = deps;
  const appChanges = deps.appChanges ?? null;
  const shared = serviceDeps(db, clock, deps.readDb ?? db, deps.repos);
  const { repos } = shared;
  const sending = deps.sending ?? { store: new DeliveryStore({ db, repos, secrets: deps.secrets }), direct: null };
  const admission = deps.admission ?? NO_ADMISSION;
  const notifications = new NotificationService({
    ...shared,
    admission,
    scheduler: deps.scheduler,
    batchSize: config.DELIVERY_BATCH_SIZE,
    onScheduleError: (err, id) => log.warn({ err, notificationId: id }, 'enqueue failed after commit; the sweeper will re-enqueue'),
    direct: sending.direct,
    changes: appChanges,
  });
  const messages = new MessageService({ ...shared, notificationService: notifications, retentionDays: config.MESSAGE_RETENTION_DAYS });
  const journeys = new JourneyService({
    ...shared,
    minCycleMs: config.JOURNEY_MIN_CYCLE,
    keyring: deps.secrets,
    webhookOrigins: config.WEBHOOK_ALLOWED_ORIGINS,
  });
  const journeyEngine = new JourneyEngine({
    ...shared,
    notifications,
    messages,
    log,
    batchSize: config.JOURNEY_BATCH_SIZE,
    dueAheadMs: config.JOURNEY_POLL_MS,
    intake: journeys,
    webhooks: deps.webhookPoster ? { poster: deps.webhookPoster, keyring: deps.secrets, concurrency: config.WEBHOOK_CONCURRENCY } : null,
  });
  const devices = new DeviceService({
    ...shared,
    admission,
    journeys,
    geoip: createGeoIp(config.GEOIP_DB_PATH, log),
    conversionWindowHours: config.CONVERSION_WINDOW_HOURS,
    webPushOrigins: config.WEB_PUSH_ALLOWED_ORIGINS,
  });
  const services = {
    activity: new ActivityService({ ...shared, admission, conversionWindowHours: config.CONVERSION_WINDOW_HOURS }),
    apps: new AppService({ ...shared, secrets: deps.secrets, changes: appChanges }),
    audiences: new AudienceService({ ...shared, deviceService: devices }),
    audit: new AuditService(shared),
    devices,
    notifications,
    transactional: new TransactionalService({
      ...shared,
      admission,
      sending: { metrics, gateways: deps.gateways, store: sending.store, clock, log },
      settings: {
        batchSize: config.DELIVERY_BATCH_SIZE,
        timeoutMs: config.TRANSACTIONAL_TIMEOUT_MS,
        retry: retryPolicyOf(config),
      },
    }),
    stats: new StatsService(shared),
    templates: new TemplateService(shared),
    messages,
    messageStreams: new MessageStreamService(shared),
    journeys,
    journeyEngine,
    webhooks: new WebhookService({
      ...shared,
      keyring: deps.secrets,
      poster: deps.webhookPoster ?? null,
      allowedOrigins: config.WEBHOOK_ALLOWED_ORIGINS,
      retentionDays: config.RETENTION_WEBHOOK_EVENTS_DAYS,
    }),
    liveActivities: liveActivityService(shared, deps, notifications),
  };
  return { config, log, metrics, admission, services, readiness: readinessOf(db, queues) };
}

/** The Live Activity service: its repositories, the notifications it sends through, the channels it manages. */
function liveActivityService(shared: ServiceDeps, deps: ContextDeps, notifications: NotificationService): LiveActivityService {
  const { db, repos, clock } = shared;
  return new LiveActivityService({
    db,
    liveActivities: repos.liveActivities,
    devices: repos.devices,
    notifications: repos.notifications,
    apps: repos.apps,
    audit: repos.audit,
    secrets: deps.secrets,
    notificationService: notifications,
    idempotency: shared.idempotency,
    clock,
    channels: deps.channels ?? null,
  });
}

/** Whether the database and the queue answer (`/ready`). */
function readinessOf(db: Db, queues: JobQueues): HttpContext['readiness'] {
  const check = (probe: Promise<unknown>) =>
    probe.then(
      () => 'ok' as const,
      () => 'unreachable' as const,
    );
  return async () => {
    const [database, queue] = await Promise.all([check(sql`select 1`.execute(db)), check(queues.ping())]);
    return { database, queue };
  };
}
