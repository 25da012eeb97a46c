import type { Db } from '../db/database.js';
import type { DeviceGroupStats, PushDay, StatsRepository } from '../db/repositories/stats.js';

/** App-wide figures the dashboards read: devices by group, tokens uninstalled, pushes per day. */
export class StatsService {
  constructor(
    private readonly db: Db,
    private readonly stats: StatsRepository,
  ) {}

  async devices(appId: string, uninstalledWindowDays: number): Promise<{ groups: DeviceGroupStats[]; uninstalled: number }> {
    const [groups, uninstalled] = await Promise.all([
      this.stats.deviceGroups(this.db, appId),
      this.stats.uninstalledSince(this.db, appId, uninstalledWindowDays),
    ]);
    return { groups, uninstalled };
  }

  pushesPerDay(appId: string, days: number): Promise<PushDay[]> {
    return this.stats.pushesPerDay(this.db, appId, days);
  }
}
