/**
 * Entry of a gateway thread (see ./threads.ts): runs a GatewayPool — the long-lived APNs and
 * FCM connections — and answers each `send` message with one outcome per token, in order.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { GatewayPool } from '../pool.js';
import type { PushOutcome } from '../types.js';
import { createLogger } from '../../platform/logger.js';
import type { FromGatewayThread, GatewayThreadData, ToGatewayThread } from './thread-protocol.js';

const port = parentPort;
if (!port) throw new Error('thread-main.ts runs as a worker thread');
const { pool: options, logLevel } = workerData as GatewayThreadData;
const pool = new GatewayPool({ ...options, log: createLogger(logLevel).child({ thread: 'gateways' }) });
const reply = (message: FromGatewayThread) => port.postMessage(message);

port.on('message', (message: ToGatewayThread) => {
  if (message.type === 'close') {
    // in-flight sends finish first; the thread then ends by itself (no open handles left)
    void pool.close().finally(() => {
      reply({ type: 'closed' });
      port.close();
    });
    return;
  }
  const { id, app, platform, environment, push, tokens, keys } = message;
  // outcomes are matched by position
  const targets = tokens.map((token, i) => {
    const subscription = keys?.[i];
    return subscription ? { deviceId: '', token, keys: subscription } : { deviceId: '', token };
  });
  pool
    .get(app, platform, environment)
    .send(push, targets)
    .then(
      (results) => reply({ type: 'sent', id, outcomes: results.map((r) => r.outcome) }),
      (err: Error) => {
        const outcome: PushOutcome = { kind: 'retry', reason: `gateway error: ${err.message}` };
        reply({ type: 'sent', id, outcomes: tokens.map(() => outcome) });
      },
    );
});
