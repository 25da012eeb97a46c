import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, JourneyEntrant } from '../schema.js';
import type { HistoryEntry } from '../../domain/journey-history.js';
import type { WaitingArrival } from '../../domain/journey-run.js';
import { jsonbArray, jsonTextArray } from '../pg-arrays.js';
import { duePruning, entryOf, keptHistory, pruneHistory, type HistoryRowOf } from './journey-entrant-history.js';
import { journeyLeftEventsCte } from './webhooks.js';
import type { DigestCount, EntryCandidate, EntryOutcome, EntryStart, LeftAt } from './journey-entrant-types.js';
import type { TemplateEvent } from '../../domain/template-data.js';

export type { DigestCount, EntryCandidate, EntryOutcome, EntryStart, LeftAt } from './journey-entrant-types.js';

/** Entrants of one journey version at one step and phase: what the poller runs together. */
export interface DueGroup {
  journey_id: string;
  app_id: string;
  version: number;
  step_id: string;
  phase: 'arrived' | 'waiting';
  /** how many of its entrants the poll saw due (it reads the earliest DUE_ROWS_SEEN of all groups: `cut`, there may be more) */
  due: number;
}

/** An entry into a journey with its history (journey_entrant_history: its first entry and its last 99). */
export type EntrantWithHistory = JourneyEntrant & { history: HistoryEntry[] };

/**
 * A due entrant, locked, with its digest count (migration 063), and its device's time zone and its history when the
 * step reads them (`lockDue`; else null and empty).
 */
export type DueEntrant = EntrantWithHistory & { time_zone: string | null; digest_count: number };

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
  /** what the move appends to the entrant's history */
  history: HistoryEntry[];
}

/** Due entrants a poll looks at for their groups: the earliest due first. */
const DUE_ROWS_SEEN = 5000;

/** The entrants of journeys: entering, the due poll, transitions, exits. All SQL of journey_entrants. */
export class JourneyEntrantsRepository {
  /**
   * Serializes entries of these entrants into any journey until the commit (in a fixed order: no deadlock): the table
   * is partitioned by the day an entrant entered, so no unique index can say one entrant is inside at most once. A
   * lock an entrant, not an entrant and journey: a batch of 100 events each entering 150 journeys took 15,000, past
   * what PostgreSQL's shared lock table holds by default (out of shared memory).
   */
  async lockEntrants(trx: Transaction<Database>, entrantKeys: string[]): Promise<void> {
    if (entrantKeys.length === 0) return;
    await sql`
      select pg_advisory_xact_lock(k)
      from (select distinct hashtextextended('journey entrant:' || e, 0) as k from unnest(${entrantKeys}::text[]) as x(e) order by 1) s
    `.execute(trx);
  }

