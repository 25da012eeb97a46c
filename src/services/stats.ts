import type { Db } from '../db/database.js';
import type { DeviceGroupStats, PushDay, StatsRepository } from '../db/repositories/stats.js';
import type { ServiceDeps } from './deps.js';

export type StatsServiceDeps = Pick<ServiceDeps, 'db' | 'readDb' | 'repos'>;

/** App-wide figures the dashboards read: devices by group, tokens uninstalled, pushes per day. */
export class StatsService {
  private readonly db: Db;
  /** every figure here: a replica while it keeps up */
  private readonly readDb: Db;
  private readonly stats: StatsRepository;

  constructor(deps: StatsServiceDeps) {
    this.db = deps.db;
    this.readDb = deps.readDb;
    this.stats = deps.repos.stats;
  }

  async devices(appId: string, uninstalledWindowDays: number): Promise<{ groups: DeviceGroupStats[]; uninstalled: number }> {
    const [groups, uninstalled] = await Promise.all([
      this.stats.deviceGroups(this.readDb, appId),
      this.stats.uninstalledSince(this.readDb, appId, uninstalledWindowDays),
    ]);
    return { groups, uninstalled };
  }

  pushesPerDay(appId: string, days: number): Promise<PushDay[]> {
    return this.stats.pushesPerDay(this.readDb, appId, days);
  }
}
