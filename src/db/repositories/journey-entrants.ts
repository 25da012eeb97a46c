import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, JourneyEntrant } from '../schema.js';
import { countDeltas, stepCountsUpsert, type CountDelta } from './journeys.js';
import { jsonbArray } from '../pg-arrays.js';
import type { TemplateEvent } from '../../domain/template-data.js';

/** A journey an entrant may enter, at its first step, with its re-entry rule as `reEntryRule` gives it. */
export interface EntryCandidate {
  journeyId: string;
  version: number;
  /** the device it enters with: the first its entry filters match (null: none, it does not enter) */
  deviceId: string | null;
  stepId: string;
  phase: 'arrived' | 'waiting';
  dueAt: Date;
  afterExit: boolean;
  afterMs: number;
  /** the event that entered it, which its sends' templates read (null: entered through the API) */
  event: TemplateEvent | null;
}

/** What an entry did: entered, or not (the entry filters, or the re-entry rule). */
export type EntryOutcome = 'entered' | 'filtered' | 'not_re_entered';

/** Entrants of one journey version at one step and phase: what the poller runs together. */
export interface DueGroup {
  journey_id: string;
  app_id: string;
  version: number;
  step_id: string;
  phase: 'arrived' | 'waiting';
}

/** A due entrant, locked, with what its step needs of its device. */
export type DueEntrant = JourneyEntrant & { time_zone: string | null };

/**
 * Where one entrant goes: the row is updated only if its seq is still the one read (`seq`), so a transition runs
 * once however many workers read the row.
 */
export interface EntrantMove {
  id: string;
  enteredAt: Date;
  seq: number;
  stepId: string;
  phase: 'arrived' | 'waiting' | 'done';
  dueAt: Date | null;
  waitEvent: string | null;
  onEvent: string | null;
  outcome: JourneyEntrant['outcome'];
}

/** Entrants that left at once (an exit event, an archive), counted at the step they left. */
export interface LeftAt {
  journey_id: string;
  step_id: string;
  n: number;
}

/** The entrants of journeys: entering, the due poll, transitions, exits. All SQL of journey_entrants. */
export class JourneyEntrantsRepository {
  /**
   * Serializes entries of one entrant into these journeys until the commit (in a fixed order: no deadlock): the table
   * is partitioned by the day an entrant entered, so no unique index can say one entrant is inside at most once.
   */
  async lockEntrant(trx: Transaction<Database>, journeyIds: string[], entrantKey: string): Promise<void> {
    await sql`
      select pg_advisory_xact_lock(k)
      from (select hashtextextended('journey:' || j || ':' || ${entrantKey}, 0) as k from unnest(${journeyIds}::text[]) as j order by 1) s
    `.execute(trx);
  }

