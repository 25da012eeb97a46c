import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database } from '../schema.js';
import type { TemplateEvent } from '../../domain/template-data.js';

/** Events of one entrant as an events request recorded them, for the journey workers. */
export interface PendingEvents {
  appId: string;
  entrantKey: string;
  entrantKeys: string[];
  deviceIds: string[];
  userId: string | null;
  keys: string[];
  /** how many of the events each key names */
  counts: number[];
  events: Record<string, TemplateEvent>;
}

/** A row of journey_events (migration 063; only this repository reads it, in SQL). */
export interface JourneyEventRow {
  id: string;
  app_id: string;
  entrant_key: string;
  entrant_keys: string[];
  device_ids: string[];
  user_id: string | null;
  keys: string[];
  counts: number[];
  events: Record<string, TemplateEvent>;
  created_at: Date;
  attempts: number;
}

/** Events waiting for the journey workers (journey_events). All SQL of journey_events. */
export class JourneyEventsRepository {
  /**
   * Writes the events' row when a journey of the app that is not archived is entered by, waits for or exits on one
   * of them: one statement, nothing written otherwise. Answers whether it wrote one.
   */
  async add(db: Db, p: PendingEvents): Promise<boolean> {
    const { rows } = await sql<{ id: string }>`
      insert into journey_events (app_id, entrant_key, entrant_keys, device_ids, user_id, keys, counts, events)
      select ${p.appId}, ${p.entrantKey}, ${p.entrantKeys}::text[], ${p.deviceIds}::uuid[], ${p.userId}, ${p.keys}::text[],
             ${p.counts}::int[], ${JSON.stringify(p.events)}::jsonb
      where exists (select 1 from journeys j
                    where j.app_id = ${p.appId} and j.state <> 'archived'
                      and (j.trigger_event = any(${p.keys}::text[]) or j.listens && ${p.keys}::text[]))
      returning id
    `.execute(db);
    return rows.length > 0;
  }

  /**
   * Takes up to `limit` rows, oldest first, deleting them in the caller's transaction (rolled back, they are there
   * again): rows another worker holds are skipped, and so is a row while an older one of an entrant it shares a key
   * with (a device that since got a user holds both) is not taken with it, so that an entrant's events are applied
   * in order by one worker at a time.
   */
  async take(trx: Transaction<Database>, limit: number): Promise<JourneyEventRow[]> {
    const { rows } = await sql<JourneyEventRow>`
      with pick as (
        select id, entrant_keys from journey_events
        order by id
        limit ${limit}
        for update skip locked
      ),
      mine as (
        select p.id from pick p
        where not exists (select 1 from journey_events q
                          where q.entrant_keys && p.entrant_keys and q.id < p.id and q.id not in (select id from pick))
      )
      delete from journey_events e using mine m where e.id = m.id
      returning e.*
    `.execute(trx);
    return rows.sort((a, b) => Number(a.id) - Number(b.id));
  }

  /**
   * Takes the oldest row that has no older row of its entrants and shares no key with `skipKeys` (the entrants of
   * rows that failed this poll), deleting it in the caller's transaction.
   */
  async takeOne(trx: Transaction<Database>, skipKeys: readonly string[]): Promise<JourneyEventRow | undefined> {
    const { rows } = await sql<JourneyEventRow>`
      with pick as (
        select e.id from journey_events e
        where not (e.entrant_keys && ${skipKeys}::text[])
          and not exists (select 1 from journey_events q where q.entrant_keys && e.entrant_keys and q.id < e.id)
        order by e.id
        limit 1
        for update skip locked
      )
      delete from journey_events e using pick p where e.id = p.id
      returning e.*
    `.execute(trx);
    return rows[0];
  }

  /**
   * Notes that a row could not be applied on its own this poll; after `maxAttempts` such polls it is deleted.
   * Answers whether it was.
   */
  async failed(db: Db, id: string, maxAttempts: number): Promise<boolean> {
    const { rows } = await sql<{ dropped: boolean }>`
      with noted as (
        update journey_events set attempts = attempts + 1
        where id = ${id}::bigint and attempts + 1 < ${maxAttempts}
      ),
      -- one statement sees one snapshot: the two conditions part the row's cases
      dropped as (
        delete from journey_events where id = ${id}::bigint and attempts + 1 >= ${maxAttempts} returning id
      )
      select exists (select 1 from dropped) as dropped
    `.execute(db);
    return rows[0]?.dropped ?? false;
  }
}
