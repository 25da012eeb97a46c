import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { ALL_DEVICES_SPEC_KEY } from '../../src/domain/audience-spec.js';
import { timeOrderedUuid } from '../../src/platform/random-id.js';
import { useHarness } from '../helpers/harness.js';
import { insertMessage } from '../http/message-support.js';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const millisOf = (id: string) => parseInt(id.replaceAll('-', '').slice(0, 12), 16);

/** Migration 033: ids made in SQL are time-ordered as the service's are, and in the same order. */
describe('time-ordered ids (pushd_uuid7)', () => {
  const h = useHarness();

  it("makes version 7 UUIDs of the time given, in the order of the service's own for the same instants", async () => {
    const instants = ['1970-01-01T00:00:00.000Z', '2026-11-24T23:59:59.998Z', '2026-11-25T00:00:00.000Z', '2026-11-25T12:34:56.789Z'];
    const { rows } = await sql<{ id: string }>`
      select pushd_uuid7(t)::text as id from unnest(${instants}::timestamptz[]) with ordinality as u(t, n) order by n`.execute(h.db.db);
    for (const [i, { id }] of rows.entries()) {
      expect(id).toMatch(V7);
      expect(millisOf(id)).toBe(Date.parse(instants[i]!));
    }
    // uuid order (bytewise) is time order, for the ids of both makers together
    const mixed = instants.flatMap((at, i) => [rows[i]!.id, timeOrderedUuid(Date.parse(at) + 1)]);
    const { rows: sorted } = await sql<{ id: string }>`select id::text from unnest(${mixed}::uuid[]) id order by id`.execute(h.db.db);
    expect(sorted.map((r) => r.id)).toEqual(mixed);
    // the default is the moment of the call
    const { rows: now } = await sql<{ id: string; ms: number }>`
      select pushd_uuid7()::text as id, (extract(epoch from clock_timestamp()) * 1000)::float8 as ms`.execute(h.db.db);
    expect(now[0]!.id).toMatch(V7);
    expect(Math.abs(millisOf(now[0]!.id) - now[0]!.ms)).toBeLessThan(1000);
  });

  it('is the default id of notifications and messages', async () => {
    const { app } = await h.createApp();
    const audience = await h.db.db
      .insertInto('audiences')
      .values({ app_id: app.id, spec_key: ALL_DEVICES_SPEC_KEY, kind: 'all', name: 'All devices' })
      .returning('id')
      .executeTakeFirstOrThrow();
    const notification = await h.db.db
      .insertInto('notifications')
      .values({ app_id: app.id, audience_id: audience.id, request: '{}', payload: '{}' })
      .returning('id')
      .executeTakeFirstOrThrow();
    expect(notification.id).toMatch(V7);
    const message = await insertMessage(h.db.db, { appId: app.id, audienceId: audience.id, published: new Date(), resolved: false });
    expect(message.id).toMatch(V7);
    // a stored audience keeps a random id: it is kept whatever its age
    expect(audience.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4/);
  });
});
