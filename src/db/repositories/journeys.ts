import { sql, type RawBuilder, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, Journey } from '../schema.js';
import type { JourneyDefinition, JourneyState } from '../../domain/journey.js';
import type { Sealed } from '../../domain/secrets.js';

/** The counters kept per step. */
export const STEP_COUNTERS = ['entered', 'waiting', 'passed', 'sent', 'failed', 'converted', 'exited', 'skipped', 'filtered'] as const;
export type StepCounter = (typeof STEP_COUNTERS)[number];
export type StepCounts = Record<StepCounter, number>;
/** A change to a step's counter: `n` added to `counter` of a journey's `step` ('' the trigger). */
export interface CountDelta {
  journeyId: string;
  step: string;
  counter: StepCounter;
  n: number;
}
/**
 * Shards of each step's counters: a writer takes its connection's (its backend's pid), so two transactions open at
 * once seldom write the same row and wait for the other's commit.
 */
const COUNTER_SHARDS = 32;

/**
 * The statement (or the tail of one, after its WITH list) that adds counter deltas to each journey step's counters:
 * `deltas` is a query of (journey_id, step_id, counter, n); the rows are written in one order (no deadlock between
 * two writers).
 */
export function stepCountsUpsert(deltas: RawBuilder<unknown>): RawBuilder<unknown> {
  const columns = sql.join(STEP_COUNTERS.map((c) => sql.ref(c)));
  return sql`
    insert into journey_step_counts (journey_id, step_id, shard, ${columns})
    select d.journey_id, d.step_id, pg_backend_pid() % ${COUNTER_SHARDS},
           ${sql.join(STEP_COUNTERS.map((c) => sql`coalesce(sum(d.n) filter (where d.counter = ${c}), 0)`))}
    from (${deltas}) as d(journey_id, step_id, counter, n)
    group by d.journey_id, d.step_id
    having ${sql.join(
      STEP_COUNTERS.map((c) => sql`coalesce(sum(d.n) filter (where d.counter = ${c}), 0) <> 0`),
      sql` or `,
    )}
    order by d.journey_id, d.step_id collate "C"
    on conflict (journey_id, step_id, shard) do update set
      ${sql.join(STEP_COUNTERS.map((c) => sql`${sql.ref(c)} = journey_step_counts.${sql.ref(c)} + excluded.${sql.ref(c)}`))}`;
}

/** Counter deltas as a query for `stepCountsUpsert`, which sums them by step (`Counts` sends each sum once). */
export function countDeltas(deltas: CountDelta[]): RawBuilder<unknown> {
  return sql`
    select * from unnest(${deltas.map((d) => d.journeyId)}::uuid[], ${deltas.map((d) => d.step)}::text[],
      ${deltas.map((d) => d.counter)}::text[], ${deltas.map((d) => d.n)}::bigint[])`;
}

/** A step of an earlier version that the current one no longer has, with the last version that had it. */
export interface RetiredStep {
  id: string;
  type: string;
  version: number;
}

export interface NewJourney {
  appId: string;
  name: string;
  state: JourneyState;
  definition: JourneyDefinition;
  triggerEvent: string | null;
  listens: string[];
  /** its webhook steps' new signing secret, sealed (none: it keeps the one it has, if any) */
  webhookSecret?: Sealed;
}

