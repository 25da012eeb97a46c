import { sql } from 'kysely';
import type { Db } from '../database.js';
import { CAP_WINDOWS, LONGEST_CAP_WINDOW, type FrequencyCap } from '../../domain/frequency-caps.js';

/** The SQL of frequency caps: each device's last pushes (`device_cap_sends`). */
export class FrequencyCapsRepository {
  /**
   * Takes a slot of the caps for each device that has one left in all of them (fewer than `limit` of its pushes in
   * the last `window`), and answers those devices; the others are at a cap. One upsert: each device's row keeps
   * its last pushes (as many as the largest cap), is locked in device order, and is tested and appended to on the
   * version the lock gives, so notifications racing for a device's last slot see each other: one gets it.
   */
  async takeCapSlots(db: Db, caps: FrequencyCap[], deviceIds: string[], now: Date): Promise<Set<string>> {
    if (!deviceIds.length || !caps.length) return new Set(deviceIds);
    const secs = caps.map((c) => CAP_WINDOWS[c.window]);
    const limits = caps.map((c) => c.limit);
    const kept = Math.max(...limits);
    const { rows } = await sql<{ device_id: string }>`
      with caps as (select * from unnest(${secs}::int[], ${limits}::int[]) as w(secs, lim))
      insert into device_cap_sends as s (device_id, sent_at, last_sent_at)
      select d.id, array[${now}::timestamptz], ${now}::timestamptz
      from unnest(${[...new Set(deviceIds)]}::uuid[]) as d(id)
      order by d.id
      on conflict (device_id) do update
      set sent_at = array(select t from unnest(s.sent_at || excluded.last_sent_at) as t order by t desc limit ${kept}::int),
          last_sent_at = greatest(s.last_sent_at, excluded.last_sent_at)
      where not exists (
        select 1 from caps w
        where (select count(*) from unnest(s.sent_at) as t where t > excluded.last_sent_at - make_interval(secs => w.secs)) >= w.lim)
      returning s.device_id`.execute(db);
    return new Set(rows.map((r) => r.device_id));
  }

  /** Forgets the devices whose last push left the longest cap window before `before`; answers how many went. */
  async purgeCapSends(db: Db, before: Date, limit: number): Promise<number> {
    const r = await sql`
      delete from device_cap_sends
      where device_id in (
        select device_id from device_cap_sends
        where last_sent_at <= ${before}::timestamptz - make_interval(secs => ${LONGEST_CAP_WINDOW}::int)
        limit ${limit}::int)`.execute(db);
    return Number(r.numAffectedRows ?? 0);
  }
}
