import type { Db } from '../db/database.js';
import type { DeviceGroupStats, PushDay, StatsRepository } from '../db/repositories/stats.js';

/** App-wide figures the dashboards read: devices by group, tokens uninstalled, pushes per day. */
export class StatsService {
  constructor(
    private readonly db: Db,
    private readonly stats: StatsRepository,
    /** every figure here: a replica while it keeps up */
    private readonly readDb: Db = db,
  ) {}

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