/** Journeys, their versions and counters (the entrants are `JourneyEntrantsRepository`'s). */
export class JourneysRepository {
  async insert(trx: Transaction<Database>, j: NewJourney): Promise<Journey> {
    const journey = await trx
      .insertInto('journeys')
      .values({
        app_id: j.appId,
        name: j.name,
        state: j.state,
        definition: JSON.stringify(j.definition),
        trigger_event: j.triggerEvent,
        listens: j.listens,
        webhook_secret: j.webhookSecret ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await trx
      .insertInto('journey_versions')
      .values({ journey_id: journey.id, version: journey.version, definition: JSON.stringify(j.definition) })
      .execute();
    return journey;
  }

  /** A new version: the definition replaced, the version bumped and kept; the events listened for only grow. */
  async newVersion(trx: Transaction<Database>, id: string, j: Omit<NewJourney, 'appId' | 'state'>): Promise<Journey> {
    const journey = await trx
      .updateTable('journeys')
      .set({
        name: j.name,
        definition: JSON.stringify(j.definition),
        trigger_event: j.triggerEvent,
        listens: sql<string[]>`array(select distinct unnest(listens || ${j.listens}::text[]))`,
        version: sql<number>`version + 1`,
        updated_at: sql<Date>`now()`,
        ...(j.webhookSecret && { webhook_secret: j.webhookSecret }),
      })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await trx
      .insertInto('journey_versions')
      .values({ journey_id: id, version: journey.version, definition: JSON.stringify(j.definition) })
      .execute();
    return journey;
  }

  async findForApp(db: Db, appId: string, id: string): Promise<Journey | undefined> {
    return db.selectFrom('journeys').selectAll().where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
  }

  /**
   * The journey locked: `update` for a change of its definition or state, `share` by an entry until it commits (as
   * `listening` does), so a pause or an archive waits for the entries under way and nobody enters once it is archived.
   * `update` is FOR NO KEY UPDATE: the counters' foreign keys (FOR KEY SHARE) go on meanwhile.
   */
  async lock(trx: Transaction<Database>, appId: string, id: string, mode: 'update' | 'share'): Promise<Journey | undefined> {
    const q = trx.selectFrom('journeys').selectAll().where('app_id', '=', appId).where('id', '=', id);
    return (mode === 'update' ? q.forNoKeyUpdate() : q.forShare()).executeTakeFirst();
  }

  /** The app's journeys, newest first. */
  async list(db: Db, appId: string, limit: number, offset: number): Promise<Journey[]> {
    return db
      .selectFrom('journeys')
      .selectAll()
      .where('app_id', '=', appId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .offset(offset)
      .execute();
  }

  /** Its new state; archived, its entrants still inside are to leave (`exiting`, until `doneExiting`). */
  async setState(db: Db, id: string, state: JourneyState): Promise<Journey> {
    return db
      .updateTable('journeys')
      .set({ state, updated_at: sql<Date>`now()`, ...(state === 'archived' && { exiting: true }) })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** Archived journeys whose entrants are still leaving. */
  async exitingIds(db: Db): Promise<string[]> {
    const rows = await db.selectFrom('journeys').select('id').where('exiting', '=', true).execute();
    return rows.map((r) => r.id);
  }

  /** The journey locked while its entrants still leave, unless another worker holds it: answers whether it is. */
  async lockExiting(trx: Transaction<Database>, id: string): Promise<boolean> {
    const row = await trx
      .selectFrom('journeys')
      .select('id')
      .where('id', '=', id)
      .where('exiting', '=', true)
      .forNoKeyUpdate()
      .skipLocked()
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Every entrant of the archived journey has left. */
  async doneExiting(trx: Transaction<Database>, id: string): Promise<void> {
    await trx.updateTable('journeys').set({ exiting: false }).where('id', '=', id).execute();
  }

  /**
   * The apps' journeys that are not archived and that an event of these keys enters, or that wait for or exit on
   * one: those a batch of recorded events may move (the caller sorts them to each entrant by app and keys). Held
   * until the batch commits, as `lock`'s `share`.
   */
  async listening(trx: Transaction<Database>, appIds: string[], keys: string[]): Promise<Journey[]> {
    const { rows } = await sql<Journey>`
      select j.* from journeys j
      where j.app_id = any(${appIds}::uuid[]) and j.state <> 'archived'
        and (j.trigger_event = any(${keys}::text[]) or j.listens && ${keys}::text[])
      for share of j
    `.execute(trx);
    return rows;
  }

  /** The journey's webhook signing secret, sealed (null: none of its versions had a webhook step). */
  async webhookSecret(db: Db, journeyId: string): Promise<Sealed | null> {
    const row = await db.selectFrom('journeys').select('webhook_secret').where('id', '=', journeyId).executeTakeFirst();
    return row?.webhook_secret ?? null;
  }

  /** The journeys' webhook secrets, for a rotation of the secrets key to reseal. */
  async storedSecrets(db: Db): Promise<{ id: string; webhook_secret: Sealed }[]> {
    const rows = await db
      .selectFrom('journeys')
      .select(['id', 'webhook_secret'])
      .where('webhook_secret', 'is not', null)
      .orderBy('id')
      .forUpdate()
      .execute();
    return rows as { id: string; webhook_secret: Sealed }[];
  }

  async resealSecret(db: Db, id: string, sealed: Sealed): Promise<void> {
    await db.updateTable('journeys').set({ webhook_secret: sealed }).where('id', '=', id).execute();
  }

  async definition(db: Db, journeyId: string, version: number): Promise<JourneyDefinition | undefined> {
    const row = await db
      .selectFrom('journey_versions')
      .select('definition')
      .where('journey_id', '=', journeyId)
      .where('version', '=', version)
      .executeTakeFirst();
    return row?.definition;
  }

  /** The steps of each journey's earlier versions that its current version no longer has: id, type, last version. */
  async retiredSteps(db: Db, journeyIds: string[]): Promise<Map<string, RetiredStep[]>> {
    const out = new Map<string, RetiredStep[]>();
    if (journeyIds.length === 0) return out;
    const { rows } = await sql<RetiredStep & { journey_id: string }>`
      select distinct on (v.journey_id, s->>'id') v.journey_id, s->>'id' as id, s->>'type' as type, v.version
      from journey_versions v
      join journeys j on j.id = v.journey_id and v.version < j.version
      cross join jsonb_array_elements(v.definition->'steps') as s
      where v.journey_id = any(${journeyIds}::uuid[])
        and not exists (select 1 from jsonb_array_elements(j.definition->'steps') c where c->>'id' = s->>'id')
      order by v.journey_id, s->>'id', v.version desc`.execute(db);
    for (const { journey_id, ...step } of rows) out.set(journey_id, [...(out.get(journey_id) ?? []), step]);
    return out;
  }

  /** The counters of the journeys, per step, summed over their shards. */
  async counts(db: Db, journeyIds: string[]): Promise<Map<string, Map<string, StepCounts>>> {
    const out = new Map<string, Map<string, StepCounts>>();
    if (journeyIds.length === 0) return out;
    const rows = await db
      .selectFrom('journey_step_counts')
      .select(['journey_id', 'step_id'])
      .select((eb) => STEP_COUNTERS.map((c) => eb.fn.sum<number>(c).as(c)))
      .where('journey_id', '=', sql<string>`any(${journeyIds}::uuid[])`)
      .groupBy(['journey_id', 'step_id'])
      .execute();
    for (const row of rows) {
      const steps = out.get(row.journey_id) ?? new Map<string, StepCounts>();
      steps.set(row.step_id, Object.fromEntries(STEP_COUNTERS.map((c) => [c, Number(row[c])])) as StepCounts);
      out.set(row.journey_id, steps);
    }
    return out;
  }

  /** Adds the deltas to the counters of this connection's shard, in one statement. */
  async bump(db: Db, deltas: CountDelta[]): Promise<void> {
    if (deltas.length === 0) return;
    await stepCountsUpsert(countDeltas(deltas)).execute(db);
  }
}
