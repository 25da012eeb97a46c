import type { Db } from '../db/database.js';
import { AbTestsRepository } from '../db/repositories/ab-tests.js';
import { ActivityRepository } from '../db/repositories/activity.js';
import { ApiKeysRepository, AppsRepository } from '../db/repositories/apps.js';
import { AudiencesRepository } from '../db/repositories/audiences.js';
import { AuditRepository } from '../db/repositories/audit.js';
import { BatchesRepository } from '../db/repositories/batches.js';
import { ConversionsRepository } from '../db/repositories/conversions.js';
import { DeliverableDevicesRepository } from '../db/repositories/deliverable-devices.js';
import { DevicesRepository } from '../db/repositories/devices.js';
import { EventsRepository } from '../db/repositories/events.js';
import { FanoutRepository } from '../db/repositories/fanout.js';
import { FrequencyCapsRepository } from '../db/repositories/frequency-caps.js';
import { IdempotencyRepository } from '../db/repositories/idempotency.js';
import { JourneysRepository } from '../db/repositories/journeys.js';
import { JourneyEntrantsRepository } from '../db/repositories/journey-entrants.js';
import { JourneyEventsRepository } from '../db/repositories/journey-events.js';
import { JourneyDevicesRepository } from '../db/repositories/journey-devices.js';
import { LeasesRepository } from '../db/repositories/leases.js';
import { MessagePartitionsRepository } from '../db/repositories/message-partitions.js';
import { LiveActivitiesRepository } from '../db/repositories/live-activities.js';
import { MessagesRepository } from '../db/repositories/messages.js';
import { NewDevicesRepository } from '../db/repositories/new-devices.js';
import { TokenReadsRepository } from '../db/repositories/token-reads.js';
import { NotificationsRepository } from '../db/repositories/notifications.js';
import { NotificationPartitionsRepository, PartitionsRepository } from '../db/repositories/partitions.js';
import { StatsRepository } from '../db/repositories/stats.js';
import { TableStatisticsRepository } from '../db/repositories/table-statistics.js';
import { TemplatesRepository } from '../db/repositories/templates.js';
import { TemplateVariablesRepository } from '../db/repositories/template-variables.js';
import { UninstalledRepository } from '../db/repositories/uninstalled.js';
import { WebhooksRepository } from '../db/repositories/webhooks.js';
import type { Clock } from '../platform/clock.js';
import { IdempotencyKeys } from './idempotency.js';

/** The repositories the services read and write through: stateless, so one of each serves the whole process. */
export interface Repositories {
  abTests: AbTestsRepository;
  activity: ActivityRepository;
  apiKeys: ApiKeysRepository;
  apps: AppsRepository;
  audiences: AudiencesRepository;
  audit: AuditRepository;
  conversions: ConversionsRepository;
  batches: BatchesRepository;
  deliverableDevices: DeliverableDevicesRepository;
  devices: DevicesRepository;
  events: EventsRepository;
  fanout: FanoutRepository;
  frequencyCaps: FrequencyCapsRepository;
  journeys: JourneysRepository;
  journeyEntrants: JourneyEntrantsRepository;
  journeyDevices: JourneyDevicesRepository;
  journeyEvents: JourneyEventsRepository;
  leases: LeasesRepository;
  liveActivities: LiveActivitiesRepository;
  messagePartitions: MessagePartitionsRepository;
  messages: MessagesRepository;
  newDevices: NewDevicesRepository;
  tokenReads: TokenReadsRepository;
  notificationPartitions: NotificationPartitionsRepository;
  notifications: NotificationsRepository;
  partitions: PartitionsRepository;
  stats: StatsRepository;
  tableStatistics: TableStatisticsRepository;
  templates: TemplatesRepository;
  templateVariables: TemplateVariablesRepository;
  uninstalled: UninstalledRepository;
  webhooks: WebhooksRepository;
}

export function createRepositories(): Repositories {
  return {
    abTests: new AbTestsRepository(),
    activity: new ActivityRepository(),
    apiKeys: new ApiKeysRepository(),
    apps: new AppsRepository(),
    audiences: new AudiencesRepository(),
    audit: new AuditRepository(),
    conversions: new ConversionsRepository(),
    batches: new BatchesRepository(),
    deliverableDevices: new DeliverableDevicesRepository(),
    devices: new DevicesRepository(),
    events: new EventsRepository(),
    fanout: new FanoutRepository(),
    frequencyCaps: new FrequencyCapsRepository(),
    journeys: new JourneysRepository(),
    journeyEntrants: new JourneyEntrantsRepository(),
    journeyDevices: new JourneyDevicesRepository(),
    journeyEvents: new JourneyEventsRepository(),
    leases: new LeasesRepository(),
    liveActivities: new LiveActivitiesRepository(),
    messagePartitions: new MessagePartitionsRepository(),
    messages: new MessagesRepository(),
    newDevices: new NewDevicesRepository(),
    tokenReads: new TokenReadsRepository(),
    notificationPartitions: new NotificationPartitionsRepository(),
    notifications: new NotificationsRepository(),
    partitions: new PartitionsRepository(),
    stats: new StatsRepository(),
    tableStatistics: new TableStatisticsRepository(),
    templates: new TemplatesRepository(),
    templateVariables: new TemplateVariablesRepository(),
    uninstalled: new UninstalledRepository(),
    webhooks: new WebhooksRepository(),
  };
}

/**
 * What the services share, built once by the composition root (`src/app/context.ts`): each service's constructor
 * takes one object, the `Pick` of these it uses and what is its own.
 */
export interface ServiceDeps {
  /** the primary: writes, transactions, reads by id and keys */
  db: Db;
  /** the reads that need not see the caller's own writes: a replica while it keeps up, else the primary */
  readDb: Db;
  repos: Repositories;
  clock: Clock;
  idempotency: IdempotencyKeys;
}

/** The shared part on one database (its primary read for everything), with the process's repositories. */
export function serviceDeps(db: Db, clock: Clock, readDb: Db = db, repos: Repositories = createRepositories()): ServiceDeps {
  return { db, readDb, repos, clock, idempotency: new IdempotencyKeys(new IdempotencyRepository()) };
}
