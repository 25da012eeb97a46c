import { sql } from 'kysely';
import type { Db } from '../database.js';
import type { FanoutRangeRow } from '../schema.js';
import type { NewBatch } from '../../domain/batches.js';
import { PROGRESS_TOUCH_SECONDS, storeBatches } from './batches.js';

/** The devices targeted by notification `n`'s fan-out ranges (its own devices_targeted holds the rest); `n` is one of `ids`. */
export const rangesTargeted = (ids: string[]) =>
  sql<number>`coalesce((
    select sum(r.devices_targeted) from fanout_ranges r
    where r.notification_id = n.id and r.notification_id = any(${ids}::uuid[])
  ), 0)`;

/** A range's batches take seq numbers from (range + 1) × this; those fanned out before the split stay below it. */
export const RANGE_SEQ_STRIDE = 1_000_000;

/** A fan-out range (migration 029), as its job reads it. */
export type FanoutRange = Pick<FanoutRangeRow, 'range_no' | 'cursor_id' | 'up_to_id' | 'next_seq' | 'done'>;

/** The SQL of a broadcast's fan-out: its checkpoints, its ranges (`fanout_ranges`) and its pacing. */
export class FanoutRepository {
  /**
   * Stores the batches cut from one page and moves the fan-out checkpoint past it, atomically: a fan-out
   * that dies and runs again resumes after the last stored page and recreates no batch. One statement,
   * so the notification row (which every batch's results also update) is locked only while it runs.
   */
  async saveFanoutPage(
    db: Db,
    notificationId: string,
    generation: number,
    batches: NewBatch[],
    page: { cursor: string; nextSeq: number; targeted: number; notAllowed: number; holdout?: string[]; at?: Date },
  ): Promise<boolean> {
    const insert = storeBatches(notificationId, generation, batches);
    const holdout = page.holdout ?? [];
    // an A/B test's holdout devices of the page, met now: only when `moved` (a page stored again adds none)
    const holdoutInsert = holdout.length
      ? sql`, held_out as (
          insert into ab_holdout_devices (notification_id, device_id, since)
          select ${notificationId}::uuid, h.id, ${page.at ?? new Date()}::timestamptz
          from unnest(string_to_array(${holdout.join(',')}, ',')::uuid[]) as h(id)
          where exists (select 1 from moved)
          on conflict do nothing)`
      : sql``;
    const { rows: result } = await sql<{ moved: number }>`
      with moved as (
        update notifications
        set fanout_cursor = ${page.cursor}::uuid, fanout_seq = ${page.nextSeq}::int,
          devices_targeted = devices_targeted + ${page.targeted}::int,
          devices_not_allowed = devices_not_allowed + ${page.notAllowed}::int, ab_holdout = ab_holdout + ${holdout.length}::int,
          updated_at = now()
        -- from the checkpoint this run read: a second run of the same fan-out (its job handed on while the first
        -- still ran) stops at its next page instead of sending the rest again
        where id = ${notificationId}::uuid and generation = ${generation}::int and state <> 'canceled'
          and fanout_seq = ${page.nextSeq - batches.length}::int
        returning 1)
      ${insert}${holdoutInsert}
      select count(*)::int as moved from moved`.execute(db);
    return (result[0]?.moved ?? 0) > 0; // 0: superseded by a newer generation, or canceled
  }

  /**
   * Cuts the rest of a notification's audience into ranges of the device id space (`bounds`: each after its
   * exclusive lower bound, up to its inclusive upper one, null for the end), whose jobs fan out at once on any
   * worker; atomically with marking it split (fanout_seq moves to RANGE_SEQ_STRIDE, above the seq of every batch
   * it cut itself), so a fan-out that runs again finds these ranges instead of cutting others. False when
   * superseded or canceled, or when it was split before.
   */
  async splitFanout(
    db: Db,
    notificationId: string,
    generation: number,
    bounds: { after: string; upTo: string | null }[],
  ): Promise<boolean> {
    const { rows } = await sql<{ split: number }>`
      with split as (
        update notifications
        set fanout_seq = ${RANGE_SEQ_STRIDE}::int, updated_at = now()
        where id = ${notificationId}::uuid and generation = ${generation}::int and state <> 'canceled'
          and fanout_seq < ${RANGE_SEQ_STRIDE}::int
        returning 1),
      ranges as (
        insert into fanout_ranges (notification_id, generation, range_no, cursor_id, up_to_id, next_seq)
        select ${notificationId}::uuid, ${generation}::int, r.no - 1, r.after, r.up_to, r.no * ${RANGE_SEQ_STRIDE}::int
        from unnest(${bounds.map((b) => b.after)}::uuid[], ${bounds.map((b) => b.upTo)}::uuid[]) with ordinality as r(after, up_to, no)
        where exists (select 1 from split)
        on conflict do nothing)
      select count(*)::int as split from split`.execute(db);
    return (rows[0]?.split ?? 0) > 0;
  }