  /**
   * Enters entrants into the journeys they may enter, in one statement whatever their number: an entry whose
   * entrant's last entry forbids it by the journey's re-entry rule is `not_re_entered`, one without a device the
   * entry filters match `filtered`, the others enter at their first step (the caller counts them). Answers each
   * candidate's outcome, in their order (only those not entered are read back: most enter). Each entrant's entries
   * into its journeys must be locked (`lockEntrants`) by an earlier statement of the transaction, so that this one's
   * snapshot sees every entry before; a candidate names each (entrant, journey) once.
   */
  async enter(trx: Transaction<Database>, entry: { now: Date; candidates: EntryCandidate[] }): Promise<EntryOutcome[]> {
    const { now, candidates } = entry;
    if (candidates.length === 0) return [];
    const col = <T>(f: (c: EntryCandidate) => T) => candidates.map(f);
    // what a journey's entrants share (its start, an event entering 10 journeys) is sent and parsed once, a candidate
    // naming it by its place
    const starts = new Distinct<EntryStart>();
    const events = new Distinct<TemplateEvent>();
    const places = col((c) => starts.placeOf(c.start));
    const s = <T>(f: (x: EntryStart) => T) => starts.values.map(f);
    const { rows } = await sql<{ i: number; outcome: EntryOutcome }>`
      with start as (
        -- a start's first history entries are the same for all who enter by it: one row, which they name (start_id)
        select *, case when jsonb_array_length(s.history) > 0 then gen_random_uuid() end as start_id
        from unnest(${s((x) => x.appId)}::uuid[], ${s((x) => x.journeyId)}::uuid[], ${s((x) => x.version)}::int[],
                    ${s((x) => x.stepId)}::text[], ${s((x) => x.phase)}::text[], ${s((x) => x.dueAt.toISOString())}::timestamptz[],
                    ${s((x) => x.waitEvent)}::text[], ${s((x) => x.onEvent)}::text[], ${s((x) => x.afterExit)}::boolean[],
                    ${s((x) => x.afterMs)}::bigint[], ${jsonbArray(s((x) => x.history))}::jsonb[])
          with ordinality
          as s(app_id, journey_id, version, step_id, phase, due_at, wait_event, on_event, after_exit, after_ms, history, at)
      ),
      candidate as (
        select s.app_id, c.entrant_key, s.journey_id, s.version, c.device_id, s.step_id, s.phase, s.due_at, s.wait_event,
               s.on_event, s.after_exit, s.after_ms, s.start_id, e.event, c.i
        from unnest(${places}::int[], ${col((c) => c.entrantKey)}::text[], ${col((c) => c.deviceId)}::uuid[],
                    ${col((c) => (c.event ? events.placeOf(c.event) : null))}::int[])
          with ordinality as c(start_at, entrant_key, device_id, event_at, i)
        join start s on s.at = c.start_at
        left join unnest(${jsonbArray(events.values)}::jsonb[]) with ordinality as e(event, at) on e.at = c.event_at
      ),
      -- each entrant's entries looked up once, for all the journeys it may enter
      entrant as (
        select app_id, entrant_key, array_agg(journey_id) as journeys from candidate group by app_id, entrant_key
      ),
      last_entry as (
        select distinct on (e.entrant_key, e.journey_id) e.entrant_key, e.journey_id, e.entered_at, e.outcome
        from entrant x
        join journey_entrants e on e.app_id = x.app_id and e.entrant_key = x.entrant_key and e.journey_id = any(x.journeys)
        order by e.entrant_key, e.journey_id, e.entered_at desc
      ),
      -- entries whose rows retention dropped (JourneyEntrantsRepository.keepEntered): left, at their last entry
      kept_entry as (
        select k.entrant_key, k.journey_id, k.last_entered_at as entered_at, 'completed' as outcome
        from entrant x
        join journey_entered k on k.entrant_key = x.entrant_key and k.journey_id = any(x.journeys)
      ),
      decided as materialized (
        select gen_random_uuid() as id, c.*,
               case when l.journey_id is not null
                         and (not c.after_exit or l.outcome is null
                              or ${now}::timestamptz - l.entered_at < c.after_ms * interval '1 millisecond')
                      then 'not_re_entered'
                    when c.device_id is null then 'filtered'
                    else 'entered' end as outcome
        from candidate c
        left join (select * from last_entry union all select * from kept_entry k
                   where not exists (select 1 from last_entry l where (l.entrant_key, l.journey_id) = (k.entrant_key, k.journey_id))) l
          using (entrant_key, journey_id)
      ),
      inserted as (
        insert into journey_entrants (id, journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, wait_event,
                                      on_event, entered_at, event, start_id)
        select id, journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, wait_event, on_event, ${now}, event,
               start_id
        from decided
        where outcome = 'entered'
      ),
      -- the history's first row of each start someone entered by: seq 0, the entered_at of their rows
      entered_history as (
        insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
        select s.start_id, ${now}, 0, s.history from start s
        where exists (select 1 from decided d where d.start_id = s.start_id and d.outcome = 'entered')
      )
      select i::int as i, outcome from decided where outcome <> 'entered'
    `.execute(trx);
    const outcomes = new Array<EntryOutcome>(candidates.length).fill('entered');
    for (const r of rows) outcomes[r.i - 1] = r.outcome;
    return outcomes;
  }

