import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { DeliverableDevicesRepository, type Deliverable, type DeliverablePageSpec } from '../../src/db/repositories/deliverable-devices.js';
import type { LiveActivityRef } from '../../src/domain/live-activity.js';
import { useHarness } from '../helpers/harness.js';

/**
 * A fan-out reads its pages grouped (`pageDeliverableGroups`): each page must hold exactly the devices
 * `pageDeliverable` reads for it, sorted by gateway, whatever the cursor, the range bound, the page size, the devices
 * not allowed, or the audience (an activity's token holders included).
 */
describe('a fan-out page grouped by gateway', () => {
  const h = useHarness();
  const devices = new DeliverableDevicesRepository();
  const activity = 'match-1';
  let app: string;
  let ids: string[];

  beforeAll(async () => {
    app = (await h.createApp()).app.id;
    const other = (await h.createApp()).app.id;
    const platforms = ['ios', 'android', 'web', 'huawei'];
    for (let i = 0; i < 60; i++) await sql`insert into devices (app_id, platform) values (${app}::uuid, 'ios')`.execute(h.db.db);
    ids = (await h.db.db.selectFrom('devices').select('id').where('app_id', '=', app).orderBy('id').execute()).map((r) => r.id);
    // each device's kind by its place in id order, so that every range of the pages below holds each kind
    for (const [i, id] of ids.entries()) {
      await sql`
        update devices
        set platform = ${platforms[i % 4]}, development = ${i % 3 === 0}, token = ${i % 11 === 5 ? null : `token-${i}`},
          notifications_allowed = ${i % 7 === 0 ? 'Disabled' : null}, erased_at = ${i % 13 === 12 ? new Date() : null}
        where id = ${id}::uuid`.execute(h.db.db);
    }
    // another app's device holding the same activity id: never in this app's pages
    const [otherDevice] = (
      await sql<{
        id: string;
      }>`insert into devices (app_id, platform, token) values (${other}::uuid, 'ios', 'token-other') returning id`.execute(h.db.db)
    ).rows;
    // every other iOS device of the app holds the activity's token (a device's own token plays no part)
    const holders = [...ids.filter((_, i) => i % 8 === 0 && i % 13 !== 12).map((id) => ({ id, app })), { id: otherDevice!.id, app: other }];
    for (const r of holders)
      await sql`
        insert into live_activity_tokens (device_id, activity_id, app_id, activity_type, token)
        values (${r.id}::uuid, ${activity}, ${r.app}::uuid, 'Score', ${`la-${r.id}`})`.execute(h.db.db);
  });

  /** `pageDeliverable`'s page as the groups read it: sendable ids per gateway, in id order, and the counts. */
  const grouped = (page: Deliverable[]) => {
    const groups = new Map<string, { platform: string; development: boolean; ids: string[] }>();
    for (const d of page.filter((d) => !d.not_allowed)) {
      const key = `${d.platform}:${d.development}`;
      if (!groups.has(key)) groups.set(key, { platform: d.platform, development: d.development, ids: [] });
      groups.get(key)!.ids.push(d.id);
    }
    return {
      read: page.length,
      last: page.at(-1)?.id ?? null,
      notAllowed: page.filter((d) => d.not_allowed).length,
      groups: [...groups.values()].sort((a, b) => (a.platform + a.development < b.platform + b.development ? -1 : 1)),
    };
  };

  const update: LiveActivityRef = { event: 'update', activity_type: null, activity_id: activity, channel: null };
  it.each([
    { name: 'a visible push', visible: true, liveActivity: null },
    { name: 'a silent push', visible: false, liveActivity: null },
    { name: "an activity's update", visible: false, liveActivity: update },
  ])('pages as pageDeliverable does: $name', async ({ visible, liveActivity }) => {
    const now = new Date();
    for (const limit of [1, 7, 25, 100])
      for (const upToId of [null, ids[40]!]) {
        let afterId: string | null = ids[3]!;
        let pages = 0;
        let sent = 0;
        for (;;) {
          const spec: DeliverablePageSpec = { afterId, upToId, limit, now, visible, liveActivity };
          const page = await devices.pageDeliverableGroups(h.db.db, app, null, spec);
          const expected = await devices.pageDeliverable(h.db.db, app, null, spec);
          expect(page).toEqual(grouped(expected));
          sent += page.read - page.notAllowed;
          pages += 1;
          if (page.last === null) break;
          afterId = page.last;
        }
        expect(pages).toBeGreaterThan(1);
        expect(sent).toBeGreaterThan(0);
      }
  });

  it("reads an activity's holders only, within the page's bounds", async () => {
    const spec = { afterId: ids[10]!, upToId: ids[30]!, limit: 100, now: new Date(), visible: false, liveActivity: update };
    const page = await devices.pageDeliverableGroups(h.db.db, app, null, spec);
    const holders = await h.db.db
      .selectFrom('live_activity_tokens')
      .select('device_id')
      .where('app_id', '=', app)
      .where('device_id', '>', ids[10]!)
      .where('device_id', '<=', ids[30]!)
      .orderBy('device_id')
      .execute();
    expect(page.groups.flatMap((g) => g.ids).sort()).toEqual(holders.map((r) => r.device_id));
    expect(page.groups.map((g) => g.platform)).toEqual(page.groups.map(() => 'ios'));
    expect(page.notAllowed).toBe(0);
  });
});
