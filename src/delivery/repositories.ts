import type { AbTestsRepository } from '../db/repositories/ab-tests.js';
import type { AppsRepository } from '../db/repositories/apps.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { BatchesRepository } from '../db/repositories/batches.js';
import type { DeliverableDevicesRepository } from '../db/repositories/deliverable-devices.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { FanoutRepository } from '../db/repositories/fanout.js';
import type { FrequencyCapsRepository } from '../db/repositories/frequency-caps.js';
import type { JourneyDevicesRepository } from '../db/repositories/journey-devices.js';
import type { JourneyEntrantsRepository } from '../db/repositories/journey-entrants.js';
import type { LeasesRepository } from '../db/repositories/leases.js';
import type { MessagePartitionsRepository } from '../db/repositories/message-partitions.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { NotificationPartitionsRepository, PartitionsRepository } from '../db/repositories/partitions.js';
import type { TableStatisticsRepository } from '../db/repositories/table-statistics.js';
import type { TemplateVariablesRepository } from '../db/repositories/template-variables.js';
import type { WebhooksRepository } from '../db/repositories/webhooks.js';

/** The repositories the delivery layer reads and writes through, built once by the composition root. */
export interface DeliveryRepositories {
  abTests: AbTestsRepository;
  apps: AppsRepository;
  audiences: AudiencesRepository;
  batches: BatchesRepository;
  deliverableDevices: DeliverableDevicesRepository;
  devices: DevicesRepository;
  fanout: FanoutRepository;
  frequencyCaps: FrequencyCapsRepository;
  /** the devices' zones and activity by local hour, which a best-time send reads as a journey's delay does */
  journeyDevices: JourneyDevicesRepository;
  journeyEntrants: JourneyEntrantsRepository;
  leases: LeasesRepository;
  messagePartitions: MessagePartitionsRepository;
  notificationPartitions: NotificationPartitionsRepository;
  notifications: NotificationsRepository;
  partitions: PartitionsRepository;
  tableStatistics: TableStatisticsRepository;
  /** what a notification's templates render with: its devices' attributes, the app's custom variables */
  templateVariables: TemplateVariablesRepository;
  webhooks: WebhooksRepository;
}
