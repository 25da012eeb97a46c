import type { Db } from '../db/database.js';
import type { AbTestsRepository } from '../db/repositories/ab-tests.js';
import type { AppsRepository } from '../db/repositories/apps.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { BatchesRepository } from '../db/repositories/batches.js';
import type { DeliverableDevicesRepository } from '../db/repositories/deliverable-devices.js';
import type { FanoutRepository } from '../db/repositories/fanout.js';
import type { JourneyDevicesRepository } from '../db/repositories/journey-devices.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { DirectDelivery } from './direct-delivery.js';
import type { JobQueues } from './queues.js';

/** What the fan-out jobs (a notification's and its ranges') need. */
export interface FanoutDeps {
  db: Db;
  log: Logger;
  queues: JobQueues;
  notifications: NotificationsRepository;
  audiences: AudiencesRepository;
  deliverableDevices: DeliverableDevicesRepository;
  batches: BatchesRepository;
  fanout: FanoutRepository;
  apps: AppsRepository;
  clock: Clock;
  pageSize: number;
  batchSize: number;
  /** FANOUT_RANGE_DEVICES: a broadcast larger than this is split into ranges of about so many devices */
  rangeDevices: number;
  /** sends a fan-out's first page, and its multicast batches, from the job that stored them, without the queue */
  direct: Pick<DirectDelivery, 'take' | 'sendInTurn'>;
  abTests: AbTestsRepository;
  /** a best-time send's devices' zones and activity */
  journeyDevices: JourneyDevicesRepository;
}
