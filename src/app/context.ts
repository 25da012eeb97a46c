import type { Config } from '../platform/config.js';
import type { Db } from '../db/database.js';
import { ApiKeysRepository, AppsRepository } from '../db/repositories/apps.js';
import { AudiencesRepository } from '../db/repositories/audiences.js';
import { DevicesRepository } from '../db/repositories/devices.js';
import { EventsRepository } from '../db/repositories/events.js';
import { NotificationsRepository } from '../db/repositories/notifications.js';
import { StatsRepository } from '../db/repositories/stats.js';
import { UninstalledRepository } from '../db/repositories/uninstalled.js';
import { createGeoIp } from '../platform/geoip.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import type { JobQueues } from '../queue/queues.js';
import { AudienceService } from '../services/audiences.js';
import { DeviceService } from '../services/devices.js';
import type { NotificationScheduler } from '../queue/jobs.js';
import { NotificationService } from '../services/notifications.js';

/** Everything a request handler or job may need, built once at start-up and passed explicitly. */
export interface AppContext {
  config: Config;
  log: Logger;
  db: Db;
  queues: JobQueues;
  metrics: Metrics;
  repos: {
    apps: AppsRepository;
    keys: ApiKeysRepository;
    audiences: AudiencesRepository;
    notifications: NotificationsRepository;
    devices: DevicesRepository;
    uninstalled: UninstalledRepository;
    events: EventsRepository;
    stats: StatsRepository;
  };
  services: {
    notifications: NotificationService;
    devices: DeviceService;
    audiences: AudienceService;
  };
}

export function createContext(
  config: Config,
  log: Logger,
  db: Db,
  queues: JobQueues,
  scheduler: NotificationScheduler,
  metrics: Metrics,
): AppContext {
  const repos = {
    apps: new AppsRepository(),
    keys: new ApiKeysRepository(),
    audiences: new AudiencesRepository(),
    notifications: new NotificationsRepository(),
    devices: new DevicesRepository(),
    uninstalled: new UninstalledRepository(),
    events: new EventsRepository(),
    stats: new StatsRepository(),
  };
  const notifications = new NotificationService(db, repos.audiences, repos.notifications, scheduler, (err, id) =>
    log.warn({ err, notificationId: id }, 'enqueue failed after commit; the sweeper will re-enqueue'),
  );
  const devices = new DeviceService(db, repos.devices, repos.events, createGeoIp(config.GEOIP_DB_PATH, log));
  const audiences = new AudienceService(db, repos.audiences, repos.devices, devices);
  return { config, log, db, queues, metrics, repos, services: { notifications, devices, audiences } };
}
