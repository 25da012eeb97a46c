import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BatchOutcome } from '../../src/db/repositories/batches.js';
import { logAttempt } from '../../src/delivery/batch-attempt.js';

/** The lines a real pino logger at `level` writes, parsed. */
function logged(level: string, summary: BatchOutcome): { level: number; msg: string; sent: number }[] {
  const lines: string[] = [];
  const sink = new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) });
  const log = pino({ level }, sink);
  logAttempt(log, { notificationId: 'n', batchId: 'n-g1-b0', job: 'direct', attempt: 1 }, summary);
  return lines.map((l) => JSON.parse(l));
}

const outcome = (sent: number, more: Partial<BatchOutcome> = {}): BatchOutcome => ({
  succeeded: Array.from({ length: sent }, (_, i) => `d${i}`),
  failed: [],
  invalidated: [],
  retry: [],
  expired: [],
  lastError: null,
  ...more,
});

const INFO = 30;
const DEBUG = 20;

describe('logAttempt', () => {
  it('logs a clean small batch (a unicast) at debug only', () => {
    expect(logged('info', outcome(1))).toEqual([]);
    expect(logged('info', outcome(99))).toEqual([]);
    expect(logged('debug', outcome(1))).toMatchObject([{ level: DEBUG, msg: 'batch attempt recorded', sent: 1 }]);
  });

  it('logs at info a large batch (a broadcast), and any batch where a push was not sent', () => {
    expect(logged('info', outcome(100))).toMatchObject([{ level: INFO, sent: 100 }]);
    const reason = 'BadDeviceToken';
    for (const more of [
      { failed: [{ deviceId: 'x', reason }] },
      { invalidated: [{ deviceId: 'x', reason }] },
      { retry: ['x'] },
      { expired: ['x'] },
    ])
      expect(logged('info', outcome(0, more))).toMatchObject([{ level: INFO, sent: 0 }]);
  });
});
