import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PartitionsRepository } from '../../src/db/repositories/partitions.js';
import { AuditRepository } from '../../src/db/repositories/audit.js';
import { WebhooksRepository } from '../../src/db/repositories/webhooks.js';
import { startWebhookSender } from '../../src/delivery/webhooks.js';
import { maintainPartitions, retentionOf } from '../../src/delivery/retention.js';
import { WebhookClient } from '../../src/gateways/webhook-client.js';
import { loadConfig } from '../../src/platform/config.js';
import { createLogger } from '../../src/platform/logger.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { createRepositories } from '../../src/services/deps.js';

const DAY_MS = 86_400_000;
const dayOf = (at: number) => new Date(at).toISOString().slice(0, 10);

/**
 * What happens to webhooks over days, with the times written into the rows: an endpoint failing for 3 days is
 * disabled with pushd's audit row, events pending for 3 days are marked failed, and the events and attempts are
 * dropped by day past RETENTION_WEBHOOK_EVENTS_DAYS.
 */
describe('webhooks over days', () => {
  let h: Harness;
  let rx: Receiver;
  let keys: { read: string; write: string };
  const log = createLogger('silent');

  beforeAll(async () => {
    rx = await startReceiver();
    h = await createHarness({ env: { WEBHOOK_ALLOWED_ORIGINS: rx.origin } });
    keys = (await h.createApp('com.example.hookdays')).keys;
  });
  afterAll(async () => {
    await h?.close();
    await rx?.close();
  });

  const api = async (method: 'GET' | 'POST', url: string, key: string, payload?: object) =>
    h.server.inject({ method, url, headers: { authorization: basic(key) }, ...(payload && { payload }) });
  const createEndpoint = async () => {
    const res = await api('POST', '/v6/webhooks', keys.write, { url: rx.url, events: ['*'] });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().webhook.id as string;
  };
  /** An endpoint failing since `days` ago, resting an hour more (so nothing of it is sent meanwhile). */
  const failingFor = async (id: string, days: number) =>
    sql`update webhook_endpoints set failures = 30, failing_since = now() - make_interval(secs => ${days * 86_400}::float8),
        next_attempt_at = now() + interval '1 hour' where id = ${id}::uuid`.execute(h.db.db);
  const eventAt = async (endpointId: string, daysAgo: number) => {
    const { rows } = await sql<{ id: string }>`
      insert into webhook_events (endpoint_id, app_id, type, data, created_at)
      select id, app_id, 'conversion', '{}'::jsonb, now() - make_interval(secs => ${daysAgo * 86_400}::float8)
      from webhook_endpoints where id = ${endpointId}::uuid
      returning id`.execute(h.db.db);
    return rows[0]!.id;
  };
  const stateOf = async (eventId: string) =>
    (await sql<{ state: string }>`select state from webhook_events where id = ${eventId}::uuid`.execute(h.db.db)).rows[0]?.state;

  it('disables an endpoint failing for 3 days with an audit row by pushd, and marks failed the events pending as long', async () => {
    const dead = await createEndpoint();
    const flaky = await createEndpoint();
    await failingFor(dead, 3.01);
    await failingFor(flaky, 2.9);
    const old = await eventAt(flaky, 3.01);
    const recent = await eventAt(flaky, 2.9);

    // a sender of its own: it looks for what is past 3 days when it starts
    const client = new WebhookClient({ allowedOrigins: [rx.origin], timeoutMs: 1000, maxSockets: 2 });
    const sender = startWebhookSender({
      db: h.db.db,
      webhooks: new WebhooksRepository(),
      audit: new AuditRepository(),
      transport: client,
      keyring: h.secrets,
      log,
      batchSize: 10,
      concurrency: 2,
      pollMs: 20,
      leaseMs: 3000,
    });
    try {
      const got = await waitFor('the endpoint disabled', async () => {
        const w = (await api('GET', `/v6/webhooks/${dead}`, keys.read)).json().webhook;
        return w.enabled ? null : w;
      });
      expect(got.disabled_reason).toBe('the receiver failed for 3 days');
      await waitFor('the old event given up', async () => (await stateOf(old)) === 'failed');
    } finally {
      await sender.stop();
      client.close();
    }
    expect((await api('GET', `/v6/webhooks/${flaky}`, keys.read)).json().webhook.enabled).toBe(true);
    expect(await stateOf(recent)).toBe('pending');
    const entries = (await api('GET', '/v6/audit?action=webhook.disabled', keys.write)).json().entries;
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      actor: { role: 'system' },
      details: { endpoint_id: dead, url: rx.url, reason: 'the receiver failed for 3 days' },
    });
    expect(rx.requests).toHaveLength(0);
  });

  it('keeps events and attempts RETENTION_WEBHOOK_EVENTS_DAYS, dropping their days whole', async () => {
    const endpoint = await createEndpoint();
    const today = await eventAt(endpoint, 0);
    await new WebhooksRepository().recordAttempts(h.db.db, [
      { endpoint_id: endpoint, events: 1, status: 204, latency_ms: 3, error: null, snippet: '' },
    ]);
    const retention = retentionOf(loadConfig({ RETENTION_WEBHOOK_EVENTS_DAYS: '7' }));
    const partitions = new PartitionsRepository();
    // 9 days on, today's day is past 7 days of retention: its partitions go, and the days ahead are made
    const later = Date.now() + 9 * DAY_MS;
    const result = await maintainPartitions(
      { db: h.db.db, repos: { ...createRepositories(), partitions }, log },
      retention,
      new Date(later),
    );
    for (const table of ['webhook_events', 'webhook_attempts'] as const) {
      expect(result[table].dropped).toContain(dayOf(Date.now()));
      expect(result[table].dropped).not.toContain(dayOf(later - 6 * DAY_MS));
      expect(result[table].created).toContain(dayOf(later));
    }
    expect(await stateOf(today)).toBeUndefined();
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from webhook_attempts`.execute(h.db.db);
    expect(rows[0]!.n).toBe(0);
  });
});
