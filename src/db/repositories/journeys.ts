import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, Journey } from '../schema.js';
import type { JourneyDefinition, JourneyState } from '../../domain/journey.js';
import { isUuid } from '../../domain/cursor.js';

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
/** Shards of each step's counters: writers pick one at random, so concurrent entries seldom wait on one row. */
const COUNTER_SHARDS = 8;

export interface NewJourney {
  appId: string;
  name: string;
  state: JourneyState;
  definition: JourneyDefinition;
  triggerEvent: string | null;
  listens: string[];
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
    if (!isUuid(id)) return undefined;
    return db.selectFrom('journeys').selectAll().where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
  }

  async lock(trx: Transaction<Database>, appId: string, id: string): Promise<Journey | undefined> {
    if (!isUuid(id)) return undefined;
    return trx.selectFrom('journeys').selectAll().where('app_id', '=', appId).where('id', '=', id).forUpdate().executeTakeFirst();
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

  async setState(db: Db, id: string, state: JourneyState): Promise<Journey> {
    return db
      .updateTable('journeys')
      .set({ state, updated_at: sql<Date>`now()` })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** The app's journeys that are not archived and that an event of these keys enters, or that wait for or exit on one. */
  async listening(db: Db, appId: string, keys: string[]): Promise<Journey[]> {
    return db
      .selectFrom('journeys')
      .selectAll()
      .where('app_id', '=', appId)
      .where('state', '<>', 'archived')
      .where((eb) => eb.or([eb('trigger_event', '=', sql<string>`any(${keys}::text[])`), sql<boolean>`listens && ${keys}::text[]`]))
      .execute();
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

  /**
   * Adds the deltas to one shard of each journey step's counters, in one statement (rows in a fixed order: no
   * deadlock between two writers).
   */
  async bump(db: Db, deltas: CountDelta[]): Promise<void> {
    const byStep = new Map<string, { journeyId: string; step: string; counts: StepCounts }>();
    for (const d of deltas) {
      if (d.n === 0) continue;
      const key = `${d.journeyId} ${d.step}`;
      const row = byStep.get(key) ?? {
        journeyId: d.journeyId,
        step: d.step,
        counts: Object.fromEntries(STEP_COUNTERS.map((c) => [c, 0])) as StepCounts,
      };
      row.counts[d.counter] += d.n;
      byStep.set(key, row);
    }
    if (byStep.size === 0) return;
    const rows = [...byStep.keys()].sort().map((k) => byStep.get(k)!);
    const shard = Math.floor(Math.random() * COUNTER_SHARDS);
    const column = (c: StepCounter) => sql`${rows.map((r) => r.counts[c])}::bigint[]`;
    await sql`
      insert into journey_step_counts (journey_id, step_id, shard, ${sql.join(STEP_COUNTERS.map((c) => sql.ref(c)))})
      select t.journey_id, t.step_id, ${shard}, ${sql.join(STEP_COUNTERS.map((c) => sql.ref(`t.${c}`)))}
      from unnest(${rows.map((r) => r.journeyId)}::uuid[], ${rows.map((r) => r.step)}::text[], ${sql.join(STEP_COUNTERS.map(column))})
        as t(journey_id, step_id, ${sql.join(STEP_COUNTERS.map((c) => sql.ref(c)))})
      on conflict (journey_id, step_id, shard) do update set
        ${sql.join(STEP_COUNTERS.map((c) => sql`${sql.ref(c)} = journey_step_counts.${sql.ref(c)} + excluded.${sql.ref(c)}`))}
    `.execute(db);
  }
}