  /**
   * The entrant leaves every journey version listed, wherever it is: converted, by the version's exit `event`. Answers
   * them by the step they left, and (`path`) by each split path they took (`<split step>/<path>`).
   */
  async convert(
    db: Db,
    appId: string,
    entrantKeys: string[],
    versions: { journeyId: string; version: number; event: string; splits: boolean }[],
    now: Date,
  ): Promise<(LeftAt & { path: boolean })[]> {
    if (versions.length === 0) return [];
    // the split paths the converted took are read from their history only where a version has a split step
    const splitting = versions.filter((v) => v.splits).map((v) => v.journeyId);
    const { rows } = await sql<LeftAt & { path: boolean }>`
      with left_now as (
        update journey_entrants e
        set phase = 'done', outcome = 'converted', due_at = null, wait_event = null, on_event = null, left_at = ${now},
            seq = e.seq + 1
        from unnest(${versions.map((v) => v.journeyId)}::uuid[], ${versions.map((v) => v.version)}::int[],
                    ${versions.map((v) => v.event)}::text[]) as v(journey_id, version, event)
        where e.app_id = ${appId} and e.entrant_key = any(${entrantKeys}::text[])
          and e.journey_id = v.journey_id and e.version = v.version and e.outcome is null
        returning e.id, e.entered_at, e.seq, e.journey_id, e.step_id, v.event, e.app_id, e.version, e.device_id, e.entrant_key, e.start_id
      ),
      written as (
        insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
        select id, entered_at, seq, ${entryOf(now, sql`step_id`, 'converted', sql`event`)} from left_now
      )${journeyLeftEventsCte('left_now', 'journey.converted')},
      path as (
        select l.journey_id, (x->>'s') || '/' || (x->>'p') as p
        from left_now l, jsonb_array_elements(${keptHistory(sql`l.id`, sql`l.entered_at`, sql`l.start_id`)}) as x
        where l.journey_id = any(${splitting}::uuid[]) and x->>'k' = 'split'
      )
      select journey_id, step_id, false as path, count(*)::int as n from left_now group by journey_id, step_id
      union all
      select journey_id, p, true, count(*)::int from path group by journey_id, p
    `.execute(db);
    return rows;
  }

  /**
   * Entrants waiting at a wait_for for one of these events move to its on_event step: waiting there at once when it
   * is one of `arrivals`, else due now. Entrants due now (at a step the engine is about to run, or running: locked)
   * are locked too, so that one the engine moves to a wait_for meanwhile is read as it committed (a row locked by
   * another transaction is read again once that commits) and woken, not left to time out. The event that came (by
   * key) becomes the one their later sends' templates read.
   */
  async wake(
    db: Db,
    wake: { appId: string; entrantKeys: string[]; journeyIds: string[]; events: Record<string, TemplateEvent>; arrivals: WaitingArrival[] },
    now: Date,
  ): Promise<{ journey_id: string; left_step: string; arrived_step: string }[]> {
    const { appId, entrantKeys, journeyIds, events, arrivals } = wake;
    if (journeyIds.length === 0) return [];
    const a = <T>(f: (w: WaitingArrival) => T) => arrivals.map(f);
    const keys = Object.keys(events);
    type Woken = { journey_id: string; left_step: string; arrived_step: string } & HistoryRowOf;
    const waitingEntry = entryOf(now, sql`arrived_step`, 'waiting', sql`wait_event`, sql`, 'u', ${now.getTime()}::bigint + wait_ms`);
    const { rows } = await sql<Woken>`
      with hit as (
        select id, entered_at, journey_id, version, step_id, phase, wait_event, on_event from journey_entrants
        where app_id = ${appId} and entrant_key = any(${entrantKeys}::text[]) and journey_id = any(${journeyIds}::uuid[])
          and outcome is null and (phase = 'waiting' and wait_event = any(${keys}::text[]) or phase = 'arrived')
        for update
      ),
      arrival as (
        select * from unnest(${a((w) => w.journeyId)}::uuid[], ${a((w) => w.version)}::int[], ${a((w) => w.stepId)}::text[],
                             ${a((w) => w.waitMs)}::bigint[], ${a((w) => w.waitEvent)}::text[], ${a((w) => w.onEvent)}::text[])
          as w(journey_id, version, step_id, wait_ms, wait_event, on_event)
      ),
      woken as (
        select hit.id, hit.entered_at, hit.step_id as left_step, hit.wait_event as came, hit.on_event as arrived_step,
               w.step_id is not null as waits, coalesce(w.wait_ms, 0) as wait_ms, w.wait_event, w.on_event
        from hit
        left join arrival w on (w.journey_id, w.version, w.step_id) = (hit.journey_id, hit.version, hit.on_event)
        where hit.phase = 'waiting' and hit.wait_event = any(${keys}::text[])
      ),
      moved as (
        update journey_entrants e
        set step_id = w.arrived_step, phase = case when w.waits then 'waiting' else 'arrived' end,
            due_at = ${now}::timestamptz + w.wait_ms * interval '1 millisecond',
            wait_event = w.wait_event, on_event = w.on_event, seq = e.seq + 1,
            event = ${JSON.stringify(events)}::jsonb -> w.came
        from woken w
        where e.id = w.id and e.entered_at = w.entered_at
        returning e.id, e.entered_at, e.seq, e.journey_id, e.start_id, w.left_step, w.arrived_step, w.came, w.waits, w.wait_event, w.wait_ms
      ),
      written as (
        insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
        select id, entered_at, seq, ${entryOf(now, sql`left_step`, 'event', sql`came`, sql`, 'to', arrived_step`)}
          || case when waits then ${waitingEntry} else '[]'::jsonb end
        from moved
      )
      select journey_id, left_step, arrived_step, id, entered_at, seq, start_id from moved
    `.execute(db);
    await pruneHistory(db, duePruning(rows));
    return rows.map(({ journey_id, left_step, arrived_step }) => ({ journey_id, left_step, arrived_step }));
  }

