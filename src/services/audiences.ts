import type { Db } from '../db/database.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { Audience } from '../db/schema.js';
import { decodeCursor, encodeCursor, FIRST_ID, isUuid } from '../domain/cursor.js';
import { NotFoundError } from '../domain/errors.js';
import type { Filter } from '../domain/filters.js';
import type { DeviceDetails, DeviceService } from './devices.js';
import type { ServiceDeps } from './deps.js';
import type { Clock } from '../platform/clock.js';

export type AudienceServiceDeps = Pick<ServiceDeps, 'db' | 'readDb' | 'repos' | 'clock'> & {
  /** the devices' details, for an audience's device pages */
  deviceService: DeviceService;
};

/**
 * Audiences as the API reads them: stored ones, their device counts and device pages, and the count of an
 * on-the-fly filter list. Which devices match is decided in one place, the devices repository's audience SQL.
 */
export class AudienceService {
  private readonly db: Db;
  /** counts and device pages: a replica while it keeps up (they need not see the caller's own writes) */
  private readonly readDb: Db;
  private readonly audiences: AudiencesRepository;
  private readonly devices: DevicesRepository;
  private readonly deviceDetails: DeviceService;
  private readonly clock: Clock;

  constructor(deps: AudienceServiceDeps) {
    this.clock = deps.clock;
    this.db = deps.db;
    this.readDb = deps.readDb;
    this.audiences = deps.repos.audiences;
    this.devices = deps.repos.devices;
    this.deviceDetails = deps.deviceService;
  }

  list(appId: string, page: { per: number; page: number }): Promise<Audience[]> {
    return this.audiences.listForApp(this.db, appId, page.per, (page.page - 1) * page.per);
  }

  async get(appId: string, id: string): Promise<Audience> {
    const audience = await this.audiences.findForApp(this.db, appId, id);
    if (!audience) throw new NotFoundError('audience');
    return audience;
  }

  /** How many devices the filters select now (null or an empty list: every device of the app). */
  count(appId: string, filters: Filter[] | null, now = this.clock.now()): Promise<number> {
    return this.devices.countAudience(this.readDb, appId, filters?.length ? filters : null, { now });
  }

  /**
   * One page of an audience's devices with their details, the total, and the cursor of the next page. Every page
   * has a cursor: an empty one keeps the position it was asked for, so clients that page until no devices come
   * back stop there.
   */
  async devicesPage(
    appId: string,
    audienceId: string,
    opts: { cursor?: string; per: number; now?: Date },
  ): Promise<{ devices: DeviceDetails[]; total: number; cursor: string }> {
    const audience = await this.get(appId, audienceId);
    const listing = `audience:${audience.id}`;
    let afterId: string | null = null;
    if (opts.cursor !== undefined && opts.cursor !== '') {
      const position = decodeCursor(opts.cursor, listing, 1);
      if (!position || !isUuid(position[0]!)) throw new NotFoundError('cursor');
      afterId = position[0]!;
    }
    const now = opts.now ?? this.clock.now();
    const [rows, total] = await Promise.all([
      this.devices.listAudience(this.readDb, appId, audience.filters, { afterId, limit: opts.per, now }),
      this.devices.countAudience(this.readDb, appId, audience.filters, { now }),
    ]);
    return {
      devices: await this.deviceDetails.detailsOf(rows),
      total,
      cursor: encodeCursor(listing, [rows.at(-1)?.id ?? afterId ?? FIRST_ID]),
    };
  }
}