  /** The fan-out ranges of a notification's generation (none unless it was split), in order. */
  async rangesOf(db: Db, notificationId: string, generation: number, rangeNo?: number): Promise<FanoutRange[]> {
    return db
      .selectFrom('fanout_ranges')
      .select(['range_no', 'cursor_id', 'up_to_id', 'next_seq', 'done'])
      .where('notification_id', '=', notificationId)
      .where('generation', '=', generation)
      .$if(rangeNo !== undefined, (q) => q.where('range_no', '=', rangeNo!))
      .orderBy('range_no')
      .execute();
  }

  /**
   * `saveFanoutPage` for a page of one range: its batches and its checkpoint, atomically, without writing the
   * notification's row (ranges fanned out at once would queue on its lock); the notification is only read, so
   * one canceled or superseded meanwhile stores nothing. Its updated_at (progress, for the sweeper) is touched
   * at most every PROGRESS_TOUCH_SECONDS.
   */
  async saveRangePage(
    db: Db,
    range: { notificationId: string; generation: number; rangeNo: number },
    batches: NewBatch[],
    page: { cursor: string; nextSeq: number; targeted: number; notAllowed: number },
  ): Promise<boolean> {
    const { notificationId, generation, rangeNo } = range;
    const { rows } = await sql<{ moved: number }>`
      with moved as (
        update fanout_ranges r
        set cursor_id = ${page.cursor}::uuid, next_seq = ${page.nextSeq}::int,
          devices_targeted = r.devices_targeted + ${page.targeted}::int,
          devices_not_allowed = r.devices_not_allowed + ${page.notAllowed}::int, updated_at = now()
        where r.notification_id = ${notificationId}::uuid and r.generation = ${generation}::int and r.range_no = ${rangeNo}::int
          and not r.done
          -- from the checkpoint this run read, as saveFanoutPage
          and r.next_seq = ${page.nextSeq - batches.length}::int
          and exists (
            select 1 from notifications n
            where n.id = ${notificationId}::uuid and n.generation = ${generation}::int and n.state <> 'canceled')
        returning 1),
      touched as (
        update notifications
        set updated_at = now()
        where id = ${notificationId}::uuid and updated_at < now() - make_interval(secs => ${PROGRESS_TOUCH_SECONDS}::int)
          and exists (select 1 from moved))
      ${storeBatches(notificationId, generation, batches)}
      select count(*)::int as moved from moved`.execute(db);
    return (rows[0]?.moved ?? 0) > 0;
  }

  /**
   * Marks a range fanned out; when it was the last, the notification's fan-out is done. Two statements: the last
   * range to commit its own sees every other one done (a check inside its own statement might not).
   * Whether this call finished the fan-out.
   */
  async finishRange(db: Db, notificationId: string, generation: number, rangeNo: number): Promise<boolean> {
    await db
      .updateTable('fanout_ranges')
      .set({ done: true, updated_at: sql<Date>`now()` })
      .where('notification_id', '=', notificationId)
      .where('generation', '=', generation)
      .where('range_no', '=', rangeNo)
      .execute();
    const { rows } = await sql<{ id: string }>`
      update notifications n
      set fanout_done = true, updated_at = now()
      where n.id = ${notificationId}::uuid and n.generation = ${generation}::int and not n.fanout_done
        and not exists (
          select 1 from fanout_ranges r
          where r.notification_id = ${notificationId}::uuid and r.generation = ${generation}::int and not r.done)
      returning n.id`.execute(db);
    return rows.length > 0;
  }
  /**
   * Reserves the start of each of a page's batches under the notification's pace and the app's ceiling (pushes
   * a minute, null for none), as a virtual schedule (GCRA): each batch starts when both allow it, and pushes
   * both schedules on by its size. The rows are locked for the moment it takes, so concurrent fan-outs of one
   * app (several workers) share its ceiling.
   */
  async reserveSlots(
    db: Db,
    notificationId: string,
    appId: string,
    sizes: number[],
    perMinute: { notification: number | null; app: number | null },
    now: Date,
  ): Promise<Date[]> {
    return db.transaction().execute(async (trx) => {
      const n = perMinute.notification
        ? await trx.selectFrom('notifications').select('pace_next_at').where('id', '=', notificationId).forUpdate().executeTakeFirst()
        : undefined;
      const a = perMinute.app
        ? await trx.selectFrom('apps').select('pace_next_at').where('id', '=', appId).forUpdate().executeTakeFirst()
        : undefined;
      let nextN = Math.max(now.getTime(), n?.pace_next_at?.getTime() ?? 0);
      let nextA = Math.max(now.getTime(), a?.pace_next_at?.getTime() ?? 0);
      const slots: Date[] = [];
      for (const size of sizes) {
        const start = Math.max(perMinute.notification ? nextN : 0, perMinute.app ? nextA : 0, now.getTime());
        slots.push(new Date(start));
        if (perMinute.notification) nextN = start + (size * 60_000) / perMinute.notification;
        if (perMinute.app) nextA = start + (size * 60_000) / perMinute.app;
      }
      if (perMinute.notification)
        await trx
          .updateTable('notifications')
          .set({ pace_next_at: new Date(nextN) })
          .where('id', '=', notificationId)
          .execute();
      if (perMinute.app)
        await trx
          .updateTable('apps')
          .set({ pace_next_at: new Date(nextA) })
          .where('id', '=', appId)
          .execute();
      return slots;
    });
  }
}
