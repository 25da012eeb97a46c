import { beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { ManualClock, useHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';
import { applyEvents, journeyApi } from '../http/journey-support.js';
import { createLogger } from '../../src/platform/logger.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { createRepositories } from '../../src/services/deps.js';
import type { HistoryEntry } from '../../src/domain/journey-history.js';
import { keptHistory } from '../../src/db/repositories/journey-entrant-history.js';

type App = Awaited<ReturnType<Harness['createApp']>>;

/**
 * An entrant's history kept off its row (migration 070): one row of journey_entrant_history a move that adds entries,
 * written by the statement that moves it, bounded for an entrant that moves for ever, shown by the API as the first
 * entry and the last 99 (as the row's array was), and dropped by retention with its day's entrants.
 */
describe('journeys: the history table', () => {
  const clock = new ManualClock(new Date('2026-05-10T12:00:00Z'));
  const h = useHarness({ clock, env: { RETENTION_JOURNEY_ENTRANTS_DAYS: '3' } });
  let app: App;
  const maintain = (at: string) =>
    maintainPartitions({ db: h.db.db, repos: createRepositories(), log: createLogger('silent') }, retentionOf(h.config), new Date(at));
  beforeAll(async () => {
    app = await h.createApp();
    // the day's partitions, which the migration made for the days around the real date
    await maintain('2026-05-10T12:00:00Z');
  });
  const api = journeyApi(h, () => app);
  const repos = createRepositories();
  const entrantOf = async (journeyId: string) =>
    h.db.db.selectFrom('journey_entrants').selectAll().where('journey_id', '=', journeyId).executeTakeFirstOrThrow();
  /** The entrant's own rows, after its start's (seq 0, shared by all who entered with it) when it names one. */
  const historyRows = async (entrant: { id: string; start_id: string | null }) =>
    (
      await sql<{ seq: number; entries: HistoryEntry[]; partition: string }>`
        select seq, entries, tableoid::regclass::text as partition from journey_entrant_history
        where entrant_id in (${entrant.id}, ${entrant.start_id}) order by seq`.execute(h.db.db)
    ).rows;

  it('appends a row a move, keeps the first and the last 99 rows or more, and the API shows the first entry and the last 99', async () => {
    const j = await api.create({ name: 'loop', trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '1h' }] });
    const d = await api.device();
    await api.enter(j.id, d);
    const entrant = await entrantOf(j.id);
    const entered = await historyRows(entrant);
    expect(entered.map((r) => [r.seq, r.entries.map((e) => e.k)])).toEqual([[0, ['entered', 'waiting']]]);
    expect(entrant).not.toHaveProperty('history');

    // 250 moves, as the engine writes them (one without entries, which writes no row)
    const all: HistoryEntry[] = [...entered[0]!.entries];
    for (let seq = 0; seq < 250; seq++) {
      const added: HistoryEntry[] =
        seq === 7 ? [] : [{ t: Date.parse('2026-05-10T12:00:00Z') + seq * 1000, s: 'wait', k: 'updated', c: seq }];
      all.push(...added);
      const move = { id: entrant.id, enteredAt: entrant.entered_at, seq, stepId: 'wait', phase: 'waiting' as const, history: added };
      const moved = await repos.journeyEntrants.advance(h.db.db, [
        { ...move, dueAt: new Date('2026-05-11T00:00:00Z'), waitEvent: null, onEvent: null, outcome: null },
      ]);
      expect(moved.size).toBe(1);
    }
    const rows = await historyRows(entrant);
    // pruned at seq 200: the first row and the 99 before it kept, then 201..250
    expect(rows.length).toBe(1 + 99 + 50);
    expect(rows[0]!.seq).toBe(0);
    expect(rows.slice(1).map((r) => r.seq)).toEqual(Array.from({ length: 149 }, (_, i) => 102 + i));
    expect(new Set(rows.map((r) => r.partition))).toEqual(new Set(['journey_entrant_history_p20260510']));

    // what the row's array held (migration 058's cut): the first entry and the last 99, every one in order
    const kept = [all[0]!, ...all.slice(-99)];
    const [shown] = await api.entrants(j.id, `device:${d}`);
    expect(shown!.history).toEqual(
      kept.map((e) => ({
        at: new Date(e.t).toISOString(),
        step: e.s,
        what: e.k,
        ...(e.k === 'waiting' && { until: new Date(e.u!).toISOString() }),
        ...(e.c !== undefined && { devices_changed: e.c }),
      })),
    );
    expect(shown!.history.at(1)).toMatchObject({ devices_changed: 151 });
  });

  it('entrants that enter by one start together share its first row, and each shows it as its own', async () => {
    const j = await api.create({ name: 'shared', trigger: { event: 'joined' }, steps: [{ id: 'wait', type: 'delay', duration: '1h' }] });
    const devices = [await api.device(), await api.device(), await api.device()];
    for (const d of devices)
      expect((await call(h, 'POST', `/v6/devices/${d}/events`, app.keys.sdk, { events: [{ name: 'joined' }] })).statusCode).toBe(202);
    expect(await applyEvents(h)).toBe(3);
    const entrants = await h.db.db.selectFrom('journey_entrants').selectAll().where('journey_id', '=', j.id).execute();
    expect(entrants).toHaveLength(3);
    const starts = new Set(entrants.map((e) => e.start_id));
    expect(starts.size).toBe(1);
    expect([...starts][0]).not.toBeNull();
    // one row for the three, none of their own until they move
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from journey_entrant_history
      where entrant_id = any(${[...entrants.map((e) => e.id), entrants[0]!.start_id]}::uuid[])`.execute(h.db.db);
    expect(rows[0]!.n).toBe(1);
    for (const d of devices) {
      const [shown] = await api.entrants(j.id, `device:${d}`);
      expect(shown!.history.map((x) => [x.step, x.what])).toEqual([
        ['wait', 'entered'],
        ['wait', 'waiting'],
      ]);
    }
    // a move appends the entrant's own row after the shared one
    const first = entrants[0]!;
    await repos.journeyEntrants.advance(h.db.db, [
      {
        id: first.id,
        enteredAt: first.entered_at,
        seq: 0,
        stepId: 'wait',
        phase: 'done',
        dueAt: null,
        waitEvent: null,
        onEvent: null,
        outcome: 'completed',
        history: [{ t: Date.parse('2026-05-10T13:00:00Z'), s: 'wait', k: 'exited' }],
      },
    ]);
    expect((await historyRows(first)).map((r) => [r.seq, r.entries.map((e) => e.k)])).toEqual([
      [0, ['entered', 'waiting']],
      [1, ['exited']],
    ]);
  });

  it('shows a history of 100 entries whole; of 101, the first entry and the last 99, across rows of any size', async () => {
    const kept = async (sizes: number[]) => {
      const entrant = { id: crypto.randomUUID(), enteredAt: new Date('2026-05-10T12:00:00Z') };
      let t = 0;
      for (const [seq, n] of sizes.entries()) {
        const entries = Array.from({ length: n }, () => ({ t: t++ }));
        await sql`insert into journey_entrant_history values (${entrant.id}, ${entrant.enteredAt}, ${seq}, ${JSON.stringify(entries)})`.execute(
          h.db.db,
        );
      }
      const { rows } = await sql<{
        h: { t: number }[];
      }>`select ${keptHistory(sql`${entrant.id}::uuid`, sql`${entrant.enteredAt}::timestamptz`, sql`null::uuid`)} as h`.execute(h.db.db);
      return rows[0]!.h.map((e) => e.t);
    };
    const upTo = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
    expect(await kept([])).toEqual([]);
    expect(await kept([2, 48, 50])).toEqual(upTo(0, 100));
    expect(await kept([2, 49, 50])).toEqual([0, ...upTo(2, 101)]);
    expect(await kept([1, 300, 1])).toEqual([0, ...upTo(203, 302)]);
  });

  it('an archive and an exit write the leaving entry as a row; retention drops the rows with their day', async () => {
    const j = await api.create({ name: 'kept', trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '1h' }] });
    const d = await api.device();
    await api.enter(j.id, d);
    const entrant = await entrantOf(j.id);
    expect((await call(h, 'POST', `/v6/journeys/${j.id}/archive`, app.keys.write)).statusCode).toBe(200);
    const rows = await historyRows(entrant);
    expect(rows.map((r) => [r.seq, r.entries.map((e) => e.k), r.partition])).toEqual([
      [0, ['entered', 'waiting'], 'journey_entrant_history_p20260510'],
      [1, ['exited'], 'journey_entrant_history_p20260510'],
    ]);
    expect((await api.entrants(j.id, `device:${d}`))[0]!.history.map((x) => x.what)).toEqual(['entered', 'waiting', 'exited']);

    expect((await maintain('2026-05-13T12:00:00Z')).journey_entrant_history.dropped).not.toContain('2026-05-10');
    expect(await historyRows(entrant)).toHaveLength(2);
    const dropped = await maintain('2026-05-14T12:00:00Z');
    expect(dropped.journey_entrants.dropped).toContain('2026-05-10');
    expect(dropped.journey_entrant_history.dropped).toContain('2026-05-10');
    expect(await historyRows(entrant)).toEqual([]);
  });
});