  /** The entrant's entries waiting in the window of one of these digest steps count `n` more of its event. */
  async countDigests(db: Db, c: { appId: string; entrantKeys: string[]; digests: DigestCount[] }): Promise<void> {
    if (c.digests.length === 0) return;
    const d = <T>(f: (x: DigestCount) => T) => c.digests.map(f);
    await sql`
      update journey_entrants e
      set digest_count = e.digest_count + d.n
      from unnest(${d((x) => x.journeyId)}::uuid[], ${d((x) => x.version)}::int[], ${d((x) => x.stepId)}::text[],
                  ${d((x) => x.n)}::int[]) as d(journey_id, version, step_id, n)
      where e.app_id = ${c.appId} and e.entrant_key = any(${c.entrantKeys}::text[]) and e.journey_id = d.journey_id
        and e.version = d.version and e.step_id = d.step_id and e.phase = 'waiting' and e.outcome is null
    `.execute(db);
  }

  /**
   * Journey versions, steps and phases with entrants due at `now`, of journeys that are active, among the first
   * DUE_ROWS_SEEN due (the rest are seen as those move). The due entrants are read first, in due order through the due
   * index: joined first, a plan made while 10 journeys were active read the whole key index once a journey at every
   * poll (4,858 pages), and grouping every due entrant read 100,000 rows a poll while they were due. The same read
   * looks `aheadMs` further, for when the next entrant of an active journey comes due (null: none that soon).
   */
  async dueGroups(
    db: Db,
    due: { now: Date; aheadMs: number; limit: number },
  ): Promise<{ groups: DueGroup[]; nextDue: Date | null; cut: boolean }> {
    const { now, aheadMs, limit } = due;
    const { rows } = await sql<{ [K in keyof DueGroup]: DueGroup[K] | null } & { next_due: Date | null; seen: number }>`
      with due as materialized (
        select journey_id, version, step_id, phase, due_at
        from journey_entrants
        where due_at <= ${new Date(now.getTime() + aheadMs)}
          and journey_id = any(array(select id from journeys where state = 'active'))
        order by due_at
        limit ${DUE_ROWS_SEEN}
      ),
      grouped as (
        select due.journey_id, j.app_id, due.version, due.step_id, due.phase, count(*)::int as due
        from due
        join journeys j on j.id = due.journey_id
        where due.due_at <= ${now}
        group by due.journey_id, j.app_id, due.version, due.step_id, due.phase
        limit ${limit}
      )
      -- a row at least, with the next due moment
      select g.*, n.next_due, n.seen
      from (select min(due_at) filter (where due_at > ${now}) as next_due, count(*)::int as seen from due) n
      left join grouped g on true
    `.execute(db);
    const groups = rows.flatMap(({ next_due: _, seen: __, ...g }) => (g.journey_id === null ? [] : [g as DueGroup]));
    return { groups, nextDue: rows[0]?.next_due ?? null, cut: rows[0]?.seen === DUE_ROWS_SEEN };
  }

