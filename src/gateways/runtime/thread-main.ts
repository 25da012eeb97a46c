/**
 * Entry of a gateway thread (see ./threads.ts): runs a GatewayPool — the long-lived APNs and
 * FCM connections — and answers each `send` message with one outcome per token, in order.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { GatewayPool, type AppPushCredentials } from '../pool.js';
import type { PushOutcome } from '../types.js';
import { createLogger } from '../../platform/logger.js';
import type { FromGatewayThread, GatewayThreadData, ToGatewayThread } from './thread-protocol.js';

const port = parentPort;
if (!port) throw new Error('thread-main.ts runs as a worker thread');
const { pool: options, logLevel } = workerData as GatewayThreadData;
const pool = new GatewayPool({ ...options, log: createLogger(logLevel).child({ thread: 'gateways' }) });
const reply = (message: FromGatewayThread) => port.postMessage(message);
/** the credentials of each app as last posted: the same object for every send, so the pool's hash of them is kept */
const credentials = new Map<string, AppPushCredentials>();

port.on('message', (message: ToGatewayThread) => {
  if (message.type === 'close') {
    // in-flight sends finish first; the thread then ends by itself (no open handles left)
    void pool.close().finally(() => {
      reply({ type: 'closed' });
      port.close();
    });
    return;
  }
  if (message.type === 'credentials') {
    credentials.set(message.app.id, message.app);
    return;
  }
  const { id, appId, platform, environment, push, tokens, keys } = message;
  const app = credentials.get(appId);
  if (!app) {
    // not reached: the main thread posts an app's credentials before its first send to this thread
    const outcome: PushOutcome = { kind: 'retry', reason: 'gateway thread has no credentials' };
    reply({ type: 'sent', id, outcomes: tokens.map(() => outcome) });
    return;
  }
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