  /**
   * Enters the entrant into each journey it may enter, in one statement with the counters: one whose last entry
   * forbids it by the journey's re-entry rule is `not_re_entered` (counted skipped at the trigger), one without a
   * device the entry filters match `filtered`, the others enter at their first step. `counts` are the transaction's
   * other counter changes, written by the same statement. The entrant's entries into these journeys must be locked
   * (`lockEntrant`) by an earlier statement of the transaction, so that this one's snapshot sees every entry before.
   */
  async enter(
    trx: Transaction<Database>,
    entry: { appId: string; entrantKey: string; now: Date; candidates: EntryCandidate[]; counts: CountDelta[] },
  ): Promise<Map<string, EntryOutcome>> {
    const { appId, entrantKey, now, candidates } = entry;
    const col = <T>(f: (c: EntryCandidate) => T) => candidates.map(f);
    const { rows } = await sql<{ journey_id: string; outcome: EntryOutcome }>`
      with candidate as (
        select * from unnest(${col((c) => c.journeyId)}::uuid[], ${col((c) => c.version)}::int[], ${col((c) => c.deviceId)}::uuid[],
                             ${col((c) => c.stepId)}::text[], ${col((c) => c.phase)}::text[],
                             ${col((c) => c.dueAt.toISOString())}::timestamptz[], ${col((c) => c.afterExit)}::boolean[],
                             ${col((c) => c.afterMs)}::bigint[], ${jsonbArray(col((c) => c.event))}::jsonb[])
          as c(journey_id, version, device_id, step_id, phase, due_at, after_exit, after_ms, event)
      ),
      last_entry as (
        select distinct on (journey_id) journey_id, entered_at, outcome
        from journey_entrants
        where app_id = ${appId} and entrant_key = ${entrantKey} and journey_id = any(${col((c) => c.journeyId)}::uuid[])
        order by journey_id, entered_at desc
      ),
      decided as (
        select c.*,
               case when l.journey_id is not null
                         and (not c.after_exit or l.outcome is null
                              or ${now}::timestamptz - l.entered_at < c.after_ms * interval '1 millisecond')
                      then 'not_re_entered'
                    when c.device_id is null then 'filtered'
                    else 'entered' end as outcome
        from candidate c
        left join last_entry l using (journey_id)
      ),
      inserted as (
        insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at, event)
        select journey_id, version, ${appId}, ${entrantKey}, device_id, step_id, phase, due_at, ${now}, event
        from decided
        where outcome = 'entered'
      ),
      counted as (
        ${stepCountsUpsert(sql`
          ${countDeltas(entry.counts)}
          union all
          select journey_id, '', case outcome when 'not_re_entered' then 'skipped' else outcome end, 1 from decided
          union all
          select journey_id, step_id, counter, 1 from decided, unnest(array['entered', 'waiting']) as counter
          where outcome = 'entered'`)}
      )
      select journey_id, outcome from decided
    `.execute(trx);
    return new Map(rows.map((r) => [r.journey_id, r.outcome]));
  }

  /** The entrant leaves every journey version listed, wherever it is: converted. */
  async convert(
    db: Db,
    appId: string,
    entrantKey: string,
    versions: { journeyId: string; version: number }[],
    now: Date,
  ): Promise<LeftAt[]> {
    if (versions.length === 0) return [];
    const { rows } = await sql<LeftAt>`
      with left_now as (
        update journey_entrants e
        set phase = 'done', outcome = 'converted', due_at = null, wait_event = null, on_event = null, left_at = ${now},
            seq = e.seq + 1
        from unnest(${versions.map((v) => v.journeyId)}::uuid[], ${versions.map((v) => v.version)}::int[]) as v(journey_id, version)
        where e.app_id = ${appId} and e.entrant_key = ${entrantKey}
          and e.journey_id = v.journey_id and e.version = v.version and e.outcome is null
        returning e.journey_id, e.step_id
      )
      select journey_id, step_id, count(*)::int as n from left_now group by journey_id, step_id
    `.execute(db);
    return rows;
  }

  /**
   * Entrants waiting at a wait_for for one of these events (by key) move to its on_event step, due now, with that
   * event as the one their later sends' templates read.
   */
  async wake(
    db: Db,
    appId: string,
    entrantKey: string,
    journeyIds: string[],
    events: Record<string, TemplateEvent>,
    now: Date,
  ): Promise<{ journey_id: string; left_step: string; arrived_step: string }[]> {
    if (journeyIds.length === 0) return [];
    const keys = Object.keys(events);
    const { rows } = await sql<{ journey_id: string; left_step: string; arrived_step: string }>`
      with hit as (
        select id, entered_at, step_id from journey_entrants
        where app_id = ${appId} and entrant_key = ${entrantKey} and journey_id = any(${journeyIds}::uuid[])
          and phase = 'waiting' and wait_event = any(${keys}::text[]) and outcome is null
        for update
      )
      update journey_entrants e
      set step_id = e.on_event, phase = 'arrived', due_at = ${now}, wait_event = null, on_event = null, seq = e.seq + 1,
          event = ${JSON.stringify(events)}::jsonb -> e.wait_event
      from hit
      where e.id = hit.id and e.entered_at = hit.entered_at
      returning e.journey_id, hit.step_id as left_step, e.step_id as arrived_step
    `.execute(db);
    return rows;
  }

