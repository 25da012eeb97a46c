import type { Db } from '../db/database.js';
import { AbTestsRepository } from '../db/repositories/ab-tests.js';
import { ActivityRepository } from '../db/repositories/activity.js';
import { AppsRepository } from '../db/repositories/apps.js';
import { AudiencesRepository } from '../db/repositories/audiences.js';
import { ConversionsRepository } from '../db/repositories/conversions.js';
import { DeliveryRepository } from '../db/repositories/delivery.js';
import { DevicesRepository } from '../db/repositories/devices.js';
import { EventsRepository } from '../db/repositories/events.js';
import { IdempotencyRepository } from '../db/repositories/idempotency.js';
import { JourneysRepository } from '../db/repositories/journeys.js';
import { JourneyEntrantsRepository } from '../db/repositories/journey-entrants.js';
import { JourneyDevicesRepository } from '../db/repositories/journey-devices.js';
import { LiveActivitiesRepository } from '../db/repositories/live-activities.js';
import { MessagesRepository } from '../db/repositories/messages.js';
import { NotificationsRepository } from '../db/repositories/notifications.js';
import { StatsRepository } from '../db/repositories/stats.js';
import { TemplatesRepository } from '../db/repositories/templates.js';
import { UninstalledRepository } from '../db/repositories/uninstalled.js';
import type { Clock } from '../platform/clock.js';
import { IdempotencyKeys } from './idempotency.js';

/** The repositories the services read and write through: stateless, so one of each serves the whole process. */
export interface Repositories {
  abTests: AbTestsRepository;
  activity: ActivityRepository;
  apps: AppsRepository;
  audiences: AudiencesRepository;
  conversions: ConversionsRepository;
  delivery: DeliveryRepository;
  devices: DevicesRepository;
  events: EventsRepository;
  journeys: JourneysRepository;
  journeyEntrants: JourneyEntrantsRepository;
  journeyDevices: JourneyDevicesRepository;
  liveActivities: LiveActivitiesRepository;
  messages: MessagesRepository;
  notifications: NotificationsRepository;
  stats: StatsRepository;
  templates: TemplatesRepository;
  uninstalled: UninstalledRepository;
}

export function createRepositories(): Repositories {
  return {
    abTests: new AbTestsRepository(),
    activity: new ActivityRepository(),
    apps: new AppsRepository(),
    audiences: new AudiencesRepository(),
    conversions: new ConversionsRepository(),
    delivery: new DeliveryRepository(),
    devices: new DevicesRepository(),
    events: new EventsRepository(),
    journeys: new JourneysRepository(),
    journeyEntrants: new JourneyEntrantsRepository(),
    journeyDevices: new JourneyDevicesRepository(),
    liveActivities: new LiveActivitiesRepository(),
    messages: new MessagesRepository(),
    notifications: new NotificationsRepository(),
    stats: new StatsRepository(),
    templates: new TemplatesRepository(),
    uninstalled: new UninstalledRepository(),
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

/** The shared part on one database (its primary read for everything), with the system's repositories. */
export function serviceDeps(db: Db, clock: Clock, readDb: Db = db): ServiceDeps {
  const repos = createRepositories();
  return { db, readDb, repos, clock, idempotency: new IdempotencyKeys(new IdempotencyRepository()) };
}
