import { DevicesRepository } from '../../src/db/repositories/devices.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { filterSchema, type Filter } from '../../src/domain/filters.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { audienceFor, call } from '../http/device-support.js';
import { scenarioArb, type Scenario } from './filter-arbitraries.js';
import { insertDevices } from './filter-fixtures.js';
import { refMatches } from './filter-reference.js';

/**
 * The SQL compiler against the in-memory reference, on real PostgreSQL: every run inserts a random device
 * set and checks many random filter lists against it, through the repository (count and keyset listing)
 * and, for a few lists a run, through the HTTP API (device_count and the cursor-paged device listing).
 * PROPERTY_RUNS / PROPERTY_SEED / PROPERTY_PATH override the run count, seed and replay path (fast-check prints
 * the seed and path on failure).
 */
const RUNS = Number(process.env.PROPERTY_RUNS ?? 200);
const LISTS_PER_RUN = 50;
const HTTP_LISTS_PER_RUN = 2;

type App = Awaited<ReturnType<Harness['createApp']>>;

describe('filter compiler = reference evaluator (property)', () => {
  let h: Harness;
  let app: App;
  let checked = 0;
  beforeAll(async () => {
    // thousands of requests on a frozen test clock, which never refills a rate limit: not what this test is about
    h = await createHarness({ env: { RATE_LIMIT_PER_SECOND: '0' } });
    app = await h.createApp();
  });
  afterAll(async () => {
    vi.useRealTimers();
    await h?.close();
  });

  async function listAll(filters: Filter[], now: Date, per: number): Promise<string[]> {
    const ids: string[] = [];
    let afterId: string | null = null;
    for (;;) {
      const page = await new DevicesRepository().listAudience(h.db.db, app.app.id, filters, { afterId, limit: per, now });
      ids.push(...page.map((d) => d.id));
      if (page.length < per) return ids;
      afterId = page.at(-1)!.id;
    }
  }

  async function viaHttp(filters: Filter[], now: Date): Promise<{ count: number; ids: string[] }> {
    const audience = await audienceFor(h, app.app.id, filters);
    vi.useFakeTimers({ toFake: ['Date'], now }); // the route's `new Date()` is the scenario's now
    try {
      const count = (await call(h, 'GET', `/v6/audiences/${audience.id}`, app.keys.read)).json().audience.device_count as number;
      const ids: string[] = [];
      // as clients of the public API page: with each page's cursor, until a page comes back with no devices
      for (let cursor = ''; ;) {
        const res = await call(h, 'GET', `/v6/audiences/${audience.id}/devices?per=7${cursor ? `&cursor=${cursor}` : ''}`, app.keys.read);
        const body = res.json();
        if (res.statusCode !== 200 || body.meta.total !== count) throw new Error(`listing failed: ${res.statusCode} ${res.body}`);
        if (body.devices.length === 0) break;
        ids.push(...body.devices.map((d: { id: string }) => d.id));
        cursor = body.meta.cursor;
      }
      return { count, ids };
    } finally {
      vi.useRealTimers();
    }
  }

  async function check({ now, devices, filterLists }: Scenario): Promise<void> {
    await h.db.db.deleteFrom('devices').where('app_id', '=', app.app.id).execute();
    await insertDevices(h.db.db, app.app.id, devices);
    for (const [i, filters] of filterLists.entries()) {
      for (const f of filters) expect(filterSchema.safeParse(f).success, `generated an invalid filter ${JSON.stringify(f)}`).toBe(true);
      const expected = devices
        .filter((d) => refMatches(d, filters, now))
        .map((d) => d.id)
        .sort();
      const where = `filters ${JSON.stringify(filters)} at ${now.toISOString()}`;
      expect(await new DevicesRepository().countAudience(h.db.db, app.app.id, filters, { now }), `count of ${where}`).toBe(expected.length);
      expect(await listAll(filters, now, 1 + (i % 6)), `listing of ${where}`).toEqual(expected);
      if (i < HTTP_LISTS_PER_RUN) {
        const http = await viaHttp(filters, now);
        expect(http.count, `HTTP device_count of ${where}`).toBe(expected.length);
        expect(http.ids, `HTTP listing of ${where}`).toEqual(expected);
      }
      checked++;
    }
  }

  it(`holds for ${RUNS} device sets x ${LISTS_PER_RUN} filter lists`, { timeout: 600_000 }, async () => {
    const started = Date.now();
    await fc.assert(
      fc.asyncProperty(scenarioArb({ devices: 40, filterLists: LISTS_PER_RUN }), (s) => check(s)),
      {
        numRuns: RUNS,
        ...(process.env.PROPERTY_SEED ? { seed: Number(process.env.PROPERTY_SEED) } : {}),
        ...(process.env.PROPERTY_PATH ? { path: process.env.PROPERTY_PATH } : {}),
      },
    );
    expect(checked).toBeGreaterThanOrEqual(RUNS * LISTS_PER_RUN);
    process.stdout.write(`[property] ${checked} filter lists checked in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  });
});
