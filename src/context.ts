import type { Config } from './config.js';
import type { Db } from './db/database.js';
import { ApiKeysRepository, AppsRepository } from './db/repositories/apps.js';
import { AudiencesRepository } from './db/repositories/audiences.js';
import { DevicesRepository } from './db/repositories/devices.js';
import { NotificationsRepository } from './db/repositories/notifications.js';
import { UninstalledRepository } from './db/repositories/uninstalled.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import type { JobQueues } from './queue/queues.js';
import { NotificationService, type NotificationScheduler } from './services/notifications.js';

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
  };
  services: {
    notifications: NotificationService;
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
    apps: new AppsRepository(db),
    keys: new ApiKeysRepository(db),
    audiences: new AudiencesRepository(db),
    notifications: new NotificationsRepository(db),
    devices: new DevicesRepository(db),
    uninstalled: new UninstalledRepository(db),
  };
  const notifications = new NotificationService(db, repos.audiences, repos.notifications, scheduler, (err, id) =>
    log.warn({ err, notificationId: id }, 'enqueue failed after commit; the sweeper will re-enqueue'),
  );
  return { config, log, db, queues, metrics, repos, services: { notifications } };
}
