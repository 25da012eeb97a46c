import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { runCli } from '../cli/run-cli.js';

/**
 * `GET /v6/app` and `PATCH /v6/app`: the app's frequency caps, quiet hours and default time zone, read with a read
 * key and changed with a write key, through the service `pushd app set-limits` uses (each sees the other's change);
 * `max_per_minute` is shown but stays the operator's.
 */
describe('app settings API', () => {
  let h: Harness;
  let appId: string;
  let keys: { read: string; write: string; sdk: string };

  beforeAll(async () => {
    h = await createHarness();
    const created = await h.createApp('com.example.settings');
    appId = created.app.id;
    keys = created.keys;
  });
  afterAll(async () => {
    await h?.close();
  });

  const get = (key: string) => h.server.inject({ method: 'GET', url: '/v6/app', headers: { authorization: basic(key) } });
  const patch = (key: string, payload: unknown) =>
    h.server.inject({ method: 'PATCH', url: '/v6/app', headers: { authorization: basic(key) }, payload: payload as object });
  const none = { max_per_minute: null, default_time_zone: null, quiet_hours: null, frequency_caps: null };

  it('answers the settings to a read key, and changes them with a write key only', async () => {
    const read = await get(keys.read);
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json()).toEqual({ app_id: appId, ...none });
    expect((await get(keys.sdk)).statusCode).toBe(403);
    expect((await patch(keys.read, { frequency_caps: null })).statusCode).toBe(403);
    expect((await patch(keys.sdk, { frequency_caps: null })).statusCode).toBe(403);
    expect((await patch('not-a-key', { frequency_caps: null })).statusCode).toBe(401);

    const change = {
      frequency_caps: [
        { limit: 3, window: 'day' },
        { limit: 1, window: 'hour' },
      ],
      quiet_hours: { start: '22:00', end: '08:00' },
      default_time_zone: 'Europe/Paris',
    };
    const changed = await patch(keys.write, change);
    expect(changed.statusCode, changed.body).toBe(200);
    const now = { app_id: appId, ...change, quiet_hours: { start: '22:00', end: '08:00', then: 'hold' }, max_per_minute: null };
    expect(changed.json()).toEqual(now);
    expect((await get(keys.read)).json()).toEqual(now);
    expect(await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).limitsOf(appId)).toEqual(now);

    // one field at a time, null removes it, the others stay
    expect((await patch(keys.write, { quiet_hours: null })).json()).toEqual({ ...now, quiet_hours: null });
  });

  it('refuses what is not a setting, naming the field', async () => {
    const cases: [unknown, string][] = [
      [{}, 'give default_time_zone, quiet_hours and/or frequency_caps'],
      [{ max_per_minute: 100 }, 'max_per_minute: is set by the operator (pushd app set-limits --max-per-minute), not by an API key'],
      [{ colour: 'red' }, 'unknown field colour'],
      [{ frequency_caps: [] }, 'frequency_caps: must name at least one cap (null removes them)'],
      [{ frequency_caps: [{ limit: 0, window: 'day' }] }, 'frequency_caps[0].limit: must be at least 1'],
      [{ frequency_caps: [{ limit: 1001, window: 'day' }] }, 'frequency_caps[0].limit: must be at most 1000'],
      [{ frequency_caps: [{ limit: 2.5, window: 'day' }] }, 'frequency_caps[0].limit: must be a whole number'],
      [{ frequency_caps: [{ limit: 2, window: 'week' }] }, 'frequency_caps[0].window: must be "minute", "hour" or "day"'],
      [
        {
          frequency_caps: [
            { limit: 2, window: 'day' },
            { limit: 3, window: 'day' },
          ],
        },
        'frequency_caps[1].window: is named twice',
      ],
      [{ frequency_caps: '3/day' }, 'frequency_caps: must be a list of {"limit": N, "window": "minute"|"hour"|"day"}, or null'],
      [{ quiet_hours: { start: '25:00', end: '08:00' } }, 'quiet_hours.start: must be a time of day, HH:MM (00:00 to 23:59)'],
      [{ quiet_hours: { start: '08:00', end: '08:00' } }, 'quiet_hours.end: must differ from start'],
      [{ quiet_hours: { start: '22:00', end: '08:00', then: 'later' } }, 'quiet_hours.then: must be "hold" or "drop"'],
      [{ default_time_zone: 'Mars/Olympus' }, 'default_time_zone: must be an IANA time zone such as Europe/Paris, or null'],
      [{ default_time_zone: 7 }, 'default_time_zone: must be an IANA time zone such as Europe/Paris, or null'],
      [[], 'must be an object'],
    ];
    const before = (await get(keys.read)).json();
    for (const [body, error] of cases) {
      const res = await patch(keys.write, body);
      expect([res.statusCode, res.json()], JSON.stringify(body)).toEqual([400, { error }]);
    }
    expect((await get(keys.read)).json()).toEqual(before);
  });

  it('shows what the CLI set, the operator-only pushes a minute included', async () => {
    const out = await runCli(['app', 'set-limits', '--app', appId, '--cap', '2/hour', '--max-per-minute', '500'], {
      DATABASE_URL: h.databaseUrl,
    });
    expect(out.code, out.stderr).toBe(0);
    expect((await get(keys.read)).json()).toMatchObject({ max_per_minute: 500, frequency_caps: [{ limit: 2, window: 'hour' }] });
  });
});
