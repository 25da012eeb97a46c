import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RANGE_SEQ_STRIDE } from '../../src/db/repositories/fanout.js';
import { MAX_RANGES, rangesAfter } from '../../src/delivery/fanout.js';
import { basic, createHarness, redisUrl, type Harness } from '../helpers/harness.js';
import { setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';

/** A UUID at a share of the id space (its first 13 hex digits), the rest as given. */
const uuidAt = (share: number, tail = '0') => {
  const hex = Math.floor(share * 2 ** 52)
    .toString(16)
    .padStart(13, '0')
    .concat(tail.repeat(19));
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
};

describe('rangesAfter: the split of the rest of an audience', () => {
  it('keeps an audience of about one range in the job that read its first page', () => {
    // 200 devices in the first 1% of the id space: about 20,000 in all
    expect(rangesAfter(uuidAt(0.01), 200, 100_000)).toEqual([]);
    expect(rangesAfter(uuidAt(0.01), 200, 19_800)).toEqual([]);
  });

  it('cuts the rest into contiguous ranges of about perRange devices each, the last open-ended', () => {
    const last = uuidAt(0.01);
    const ranges = rangesAfter(last, 200, 1_000); // ~19,800 devices left: 20 ranges
    expect(ranges).toHaveLength(20);
    expect(ranges[0]!.after).toBe(last);
    expect(ranges.at(-1)!.upTo).toBeNull();
    for (let i = 1; i < ranges.length; i++) {
      expect(ranges[i]!.after).toBe(ranges[i - 1]!.upTo);
      expect(ranges[i]!.after > ranges[i - 1]!.after).toBe(true);
    }
    // an inclusive upper bound ends its 52-bit slice: the next range starts at the next slice
    expect(ranges[0]!.upTo).toMatch(/f{3}-f{12}$/);
  });

  it('splits a 50 million device broadcast into at most MAX_RANGES', () => {
    // 200 devices in the first 0.0004% of the id space
    const ranges = rangesAfter(uuidAt(200 / 50_000_000), 200, 100_000);
    expect(ranges).toHaveLength(500);
    expect(rangesAfter(uuidAt(200 / 50_000_000), 200, 1_000)).toHaveLength(MAX_RANGES);
  });
});

const DEVICES = 3000;
const backends = [
  { name: 'postgres' as const, enabled: true, partitions: '1' },
  { name: 'redis' as const, enabled: redisUrl() !== null, partitions: '2' },
];

/**
 * A broadcast split into ranges on each queue backend (Redis with QUEUE_PARTITIONS): every device gets one push,
 * each range fanned out its own part of the id space, and the record reads the counters its batches and ranges
 * hold.
 */
for (const backend of backends) {
  describe.skipIf(!backend.enabled)(`a broadcast fanned out in ranges on the ${backend.name} queue backend`, () => {
    let h: Harness;
    let gw: Gateways;
    let keys: { read: string; write: string };
    let appId: string;

    beforeAll(async () => {
      gw = await startGateways();
      h = await createHarness({
        queue: backend.name,
        workers: true,
        env: {
          ...gw.env,
          QUEUE_PARTITIONS: backend.partitions,
          FANOUT_RANGE_DEVICES: '300',
          FANOUT_PAGE_SIZE: '120',
          DELIVERY_BATCH_SIZE: '100',
        },
      });
      const created = await h.createApp('com.example.ranges');
      keys = created.keys;
      appId = created.app.id;
      await setCredentials(h, appId, gw);
      await sql`
        insert into devices (app_id, platform, token)
        select ${appId}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
        from generate_series(1, ${DEVICES}) as i`.execute(h.db.db);
      // one device whose notifications are Disabled: counted as not allowed, by the range that reads it
      await sql`
        update devices set notifications_allowed = 'Disabled'
        where id = (select id from devices where app_id = ${appId}::uuid order by id desc limit 1)`.execute(h.db.db);
    });
    afterAll(async () => {
      await h?.close();
      await gw?.close();
    });

    it(
      'sends every device one push, from ranges that split the id space, and counts them as one notification',
      { timeout: 120_000 },
      async () => {
        const res = await h.server.inject({
          method: 'POST',
          url: '/v6/notifications',
          headers: { authorization: basic(keys.write) },
          payload: { notification: { to: '*', payload: { alert: 'ranges' } } },
        });
        expect(res.statusCode, res.body).toBe(201);
        const id = res.json().id as string;
        const read = async () =>
          (await h.server.inject({ method: 'GET', url: `/v6/notifications/${id}`, headers: { authorization: basic(keys.read) } })).json();
        const record = await waitFor(
          'the broadcast to be sent',
          async () => ((await read()).state === 'sent' ? await read() : null),
          100_000,
          100,
        );

        const tokens = [...gw.apns.pushes.map((p) => p.token), ...gw.fcm.pushes.map((p) => p.token)];
        expect(tokens).toHaveLength(DEVICES - 1);
        expect(new Set(tokens).size).toBe(DEVICES - 1);
        expect(record).toMatchObject({
          devices_targeted: DEVICES - 1,
          devices_not_allowed: 1,
          pushes_succeeded: DEVICES - 1,
          pushes_failed: 0,
          tokens_invalidated: 0,
          pushes_expired: 0,
          failure_reason: null,
        });

        const ranges = await h.db.db
          .selectFrom('fanout_ranges')
          .select(['range_no', 'done', 'devices_targeted', 'devices_not_allowed'])
          .where('notification_id', '=', id)
          .orderBy('range_no')
          .execute();
        expect(ranges.length).toBeGreaterThan(3);
        expect(ranges.every((r) => r.done)).toBe(true);
        // each range's batches in its own seq block, every device in exactly one batch
        const batches = await sql<{ seq: number; devices: number }>`
        select b.seq, cardinality(b.device_ids) as devices
        from delivery_batches b where b.notification_id = ${id}::uuid`.execute(h.db.db);
        const fromRanges = batches.rows.filter((b) => b.seq >= RANGE_SEQ_STRIDE);
        expect(fromRanges.length).toBeGreaterThan(0);
        expect(new Set(fromRanges.map((b) => Math.floor(b.seq / RANGE_SEQ_STRIDE))).size).toBe(ranges.length);
        const cut = await sql<{ total: number; distinct: number }>`
        select count(*)::int as total, count(distinct d)::int as distinct
        from delivery_batches b cross join unnest(b.device_ids) as d where b.notification_id = ${id}::uuid`.execute(h.db.db);
        expect(cut.rows[0]).toEqual({ total: DEVICES - 1, distinct: DEVICES - 1 });
        const serial = batches.rows.filter((b) => b.seq < RANGE_SEQ_STRIDE).reduce((n, b) => n + b.devices, 0);
        expect(ranges.reduce((n, r) => n + r.devices_targeted, 0) + serial).toBe(DEVICES - 1);
      },
    );
  });
}
