import { sql } from 'kysely';
import type { Db } from '../database.js';
import { compileFilters } from '../filter-sql.js';
import type { Platform } from '../schema.js';
import type { Filter } from '../../domain/filters.js';
import {
  deliverablePageQuery,
  deliverableNowQuery,
  keyedLookups,
  inZones,
  type Deliverable,
  type DeliverableNow,
  type DeliverablePageSpec,
  type DeliverableGroups,
  type AudiencePage,
  type ZoneSlice,
} from './device-queries.js';

export type { Deliverable, DeliverableGroups, DeliverableNow, ZoneSlice, DeliverablePageSpec } from './device-queries.js';

/**
 * The devices a notification can be sent to, as its delivery reads them: an audience's in keyset pages (the
 * fan-out), a few audiences' at once (unicast creation), how many fall in some zones (a local-time send).
 */
export class DeliverableDevicesRepository {
  /**
   * One keyset page of an audience's devices that can receive a push, in id order (the fan-out); `visible`: the
   * push shows something (`isVisiblePush`), which a device whose notifications are Disabled is not sent.
   */
  async pageDeliverable(db: Db, appId: string, filters: Filter[] | null, page: DeliverablePageSpec): Promise<Deliverable[]> {
    return deliverablePageQuery(db, appId, filters, page).execute();
  }

  /**
   * `pageDeliverable` as a fan-out cuts it: the sendable devices' ids grouped by the gateway they need, each group's
   * in id order as one joined text, so that a page of 10,000 devices comes back as a few rows, not 10,000 rows
   * each parsed into an object.
   */
  async pageDeliverableGroups(db: Db, appId: string, filters: Filter[] | null, page: DeliverablePageSpec): Promise<DeliverableGroups> {
    const tokensOf = page.liveActivity ? [] : (page.tokensOf ?? []);
    const q = deliverablePageQuery(db, appId, filters, page).$if(tokensOf.length > 0, (qb) => qb.select('d.token'));
    // a token is printable ASCII without spaces (device-input.ts)
    const tokens = tokensOf.length
      ? sql`case when p.not_allowed or not p.platform = any(${tokensOf}::text[]) then null else string_agg(p.token, ' ' order by p.id) end`
      : sql`null::text`;
    // uuids as text compare in their own order only byte by byte (collation "C")
    const { rows } = await sql<{
      platform: Platform;
      development: boolean;
      not_allowed: boolean;
      n: number;
      ids: string | null;
      tokens: string | null;
      last: string;
    }>`
      select p.platform, p.development, p.not_allowed, count(*)::int as n, max(p.id::text collate "C") as last,
        case when p.not_allowed then null else string_agg(p.id::text, ',' order by p.id) end as ids,
        ${tokens} as tokens
      from (${q}) as p
      group by p.platform, p.development, p.not_allowed
      order by p.platform, p.development`.execute(db);
    const out: DeliverableGroups = { read: 0, last: null, notAllowed: 0, groups: [] };
    for (const r of rows) {
      out.read += r.n;
      if (out.last === null || r.last > out.last) out.last = r.last;
      if (r.not_allowed) out.notAllowed += r.n;
      else
        out.groups.push({
          platform: r.platform,
          development: r.development,
          ids: r.ids!.split(','),
          ...(r.tokens !== null && { tokens: r.tokens.split(' ') }),
        });
    }
    return out;
  }

  /**
   * `pageDeliverable` with each device's token as read now, for a page sent as soon as it is stored (a fan-out's
   * first); not for a Live Activity, whose pushes go to its own tokens.
   */
  async pageDeliverableNow(
    db: Db,
    appId: string,
    filters: Filter[] | null,
    page: AudiencePage & { visible: boolean },
  ): Promise<DeliverableNow[]> {
    return (await deliverableNowQuery(db, appId, filters, page, page.visible).execute()) as DeliverableNow[];
  }

  /**
   * The first `limit` deliverable devices of each of several audiences: one list per audience, in the order given
   * (`pageDeliverable` from the start, for many small audiences at once). Audiences that only name devices or
   * users (`namedKeys`, most notifications) are looked up by key in one statement whose text does not grow with
   * their number; the others as one query of their compiled filters.
   */
  async deliverableOfEach(
    db: Db,
    audiences: { appId: string; filters: Filter[] | null; visible: boolean }[],
    page: { limit: number; now: Date },
  ): Promise<DeliverableNow[][]> {
    const lists: DeliverableNow[][] = audiences.map(() => []);
    const { lookups, compiled } = keyedLookups(audiences, page.limit);
    if (lookups.length) {
      const { rows } = await sql<DeliverableNow & { ord: number }>`${sql.join(lookups, sql` union all `)}`.execute(db);
      // keys are distinct and a device has one user: no device comes twice for one audience
      const found = new Set<number>();
      for (const { ord, ...device } of rows) {
        lists[ord]!.push(device);
        found.add(ord);
      }
      // as the compiled query pages: by id, the first `limit` (several keys may each bring up to `limit`)
      for (const ord of found) lists[ord] = lists[ord]!.sort((a, b) => (a.id < b.id ? -1 : 1)).slice(0, page.limit);
    }
    if (compiled.length) {
      const parts = compiled.map((ord) => {
        const a = audiences[ord]!;
        const q = deliverableNowQuery(db, a.appId, a.filters, { afterId: null, ...page }, a.visible);
        return sql`select ${ord}::int as ord, q.* from (${q}) as q`;
      });
      const { rows } = await sql<DeliverableNow & { ord: number }>`${sql.join(parts, sql` union all `)}`.execute(db);
      for (const { ord, ...device } of rows) lists[ord]!.push(device);
    }
    return lists;
  }

  /** How many of an audience's devices that can receive a push are in the zones (those a local-time send skips). */
  async countDeliverableIn(db: Db, appId: string, filters: Filter[] | null, now: Date, zones: ZoneSlice): Promise<number> {
    const row = await db
      .selectFrom('devices as d')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('d.app_id', '=', appId)
      .where('d.erased_at', 'is', null)
      .where('d.token', 'is not', null)
      .where('d.token_invalidated_at', 'is', null)
      .where(compileFilters(filters, { now }))
      .where(inZones(zones))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }
}
