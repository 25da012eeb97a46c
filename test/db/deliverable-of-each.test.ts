import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { DeliverableDevicesRepository } from '../../src/db/repositories/deliverable-devices.js';
import type { Filter } from '../../src/domain/filters.js';
import { useHarness } from '../helpers/harness.js';

/**
 * Many audiences at once (a group of notifications being created): those that only name devices or users are
 * looked up by key, the rest compiled. Either way each list must be what `pageDeliverable` selects for it alone.
 */
describe('the deliverable devices of many audiences at once', () => {
  const h = useHarness();
  const devices = new DeliverableDevicesRepository();
  const ids: Record<string, string> = {};
  let app: string;
  let other: string;

  beforeAll(async () => {
    app = (await h.createApp()).app.id;
    other = (await h.createApp()).app.id;
    type State = 'live' | 'erased' | 'no token' | 'invalidated' | 'Disabled' | 'Enabled';
    const rows: [name: string, appId: string, user: string | null, state: State][] = [
      ['a1', app, 'alice', 'live'],
      ['a2', app, 'alice', 'live'],
      ['a3', app, 'alice', 'live'],
      ['a-erased', app, 'alice', 'erased'],
      ['b1', app, 'bob', 'live'],
      ['b-no-token', app, 'bob', 'no token'],
      ['b-invalid', app, 'bob', 'invalidated'],
      ['anon', app, null, 'live'],
      ['other-alice', other, 'alice', 'live'],
      // live devices that reported whether they may show notifications (the others never did)
      ['c-disabled', app, 'carol', 'Disabled'],
      ['c-enabled', app, 'carol', 'Enabled'],
      ['c-unknown', app, 'carol', 'live'],
    ];
    for (const [name, appId, user, state] of rows) {
      const id = randomUUID();
      ids[name] = id;
      await sql`
        insert into devices (id, app_id, platform, token, user_id, erased_at, token_invalidated_at, notifications_allowed)
        values (${id}::uuid, ${appId}::uuid, ${name.length % 2 ? 'ios' : 'android'}, ${state === 'no token' ? null : `token-${id}`},
          ${user}, ${state === 'erased' ? new Date() : null}, ${state === 'invalidated' ? new Date() : null},
          ${state === 'Disabled' || state === 'Enabled' ? state : null})`.execute(h.db.db);
    }
  });

  it('selects by key what the compiled filters select, audience by audience, limit included', async () => {
    const byId = (...names: string[]): Filter[] => [{ name: 'device_id', criteria: names.map((n) => ids[n] ?? n) }];
    const audiences = [
      { appId: app, filters: byId('a1') },
      { appId: app, filters: [{ name: 'device_id', criteria: [ids.b1!.toUpperCase()] }] },
      { appId: app, filters: byId('a1', 'a1', 'b1', 'anon') }, // three distinct: the limit keeps the first two by id
      { appId: app, filters: byId('a-erased', 'b-no-token', 'b-invalid') },
      { appId: app, filters: byId('not-a-uuid') },
      { appId: app, filters: byId('other-alice') }, // another app's device
      { appId: app, filters: [{ name: 'user_id', criteria: ['alice'] }] }, // three live: the first two
      { appId: app, filters: [{ name: 'user_id', criteria: ['bob', 'alice', 'bob'] }] },
      { appId: other, filters: [{ name: 'user_id', criteria: ['alice'] }] },
      { appId: app, filters: [{ name: 'user_id', criteria: ['nobody'] }] },
      // not keys alone: compiled
      { appId: app, filters: [{ name: 'user_id', criteria: ['alice'], not_filter: true }] },
      { appId: app, filters: [...byId('a1', 'b1'), { name: 'user_id', criteria: ['bob'] }] },
      { appId: app, filters: null },
    ].map((a) => ({ ...a, visible: true }));
    const page = { limit: 2, now: new Date() };
    const together = await devices.deliverableOfEach(h.db.db, audiences, page);
    const alone = await Promise.all(
      audiences.map((a) => devices.pageDeliverable(h.db.db, a.appId, a.filters, { afterId: null, visible: true, ...page })),
    );
    // with each device's token as it is now
    expect(together.map((list) => list.map(({ token: _token, ...d }) => d))).toEqual(alone);
    for (const list of together) for (const d of list) expect(d.token).toBe(`token-${d.id}`);
    // and what they select is what was meant
    const names = (list: { id: string }[]) => list.map((d) => Object.keys(ids).find((k) => ids[k] === d.id)).sort();
    expect(names(together[0]!)).toEqual(['a1']);
    expect(names(together[1]!)).toEqual(['b1']);
    expect(together[2]).toHaveLength(2);
    expect(together[3]).toEqual([]);
    expect(together[4]).toEqual([]);
    expect(together[5]).toEqual([]);
    expect(together[6]).toHaveLength(2);
    expect(names(together[8]!)).toEqual(['other-alice']);
    expect(names(together[11]!)).toEqual(['b1']);
  });

  it('flags the devices whose notifications are Disabled, for a visible push only, by key and compiled alike', async () => {
    const carol: Filter[] = [{ name: 'user_id', criteria: ['carol'] }];
    const compiled: Filter[] = [...carol, { name: 'notifications_allowed', criteria: ['Enabled', 'Disabled', 'Unknown'] }];
    const audiences = [
      { appId: app, filters: carol, visible: true },
      { appId: app, filters: carol, visible: false },
      { appId: app, filters: [{ name: 'device_id', criteria: [ids['c-disabled']!] }], visible: true },
      { appId: app, filters: compiled, visible: true },
      { appId: app, filters: compiled, visible: false },
    ];
    const page = { limit: 10, now: new Date() };
    const together = await devices.deliverableOfEach(h.db.db, audiences, page);
    const alone = await Promise.all(
      audiences.map((a) => devices.pageDeliverable(h.db.db, a.appId, a.filters, { afterId: null, visible: a.visible, ...page })),
    );
    expect(together.map((list) => list.map(({ token: _token, ...d }) => d))).toEqual(alone);
    const flags = (list: { id: string; not_allowed: boolean }[]) =>
      Object.fromEntries(list.map((d) => [Object.keys(ids).find((k) => ids[k] === d.id), d.not_allowed]));
    expect(flags(together[0]!)).toEqual({ 'c-disabled': true, 'c-enabled': false, 'c-unknown': false });
    expect(flags(together[1]!)).toEqual({ 'c-disabled': false, 'c-enabled': false, 'c-unknown': false });
    expect(flags(together[2]!)).toEqual({ 'c-disabled': true });
    expect(flags(together[3]!)).toEqual(flags(together[0]!));
    expect(flags(together[4]!)).toEqual(flags(together[1]!));
  });
});
