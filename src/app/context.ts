import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { AudiencesRepository } from '../db/repositories/audiences.js';
import { ActivityRepository } from '../db/repositories/activity.js';
import { AbTestsRepository } from '../db/repositories/ab-tests.js';
import { AppsRepository } from '../db/repositories/apps.js';
import { ConversionsRepository } from '../db/repositories/conversions.js';
import type { Clock } from '../platform/clock.js';
import type { AppChanges } from '../db/app-changes.js';
import { DeliveryRepository } from '../db/repositories/delivery.js';
import { DevicesRepository } from '../db/repositories/devices.js';
import { EventsRepository } from '../db/repositories/events.js';
import { IdempotencyRepository } from '../db/repositories/idempotency.js';
import { MessagesRepository } from '../db/repositories/messages.js';
import { NotificationsRepository } from '../db/repositories/notifications.js';
import { StatsRepository } from '../db/repositories/stats.js';
import { UninstalledRepository } from '../db/repositories/uninstalled.js';
import type { HttpContext } from '../http/context.js';
import type { Config } from '../platform/config.js';
import { createGeoIp } from '../platform/geoip.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { NotificationScheduler } from '../queue/jobs.js';
import type { JobQueues } from '../queue/queues.js';
import { ActivityService } from '../services/activity.js';
import { AppService } from '../services/apps.js';
import { AudienceService } from '../services/audiences.js';
import { DeviceService } from '../services/devices.js';
import { IdempotencyKeys } from '../services/idempotency.js';
import { MessageStreamService } from '../services/message-streams.js';
import { MessageService } from '../services/messages.js';
import { NotificationService } from '../services/notifications.js';
import { StatsService } from '../services/stats.js';
import { TransactionalService } from '../services/transactional.js';
import { LiveActivityService, type ChannelApi } from '../services/live-activities.js';
import { LiveActivitiesRepository } from '../db/repositories/live-activities.js';
import { DeliveryStore } from '../queue/delivery-store.js';
import type { GatewayProvider } from '../gateways/provider.js';
import type { DirectDelivery } from '../queue/direct-delivery.js';
import { retryPolicyOf } from '../queue/retry.js';
import { JourneysRepository } from '../db/repositories/journeys.js';
import { JourneyEntrantsRepository } from '../db/repositories/journey-entrants.js';
import { JourneyService } from '../services/journeys.js';
import { JourneyEngine } from '../services/journey-engine.js';

/** Wires the services the API serves from, once at start-up; each gets the handle and the repositories it needs. */
export function createContext(
  config: Config,
  log: Logger,
  db: Db,
  queues: JobQueues,
  scheduler: NotificationScheduler,
  gateways: GatewayProvider,
  metrics: Metrics,
  clock: Clock,
  /**
   * what sends in this process: the delivery store its sends record through (one for all, so their records share
   * statements), and the sender of the small audiences the API cuts (none: the queue delivers them)
   */
  sending: { store: DeliveryStore; direct: DirectDelivery | null } = {
    store: new DeliveryStore(db, new DeliveryRepository()),
    direct: null,
  },
  /** the changes this process follows, for the keys and apps' settings it keeps (none: every request reads them) */
  appChanges: AppChanges | null = null,
  /** where the reads that need not see the caller's own writes go: a replica while it keeps up, else the primary */
  readDb: Db = db,
  /** APNs' channel API, for Live Activity broadcast channels (none: this process cannot manage them) */
  channels: ChannelApi | null = null,
): HttpContext {
  const audiencesRepo = new AudiencesRepository();
  const devicesRepo = new DevicesRepository();
  const eventsRepo = new EventsRepository();
  const messagesRepo = new MessagesRepository();
  const idempotency = new IdempotencyKeys(new IdempotencyRepository());
  const notifications = new NotificationService(
    db,
    audiencesRepo,
    new NotificationsRepository(),
    devicesRepo,
    new DeliveryRepository(),
    new AppsRepository(),
    scheduler,
    clock,
    idempotency,
    config.DELIVERY_BATCH_SIZE,
    (err, id) => log.warn({ err, notificationId: id }, 'enqueue failed after commit; the sweeper will re-enqueue'),
    sending.direct,
    appChanges,
    readDb,
  );
  const messages = new MessageService(
    db,
    messagesRepo,
    devicesRepo,
    new NotificationsRepository(),
    notifications,
    clock,
    idempotency,
    config.MESSAGE_RETENTION_DAYS,
    readDb,
  );
  const journeysRepo = new JourneysRepository();
  const entrantsRepo = new JourneyEntrantsRepository();
  const journeys = new JourneyService({ db, readDb, journeys: journeysRepo, entrants: entrantsRepo, devices: devicesRepo, clock });
  const journeyEngine = new JourneyEngine({
    db,
    journeys: journeysRepo,
    entrants: entrantsRepo,
    devices: devicesRepo,
    apps: new AppsRepository(),
    notifications,
    messages,
    clock,
    log,
    batchSize: config.JOURNEY_BATCH_SIZE,
  });
  const conversions = new ConversionsRepository();
  const devices = new DeviceService(
    db,
    devicesRepo,
    eventsRepo,
    createGeoIp(config.GEOIP_DB_PATH, log),
    idempotency,
    conversions,
    config.CONVERSION_WINDOW_HOURS,
    new UninstalledRepository(),
    config.WEB_PUSH_ALLOWED_ORIGINS,
    journeys,
  );
  const services = {
    activity: new ActivityService(
      db,
      new ActivityRepository(),
      conversions,
      devicesRepo,
      new NotificationsRepository(),
      readDb,
      new AbTestsRepository(),
      config.CONVERSION_WINDOW_HOURS,
    ),
    apps: new AppService(db, appChanges),
    audiences: new AudienceService(db, audiencesRepo, devicesRepo, devices, readDb),
    devices,
    notifications,
    transactional: new TransactionalService(
      db,
      new NotificationsRepository(),
      devicesRepo,
      idempotency,
      { metrics, gateways, store: sending.store, clock },
      {
        batchSize: config.DELIVERY_BATCH_SIZE,
        timeoutMs: config.TRANSACTIONAL_TIMEOUT_MS,
        retry: retryPolicyOf(config),
      },
    ),
    stats: new StatsService(db, new StatsRepository(), readDb),
    messages,
    messageStreams: new MessageStreamService(db, messagesRepo, devicesRepo, clock, idempotency),
    journeys,
    journeyEngine,
    liveActivities: new LiveActivityService({
      db,
      liveActivities: new LiveActivitiesRepository(),
      devices: devicesRepo,
      notifications: new NotificationsRepository(),
      apps: new AppsRepository(),
      notificationService: notifications,
      idempotency,
      clock,
      channels,
    }),
  };
  const check = (probe: Promise<unknown>) =>
    probe.then(
      () => 'ok' as const,
      () => 'unreachable' as const,
    );
  return {
    config,
    log,
    metrics,
    services,
    readiness: async () => {
      const [database, queue] = await Promise.all([check(sql`select 1`.execute(db)), check(queues.ping())]);
      return { database, queue };
    },
  };
}
