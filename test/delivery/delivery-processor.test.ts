import type { Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import type { AttemptInput } from '../../src/db/repositories/batches.js';
import { DIRECT_AUDIENCE_MAX_DEVICES } from '../../src/domain/audience-spec.js';
import { systemClock } from '../../src/platform/clock.js';
import { createLogger } from '../../src/platform/logger.js';
import { Metrics } from '../../src/platform/metrics.js';
import { deliveryProcessor, LargeBatchTurns } from '../../src/delivery/delivery.js';
import type { DeliveryStore } from '../../src/delivery/delivery-store.js';
import type { GatewayProvider } from '../../src/gateways/provider.js';
import type { JobTypes } from '../../src/delivery/jobs.js';

/** A batch of more devices than an audience cut at creation has: it takes a turn among the large batches. */
function largeBatch(state: 'sending' | 'canceled'): AttemptInput {
  const id = '00000000-0000-4000-8000-000000000001';
  return {
    batch: {
      id: `${id}-g1-b0`,
      notification_id: id,
      generation: 1,
      seq: 0,
      platform: 'ios',
      development: false,
      state: 'pending',
      attempts: 0,
      not_before: null,
    },
    notification: {
      id,
      app_id: id,
      payload: { alert: 'x' },
      localized: null,
      expires_at: null,
      priority: null,
      generation: 1,
      state,
      live_activity: null,
      capped: false,
    },
    pending: Array.from({ length: DIRECT_AUDIENCE_MAX_DEVICES + 1 }, (_, i) => ({ deviceId: `d${i}`, token: `t${i}` })),
  } as AttemptInput;
}

describe('the delivery job', () => {
  it('reads a large batch whole only when its turn comes: one canceled while it waited sends nothing', async () => {
    const reads = [largeBatch('canceled')];
    const firstReads: unknown[] = [{ large: DIRECT_AUDIENCE_MAX_DEVICES + 1 }];
    const closed: string[] = [];
    let sent = 0;
    const store = {
      loadUnlessLarge: async () => firstReads.shift(),
      load: async () => reads.shift(),
      db: {},
      batches: { closeBatchUnsent: async (_db: unknown, _batch: unknown, reason: string) => void closed.push(reason) },
    } as unknown as DeliveryStore;
    const gateways = {
      send: async () => {
        sent += 1;
        return [];
      },
    } as unknown as GatewayProvider;
    const process = deliveryProcessor({
      log: createLogger('silent'),
      metrics: new Metrics(),
      gateways,
      store,
      clock: systemClock,
      maxAttempts: 3,
      largeBatchesAtOnce: 1,
      largeTurns: new LargeBatchTurns(1),
      retryAlone: async () => undefined,
      backoff: () => 0,
    });
    await process({ data: { batches: [{ notificationId: 'n', batchId: 'b' }] }, attemptsMade: 0 } as unknown as Job<JobTypes['delivery']>);
    expect(firstReads).toEqual([]); // its size read first, its devices when its turn came
    expect(reads).toEqual([]);
    expect(closed).toEqual(['canceled']);
    expect(sent).toBe(0);
  });
});