  /**
   * Up to `limit` due entrants of a group, locked, while its journey is active; those another worker holds, and those
   * with events the journey workers have still to apply (journey_events), are skipped. They are taken before
   * their devices are joined, so the plan reads the due index in order whatever the statistics say (joined first, a
   * plan made on stale ones sorted every due entrant for each batch). Their history is read only `reads.history` (the
   * steps that read it: `stepReadsHistory`), their device's time zone only `reads.zone` (a delay's end).
   */
  async lockDue(
    trx: Transaction<Database>,
    due: { group: DueGroup; now: Date; limit: number },
    reads: { history: boolean; zone: boolean },
  ): Promise<DueEntrant[]> {
    const { group: g, now, limit } = due;
    const { rows } = await sql<DueEntrant>`
      with due as (
        select *
        from journey_entrants e
        where e.due_at <= ${now} and e.journey_id = ${g.journey_id} and e.version = ${g.version}
          and e.step_id = ${g.step_id} and e.phase = ${g.phase}
          -- a journey paused or archived since the poll saw it runs no more batches
          and exists (select 1 from journeys j where j.id = ${g.journey_id} and j.state = 'active')
        order by e.due_at
        limit ${limit}
        for update skip locked
      ),
      -- events recorded before are applied first (one may wake, convert or time out the entrant): looked up once a
      -- batch, as a probe an entrant cost the due path half its rate
      held as (
        select distinct p.app_id, k.key
        from journey_events p, unnest(p.entrant_keys) as k(key)
        where p.entrant_keys && (select array_agg(entrant_key) from due)
      )
      select due.*, ${reads.zone ? sql`d.time_zone` : sql`null::text`} as time_zone,
        ${reads.history ? keptHistory(sql`due.id`, sql`due.entered_at`, sql`due.start_id`) : sql`'[]'::jsonb`} as history
      from due
      ${reads.zone ? sql`join devices d on d.id = due.device_id` : sql``}
      where (due.app_id, due.entrant_key) not in (select app_id, key from held)
    `.execute(trx);
    return rows;
  }

  /**
   * The moves, each only if its entrant's seq is still the one read, with the entries each appends to its history
   * (one row a move that adds any, in the same statement); answers the ids moved.
   */
  async advance(db: Db, moves: EntrantMove[]): Promise<Set<string>> {
    if (moves.length === 0) return new Set();
    const col = <T>(f: (m: EntrantMove) => T) => moves.map(f);
    // a batch's moves append the same few entries (a send's, a delay's): each text is sent and parsed once
    const histories = new Distinct<string>();
    const { rows } = await sql<HistoryRowOf>`
      with moved as (
        update journey_entrants e
        set step_id = t.step_id, phase = t.phase, due_at = t.due_at, wait_event = t.wait_event, on_event = t.on_event,
            outcome = t.outcome, left_at = case when t.outcome is null then null else now() end, seq = e.seq + 1
        from unnest(${col((m) => m.id)}::uuid[], ${col((m) => m.enteredAt.toISOString())}::timestamptz[], ${col((m) => m.seq)}::int[],
                    ${col((m) => m.stepId)}::text[], ${col((m) => m.phase)}::text[],
                    ${col((m) => m.dueAt?.toISOString() ?? null)}::timestamptz[], ${col((m) => m.waitEvent)}::text[],
                    ${col((m) => m.onEvent)}::text[], ${col((m) => m.outcome)}::text[],
                    ${col((m) => (m.history.length > 0 ? histories.placeOf(JSON.stringify(m.history)) : null))}::int[])
          as t(id, entered_at, seq, step_id, phase, due_at, wait_event, on_event, outcome, history_at)
        -- the partition key as read back to the millisecond (JavaScript's precision); the id names the row
        where e.id = t.id and e.entered_at >= t.entered_at and e.entered_at < t.entered_at + interval '1 millisecond'
          and e.seq = t.seq
        returning e.id, e.entered_at, e.seq, e.start_id, t.history_at
      ),
      written as (
        insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
        select m.id, m.entered_at, m.seq, h.entries
        from moved m
        join unnest(${jsonTextArray(histories.values)}::jsonb[]) with ordinality as h(entries, at)
          on h.at = m.history_at
      )
      select id, entered_at, seq, start_id from moved
    `.execute(db);
    await pruneHistory(db, duePruning(rows));
    return new Set(rows.map((r) => r.id));
  }

