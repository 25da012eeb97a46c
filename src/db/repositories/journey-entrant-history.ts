import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../database.js';
import type { HistoryKind } from '../../domain/journey-history.js';

/** The entries of an entrant's history that are kept and shown: its first (the entry) and its last HISTORY_LAST. */
export const HISTORY_LAST = 99;
/** The last HISTORY_LAST elements of an array, as a JSON path. */
const LAST_ENTRIES = `$[last - ${HISTORY_LAST - 1} to last]`;
/** An entrant's older history rows are deleted each time this many more moves went by (its seq a multiple of it). */
export const HISTORY_PRUNE_EVERY = 100;

/**
 * The entrant's history as a jsonb array (`id`, `enteredAt`, `startId` SQL naming its row): the row of its start (seq
 * 0, shared by all who entered by it) and its own rows, their entries in order, cut to the first and the last
 * HISTORY_LAST, whatever rows pruning left (it leaves every entry of that cut). Flattened by a JSON path rather than a
 * set-returning function, whose 100-row guess made a batch's plan costly enough for JIT.
 */
export function keptHistory(id: RawBuilder<unknown>, enteredAt: RawBuilder<unknown>, startId: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`(
    select case when jsonb_array_length(a.entries) <= ${HISTORY_LAST + 1} then a.entries
                else jsonb_build_array(a.entries -> 0) || jsonb_path_query_array(a.entries, ${LAST_ENTRIES}::jsonpath) end
    from (select coalesce(jsonb_path_query_array(jsonb_agg(h.entries order by h.seq), '$[*][*]'), '[]'::jsonb) as entries
          from journey_entrant_history h
          where h.entrant_id in (${id}, ${startId}) and h.entered_at = ${enteredAt}) a)`;
}

/** A moved entrant as pruning reads it: its row's key, its seq after the move, and its start (null: its own first row). */
export interface HistoryRowOf {
  id: string;
  entered_at: Date;
  seq: number;
  start_id: string | null;
}

/** The moved entrants whose history rows are due for pruning: those whose seq reached a multiple of HISTORY_PRUNE_EVERY. */
export function duePruning<T extends { seq: number }>(moved: readonly T[]): T[] {
  return moved.filter((m) => m.seq % HISTORY_PRUNE_EVERY === 0);
}

/**
 * Deletes the entrants' history rows but their first (its start's, else its own) and their last HISTORY_LAST: every
 * row holds an entry at least, so those hold the whole kept cut (`keptHistory`), and an entrant going round a loop for
 * months keeps at most 1 + HISTORY_LAST + HISTORY_PRUNE_EVERY rows. `enteredAt` as read back, to the millisecond.
 */
export async function pruneHistory(db: Db, entrants: readonly HistoryRowOf[]): Promise<void> {
  if (entrants.length === 0) return;
  // each entrant's bounds read once (its first row, the oldest of its last HISTORY_LAST), not again per row
  await sql`
    with pruned as (
      select p.id, p.entered_at, p.entered_at + interval '1 millisecond' as entered_before,
             case when p.start_id is not null then 0
                  else (select min(f.seq) from journey_entrant_history f
                        where f.entrant_id = p.id and f.entered_at >= p.entered_at
                          and f.entered_at < p.entered_at + interval '1 millisecond') end as first_seq,
             (select k.seq from journey_entrant_history k
              where k.entrant_id = p.id and k.entered_at >= p.entered_at
                and k.entered_at < p.entered_at + interval '1 millisecond'
              order by k.seq desc
              offset ${HISTORY_LAST - 1} limit 1) as oldest_kept
      from unnest(${entrants.map((e) => e.id)}::uuid[], ${entrants.map((e) => e.entered_at.toISOString())}::timestamptz[],
                  ${entrants.map((e) => e.start_id)}::uuid[])
        as p(id, entered_at, start_id)
    )
    delete from journey_entrant_history h
    using pruned b
    where h.entrant_id = b.id and h.entered_at >= b.entered_at and h.entered_at < b.entered_before
      and h.seq > b.first_seq and h.seq < b.oldest_kept
  `.execute(db);
}

/**
 * A one-entry history array made in SQL: at `now`, of the step `step`, `k` what happened, `event` its `e` (a SQL
 * expression), `more` further `'key', value` pairs (each pair preceded by a comma).
 */
export function entryOf(
  now: Date,
  step: RawBuilder<unknown>,
  k: HistoryKind,
  event?: RawBuilder<unknown>,
  more?: RawBuilder<unknown>,
): RawBuilder<unknown> {
  return sql`jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('t', ${now.getTime()}::bigint, 's', ${step}, 'k', ${k}::text,
    'e', ${event ?? sql`null::text`}${more ?? sql``})))`;
}
