import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Logger } from '../logger.js';
import type { NotificationScheduler } from '../services/notifications.js';
import type { JobQueues } from './queues.js';

export interface Pipeline {
  scheduler: NotificationScheduler;
  close(): Promise<void>;
}

/** The delivery pipeline: enqueue on create; with workers on, fan-out and delivery (issue 4). */
export function startPipeline(_config: Config, _log: Logger, _db: Db, queues: JobQueues, _opts: { workers: boolean }): Pipeline {
  const scheduler: NotificationScheduler = {
    async schedule(notificationId, generation) {
      await queues.add('fanout', { notificationId, generation }, { jobId: `${notificationId}-${generation}`, removeOnComplete: 1000, removeOnFail: 5000 });
    },
  };
  return { scheduler, close: async () => undefined };
}
