import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createRepositories } from '../../src/services/deps.js';
import { FIRST_GENERATION, NotificationsRepository } from '../../src/db/repositories/notifications.js';
import { cutBatches } from '../../src/domain/batches.js';
import { useHarness } from '../helpers/harness.js';

/**
 * `insertCut` answers its rows without reading their documents back, and only the columns its callers read: what it
 * answers must be what is stored, as a later read has it.
 */
describe('notifications inserted with their batches (insertCut)', () => {
  const h = useHarness();
  const notifications = new NotificationsRepository();
  const repos = createRepositories();

  it('answers each row as it is stored: the columns its callers read, the request and payload as given', async () => {
    const { app } = await h.createApp();
    const device = (await h.db.db
      .insertInto('devices')
      .values({ app_id: app.id, platform: 'ios', token: randomUUID().replace(/-/g, '') })
      .returning(['id', 'platform', 'development'])
      .executeTakeFirstOrThrow()) as { id: string; platform: 'ios'; development: boolean };
    const payload = { alert: 'say "hi" \\ 日本 🎉', badge: 3, data: { nested: [1, null, 'x'] } };
    const ids = [randomUUID(), randomUUID(), randomUUID()];
    const batches = cutBatches(ids[0]!, FIRST_GENERATION, [device], 0, 500);
    const list = [
      // cut to one device: sending, its fan-out done
      {
        id: ids[0]!,
        appId: app.id,
        audienceId: null,
        request: { to: 'x', payload },
        payload,
        collapseKey: null,
        cut: { batches: 1, targeted: 1 },
      },
      // cut to no device: sent at once
      {
        id: ids[1]!,
        appId: app.id,
        audienceId: null,
        request: { group: 'receipts', payload: {} },
        payload: {},
        collapseKey: null,
        group: 'receipts',
        options: { ttlSeconds: 60, expiresAt: null, priority: 'normal' as const },
        cut: { batches: 0, targeted: 0 },
      },
      // not cut: left to its fan-out
      {
        id: ids[2]!,
        appId: app.id,
        audienceId: null,
        request: { payload: { alert: 'later' } },
        payload: { alert: 'later' },
        collapseKey: null,
      },
    ];
    const answered = await notifications.insertCut(
      h.db.db,
      list,
      repos.batches.batchesInsert([{ notificationId: ids[0]!, generation: FIRST_GENERATION, batches }]),
    );
    expect(answered.map((n) => n.id)).toEqual(ids);
    expect(answered.map((n) => n.state)).toEqual(['sending', 'sent', 'scheduled']);
    // the create answer (id, created_at, state, audience_id, request), the first sends (app_id, payload, localized,
    // expires_at, priority, generation, capped) and the release to the pipeline (next_due_at)
    const used = ['id', 'app_id', 'audience_id', 'created_at', 'state', 'generation', 'next_due_at', 'expires_at', 'priority', 'capped'];
    for (const n of answered) {
      const stored = (await notifications.findById(h.db.db, n.id))!;
      expect(n).toEqual(Object.fromEntries([...used, 'request', 'payload', 'localized'].map((c) => [c, stored[c as keyof typeof stored]])));
    }
    expect(answered[1]!.expires_at!.getTime() - answered[1]!.created_at.getTime()).toBe(60_000);
  });
});