  /** Journey versions, steps and phases with entrants due at `now`, of journeys that are active. */
  async dueGroups(db: Db, now: Date, limit: number): Promise<DueGroup[]> {
    const { rows } = await sql<DueGroup>`
      select e.journey_id, j.app_id, e.version, e.step_id, e.phase
      from journey_entrants e
      join journeys j on j.id = e.journey_id and j.state = 'active'
      where e.due_at <= ${now}
      group by e.journey_id, j.app_id, e.version, e.step_id, e.phase
      limit ${limit}
    `.execute(db);
    return rows;
  }

  /**
   * Up to `limit` due entrants of a group, locked; those another worker holds are skipped. They are taken before
   * their devices are joined, so the plan reads the due index in order whatever the statistics say (joined first, a
   * plan made on stale ones sorted every due entrant for each batch).
   */
  async lockDue(trx: Transaction<Database>, g: DueGroup, now: Date, limit: number): Promise<DueEntrant[]> {
    const { rows } = await sql<DueEntrant>`
      with due as (
        select *
        from journey_entrants e
        where e.due_at <= ${now} and e.journey_id = ${g.journey_id} and e.version = ${g.version}
          and e.step_id = ${g.step_id} and e.phase = ${g.phase}
        order by e.due_at
        limit ${limit}
        for update skip locked
      )
      select due.*, d.time_zone
      from due
      join devices d on d.id = due.device_id
    `.execute(trx);
    return rows;
  }

  /** The moves, each only if its entrant's seq is still the one read; answers the ids moved. */
  async advance(db: Db, moves: EntrantMove[]): Promise<Set<string>> {
    if (moves.length === 0) return new Set();
    const col = <T>(f: (m: EntrantMove) => T) => moves.map(f);
    const { rows } = await sql<{ id: string }>`
      update journey_entrants e
      set step_id = t.step_id, phase = t.phase, due_at = t.due_at, wait_event = t.wait_event, on_event = t.on_event,
          outcome = t.outcome, left_at = case when t.outcome is null then null else now() end, seq = e.seq + 1
      from unnest(${col((m) => m.id)}::uuid[], ${col((m) => m.enteredAt.toISOString())}::timestamptz[], ${col((m) => m.seq)}::int[],
                  ${col((m) => m.stepId)}::text[], ${col((m) => m.phase)}::text[],
                  ${col((m) => m.dueAt?.toISOString() ?? null)}::timestamptz[], ${col((m) => m.waitEvent)}::text[],
                  ${col((m) => m.onEvent)}::text[], ${col((m) => m.outcome)}::text[])
        as t(id, entered_at, seq, step_id, phase, due_at, wait_event, on_event, outcome)
      -- the partition key as read back to the millisecond (JavaScript's precision); the id names the row
      where e.id = t.id and e.entered_at >= t.entered_at and e.entered_at < t.entered_at + interval '1 millisecond'
        and e.seq = t.seq
      returning e.id
    `.execute(db);
    return new Set(rows.map((r) => r.id));
  }

  /** Every entrant still inside the journey leaves it (archived), counted at its step. */
  async exitAll(db: Db, journeyId: string, now: Date): Promise<LeftAt[]> {
    const { rows } = await sql<LeftAt>`
      with left_now as (
        update journey_entrants
        set phase = 'done', outcome = 'exited', due_at = null, wait_event = null, on_event = null, left_at = ${now}, seq = seq + 1
        where journey_id = ${journeyId} and outcome is null
        returning journey_id, step_id
      )
      select journey_id, step_id, count(*)::int as n from left_now group by journey_id, step_id
    `.execute(db);
    return rows;
  }
}