  /** The entries of one of these entrant keys into a journey, newest first, with their history. */
  async entriesOf(db: Db, appId: string, journeyId: string, entrantKeys: string[]): Promise<EntrantWithHistory[]> {
    return db
      .selectFrom('journey_entrants as e')
      .selectAll()
      .select(
        keptHistory(sql`e.id`, sql`e.entered_at`, sql`e.start_id`)
          .$castTo<HistoryEntry[]>()
          .as('history'),
      )
      .where('app_id', '=', appId)
      .where('entrant_key', 'in', entrantKeys)
      .where('journey_id', '=', journeyId)
      .orderBy('entered_at', 'desc')
      .limit(100)
      .execute();
  }

  /**
   * Remembers who entered which journey among the entrants that entered before `before` (a day's partition about to
   * be dropped, or the default partition's rows past retention), with their last entry: what the re-entry rule reads
   * once their rows are gone.
   */
  async keepEntered(trx: Transaction<Database>, table: string, before: string): Promise<void> {
    await sql`
      insert into journey_entered (journey_id, entrant_key, last_entered_at)
      select e.journey_id, e.entrant_key, max(e.entered_at)
      from ${sql.table(table)} e
      join journeys j on j.id = e.journey_id
      where e.entered_at < ${before}::date
      group by e.journey_id, e.entrant_key
      order by 1, 2
      on conflict (journey_id, entrant_key)
        do update set last_entered_at = greatest(journey_entered.last_entered_at, excluded.last_entered_at)
    `.execute(trx);
  }

  /**
   * Up to `limit` entrants still inside the journey leave it (archived), counted at their step; `more` when as many
   * were inside, so that some may be left. An entrant the engine holds meanwhile is waited for and read again.
   */
  async exitSome(db: Db, exit: { journeyId: string; now: Date; limit: number }): Promise<{ left: LeftAt[]; more: boolean }> {
    const { journeyId, now, limit } = exit;
    const { rows } = await sql<LeftAt & { inside: boolean }>`
      with inside as (
        select id from journey_entrants where journey_id = ${journeyId} and outcome is null limit ${limit}
      ),
      -- by their ids, which the primary keys find (joined, the plan read the whole table a second time)
      left_now as (
        update journey_entrants e
        set phase = 'done', outcome = 'exited', due_at = null, wait_event = null, on_event = null, left_at = ${now},
            seq = e.seq + 1
        where e.id = any(array(select id from inside)) and e.journey_id = ${journeyId} and e.outcome is null
        returning e.id, e.entered_at, e.seq, e.journey_id, e.step_id, e.app_id, e.version, e.device_id, e.entrant_key
      ),
      written as (
        insert into journey_entrant_history (entrant_id, entered_at, seq, entries)
        select id, entered_at, seq, ${entryOf(now, sql`step_id`, 'exited')} from left_now
      )${journeyLeftEventsCte('left_now', 'journey.exited')}
      select journey_id, step_id, count(*)::int as n, false as inside from left_now group by journey_id, step_id
      union all
      select ${journeyId}::uuid, '', count(*)::int, true from inside
    `.execute(db);
    const left = rows.filter((r) => !r.inside).map(({ journey_id, step_id, n }) => ({ journey_id, step_id, n }));
    return { left, more: rows.find((r) => r.inside)!.n === limit };
  }
}

/** Objects, each given its place (from 1, as a PostgreSQL array's) the first time it is seen. */
class Distinct<T> {
  readonly values: T[] = [];
  private readonly places = new Map<T, number>();

  placeOf(value: T): number {
    let place = this.places.get(value);
    if (place === undefined) {
      this.values.push(value);
      place = this.values.length;
      this.places.set(value, place);
    }
    return place;
  }
}
