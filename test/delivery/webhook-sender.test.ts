import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditRepository } from '../../src/db/repositories/audit.js';
import { WebhooksRepository } from '../../src/db/repositories/webhooks.js';
import { startWebhookSender } from '../../src/delivery/webhooks.js';
import type { BatchOutcomes } from '../../src/domain/webhooks.js';
import { WebhookClient } from '../../src/gateways/webhook-client.js';
import { createLogger } from '../../src/platform/logger.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * The sender's round against its lease, with a sender of the test's own: a round starts no request past half its
 * lease, yet a recorded batch whose events span several requests is finished once its first request went out, so
 * none of its events is sent twice.
 */
describe('webhook sender rounds', () => {
  let h: Harness;
  let rx: Receiver;

  beforeAll(async () => {
    rx = await startReceiver();
    h = await createHarness({ env: { WEBHOOK_ALLOWED_ORIGINS: rx.origin } });
  });
  afterAll(async () => {
    await h?.close();
    await rx?.close();
  });

  /** An endpoint of the app for every event type, at the test's receiver. */
  const endpointFor = async (writeKey: string): Promise<string> => {
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/webhooks',
      headers: { authorization: basic(writeKey) },
      payload: { url: rx.url, events: ['*'] },
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().webhook.id as string;
  };

  /** The test's own sender: requests of 2 events, one at a time unless told, a 2 s lease (half of it 1 s). */
  const startSender = (opts: { concurrency: number; busy?: () => boolean } = { concurrency: 1 }) => {
    const client = new WebhookClient({ allowedOrigins: [rx.origin], timeoutMs: 5000, maxSockets: opts.concurrency });
    const sender = startWebhookSender({
      db: h.db.db,
      webhooks: new WebhooksRepository(),
      audit: new AuditRepository(),
      transport: client,
      keyring: h.secrets,
      log: createLogger('silent'),
      batchSize: 2,
      concurrency: opts.concurrency,
      pollMs: 20,
      leaseMs: 2000,
      ...(opts.busy && { busy: opts.busy }),
    });
    return { client, sender };
  };

  it('finishes a batch split over requests that runs past half the lease, sending each event once', async () => {
    const { keys } = await h.createApp('com.example.hookrounds');
    const endpointId = await endpointFor(keys.write);
    // one batch's outcomes, 6 devices: 3 requests of 2, each answered 600 ms late; half the lease (1 s) passes
    // while the second is at the receiver
    const outcomes: BatchOutcomes = {
      notification_id: randomUUID(),
      platform: 'ios',
      attempt: 1,
      delivered: Array.from({ length: 6 }, () => randomUUID()),
      failed: [],
      unregistered: [],
    };
    await sql`
      insert into webhook_events (endpoint_id, app_id, type, data)
      select id, app_id, 'batch', ${JSON.stringify(outcomes)}::jsonb from webhook_endpoints where id = ${endpointId}::uuid`.execute(
      h.db.db,
    );
    rx.answerAlways({ status: 204, delayMs: 600 });

    const { client, sender } = startSender();
    try {
      await waitFor('the batch row sent', async () => {
        const { rows } = await sql<{ state: string }>`select state from webhook_events where endpoint_id = ${endpointId}::uuid`.execute(
          h.db.db,
        );
        return rows[0]?.state === 'sent';
      });
      // a row given back would be taken again at once
      await new Promise((r) => setTimeout(r, 1500));
    } finally {
      await sender.stop();
      client.close();
    }
    expect(rx.requests.map((r) => r.events.length)).toEqual([2, 2, 2]);
    expect(rx.events().map((e) => e.data.device_id)).toEqual(outcomes.delivered);
  });

  it('past half the lease starts no new batch row: a request that would mix one started and one not carries the started alone', async () => {
    const { keys } = await h.createApp('com.example.hookrounds2');
    const endpointId = await endpointFor(keys.write);
    // two batches of 3 devices, requests of 2: [1a 1b] [1c 2a] [2b 2c]; each answered 1.1 s late, so the second
    // request comes past half the lease (1 s): it finishes batch 1 ([1c]) and leaves batch 2 to the next round
    const batch = (): BatchOutcomes => ({
      notification_id: randomUUID(),
      platform: 'ios',
      attempt: 1,
      delivered: Array.from({ length: 3 }, () => randomUUID()),
      failed: [],
      unregistered: [],
    });
    const [first, second] = [batch(), batch()];
    for (const outcomes of [first, second])
      await sql`
        insert into webhook_events (endpoint_id, app_id, type, data)
        select id, app_id, 'batch', ${JSON.stringify(outcomes)}::jsonb from webhook_endpoints where id = ${endpointId}::uuid`.execute(
        h.db.db,
      );
    rx.answerAlways({ status: 204, delayMs: 1100 });
    const before = rx.requests.length;

    const { client, sender } = startSender();
    try {
      await waitFor('both batch rows sent', async () => {
        const { rows } = await sql<{ state: string }>`select state from webhook_events where endpoint_id = ${endpointId}::uuid`.execute(
          h.db.db,
        );
        return rows.length === 2 && rows.every((r) => r.state === 'sent');
      });
    } finally {
      await sender.stop();
      client.close();
    }
    const requests = rx.requests.slice(before);
    expect(requests.map((r) => r.events.length)).toEqual([2, 1, 2, 1]);
    expect(requests.flatMap((r) => r.events.map((e) => e.data.device_id))).toEqual([...first.delivered, ...second.delivered]);
  });

  it('keeps to a quarter of its concurrency while deliveries run, and takes all of it once they end', async () => {
    const { keys } = await h.createApp('com.example.hookrounds3');
    const endpointId = await endpointFor(keys.write);
    // 32 devices: 16 requests of 2, each answered 300 ms late; 8 at once, 2 while busy
    const outcomes: BatchOutcomes = {
      notification_id: randomUUID(),
      platform: 'ios',
      attempt: 1,
      delivered: Array.from({ length: 32 }, () => randomUUID()),
      failed: [],
      unregistered: [],
    };
    await sql`
      insert into webhook_events (endpoint_id, app_id, type, data)
      select id, app_id, 'batch', ${JSON.stringify(outcomes)}::jsonb from webhook_endpoints where id = ${endpointId}::uuid`.execute(
      h.db.db,
    );
    rx.answerAlways({ status: 204, delayMs: 300 });
    const before = rx.requests.length;
    let busy = true;
    const inFlight = { busy: 0, idle: 0 };
    const sampler = setInterval(() => {
      const side = busy ? 'busy' : 'idle';
      inFlight[side] = Math.max(inFlight[side], rx.pending().length);
    }, 10);

    const { client, sender } = startSender({ concurrency: 8, busy: () => busy });
    try {
      await waitFor('two requests answered while busy', async () => rx.requests.length - before >= 2);
      busy = false;
      await waitFor('the batch row sent', async () => {
        const { rows } = await sql<{ state: string }>`select state from webhook_events where endpoint_id = ${endpointId}::uuid`.execute(
          h.db.db,
        );
        return rows[0]?.state === 'sent';
      });
    } finally {
      clearInterval(sampler);
      await sender.stop();
      client.close();
    }
    expect(inFlight.busy).toBe(2);
    expect(inFlight.idle).toBeGreaterThan(2);
    expect(
      rx
        .events()
        .slice(-32)
        .map((e) => e.data.device_id)
        .sort(),
    ).toEqual([...outcomes.delivered].sort());
  });
});
