import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { basic, useHarness } from '../helpers/harness.js';
import { registerDevice, waitFor } from '../helpers/gateways.js';
import { partitionOptions } from '../helpers/partition-options.js';

/**
 * What closing a notification writes (migration 078): its state leaves an index entry only while it is open
 * (notifications_state_idx) or when it ends failed or canceled, and each page keeps room for the closed version of
 * its rows. Listing by state still finds each state's notifications.
 */
const h = useHarness();

type Created = Awaited<ReturnType<typeof h.createApp>>;
let app: Created;

const call = (method: 'GET' | 'POST' | 'DELETE', url: string, key: string, payload?: Record<string, unknown>) =>
  h.server.inject({ method, url, headers: { authorization: basic(key) }, payload });
const listed = async (state: string) => {
  const res = await call('GET', `/v6/notifications?state=${state}`, app.keys.read);
  expect(res.statusCode, res.body).toBe(200);
  return res
    .json()
    .notifications.map((n: { id: string }) => n.id)
    .sort();
};

beforeAll(async () => {
  // no push credentials: a send to its device is answered no_credentials, and the notification ends failed
  app = await h.createApp('com.example.close-writes');
});

describe('notifications: what a close writes', () => {
  it('indexes a state only while open, or once failed or canceled', async () => {
    const { rows } = await sql<{ name: string; predicate: string | null }>`
      select i.relname as name, pg_get_expr(x.indpred, x.indrelid) as predicate
      from pg_index x
      join pg_class i on i.oid = x.indexrelid
      where x.indrelid = 'notifications'::regclass
        and exists (select 1 from unnest(x.indkey) as k(n)
                    join pg_attribute a on a.attrelid = x.indrelid and a.attnum = k.n
                    where a.attname = 'state')
      order by 1`.execute(h.db.db);
    expect(rows).toEqual([
      { name: 'notifications_app_ended_badly_idx', predicate: "(state = ANY (ARRAY['failed'::text, 'canceled'::text]))" },
      { name: 'notifications_state_idx', predicate: "(state = ANY (ARRAY['scheduled'::text, 'sending'::text]))" },
    ]);
  });

  it('leaves room on each page for a closed row beside its open version', async () => {
    const options = await partitionOptions(h.db.db, 'notifications');
    expect(options.length).toBeGreaterThan(1);
    for (const o of options) expect(o).toContain('fillfactor=80');
  });

  it('lists each state: scheduled, canceled, failed', async () => {
    const device = await registerDevice(h, app.keys.sdk, { platform: 'ios' });
    const create = async (notification: Record<string, unknown>) => {
      const res = await call('POST', '/v6/notifications', app.keys.write, { notification: { payload: { alert: 'x' }, ...notification } });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().id as string;
    };
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const scheduled = await create({ to: '*', send_at: later });
    const canceled = await create({ to: '*', send_at: later });
    expect((await call('DELETE', `/v6/notifications/${canceled}`, app.keys.write)).statusCode).toBe(200);
    const failed = await create({ to: [{ name: 'device_id', criteria: [device.id] }] });
    const stateOf = async (id: string) => (await call('GET', `/v6/notifications/${id}`, app.keys.read)).json().state;
    await waitFor('the one-device send failed', async () => (await stateOf(failed)) === 'failed', 10_000);

    expect(await listed('scheduled')).toEqual([scheduled]);
    expect(await listed('canceled')).toEqual([canceled]);
    expect(await listed('failed')).toEqual([failed]);
    expect(await listed('sending')).toEqual([]);
  });
});
