import { CompiledQuery, sql } from 'kysely';
import type { Db } from '../database.js';
import type { Device, DeviceUpdate } from '../schema.js';
import { deviceAndAttributes, tokenKey, type AttributeColumns, type DeviceAttributeRow } from './device-queries.js';
import { jsonReady, wellFormed } from './new-devices.js';

/** A registration's read of the device holding its token: what it would set, and a country for a device with none. */
export interface TokenLookup {
  appId: string;
  token: string;
  set: DeviceUpdate;
  fillCountry: string | null;
}

/** The device holding a looked-up token, whether the lookup's set would change it and, when not, its attributes. */
export interface FoundByToken {
  device: Device;
  changes: boolean;
  attributes: DeviceAttributeRow[];
}

/**
 * The devices of registrations that arrived together, read by one statement instead of two each (the device, then its
 * attributes): phones registering again as they are are most of an app's registrations, and each statement cost
 * PostgreSQL a round trip, a parse of its parameters and a socket write in the service.
 */
export class TokenReadsRepository {
  private statement: string | null = null;

  /**
   * Each lookup's device (undefined: none holds its token), read without a lock, with whether its set would change it
   * as `DevicesRepository.updateLocked` decides: the stored row with the set's columns put in (typed by
   * jsonb_populate_record as the columns type them) is distinct from the stored row in a column. `fillCountry` is the
   * country only where there is none. The attributes of a device its set would not change, in `attributesOf`'s order.
   */
  async readTokens(db: Db, lookups: readonly TokenLookup[]): Promise<(FoundByToken | undefined)[]> {
    const rows = lookups.map((l, ord) => ({
      ord,
      app_id: l.appId,
      key: tokenKey(l.token),
      token: wellFormed(l.token),
      set: jsonReady(l.set),
      fill: l.set.country === undefined ? l.fillCountry : null,
    }));
    const query = CompiledQuery.raw((this.statement ??= tokenReads().compile(db).sql), [JSON.stringify(rows)]);
    const { rows: found } = await db.executeQuery<Device & Partial<AttributeColumns> & { pushd_ord: number; pushd_changes: boolean }>(
      query,
    );
    const byLookup = new Map<number, { changes: boolean; joined: (Device & AttributeColumns)[] }>();
    for (const { pushd_ord: ord, pushd_changes: changes, ...row } of found) {
      const seen = byLookup.get(ord) ?? { changes, joined: [] };
      seen.joined.push(row as Device & AttributeColumns);
      byLookup.set(ord, seen);
    }
    return lookups.map((_, ord) => {
      const seen = byLookup.get(ord);
      if (!seen) return undefined;
      const { device, attributes } = deviceAndAttributes(seen.joined);
      return { device, changes: seen.changes, attributes: seen.joined[0]!.a_name == null ? [] : attributes };
    });
  }
}

/**
 * The lookups from the JSON ($1), each joined to the device of its token by the unique index of (app_id, its token's
 * key), and, where its set would change nothing, to that device's attributes. Each device and its attributes are read
 * in subqueries the planner keeps (offset 0), so by an index probe a lookup: joined plainly, a table of a few thousand
 * devices was hashed whole, its token keys computed for every row. Whether the set changes the device is kept the same
 * way, so it is computed once a device rather than once an attribute row.
 */
function tokenReads() {
  return sql`
    select d.*, l.ord as pushd_ord, c.changes as pushd_changes,
      a.name as a_name, a.type as a_type, a.position as a_position, a.is_array as a_is_array,
      a.str_value as a_str_value, a.num_value as a_num_value, a.date_value as a_date_value, a.bool_value as a_bool_value
    from jsonb_to_recordset(${sql.raw('$1')}::jsonb) as l(ord int4, app_id uuid, key uuid, token text, set jsonb, fill text)
    cross join lateral (
      select * from devices
      where devices.app_id = l.app_id and pushd_token_key(devices.token) = l.key and devices.token = l.token
      offset 0
    ) as d
    cross join lateral (
      select jsonb_populate_record(d, l.set || case when l.fill is null then '{}'::jsonb
                                                    else jsonb_build_object('country', coalesce(d.country, l.fill)) end)
             is distinct from d as changes
      offset 0
    ) as c
    left join lateral (select * from device_attributes where not c.changes and device_id = d.id offset 0) as a on true
    order by l.ord, a.name, a.position`;
}
