import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import {
  parseRetryAfter,
  retryDelayMs,
  serializedEvents,
  signatureHeader,
  type BatchOutcomes,
  type WebhookEvent,
} from '../../src/domain/webhooks.js';

const HOUR = 3_600_000;

describe('webhook retry schedule', () => {
  const top = () => 1;
  const bottom = () => 0;

  it('doubles from a second up to an hour, jittered between half and all of it', () => {
    const long = 10 * 86_400_000;
    expect([1, 2, 3, 4, 5].map((n) => retryDelayMs(n, long, null, top))).toEqual([1000, 2000, 4000, 8000, 16000]);
    expect([1, 2, 3].map((n) => retryDelayMs(n, long, null, bottom))).toEqual([500, 1000, 2000]);
    expect(retryDelayMs(40, long, null, top)).toBe(HOUR);
  });

  it('never waits longer than the endpoint has been failing, so an outage is over within its length', () => {
    expect(retryDelayMs(1, 0, null, top)).toBe(1000);
    expect(retryDelayMs(8, 90_000, null, top)).toBe(90_000);
    // a receiver back after an outage of 2 minutes: the try after its last failure comes within 2 minutes of it
    let at = 0;
    for (let failures = 1; at < 120_000; failures++) at += retryDelayMs(failures, at, null, Math.random);
    expect(at).toBeLessThanOrEqual(240_000);
  });

  it('honours a Retry-After that asks for longer, up to a day', () => {
    expect(retryDelayMs(1, 0, 30_000, top)).toBe(30_000);
    expect(retryDelayMs(20, 2 * HOUR, 5000, top)).toBe(HOUR);
    expect(retryDelayMs(1, 0, 7 * 86_400_000, top)).toBe(86_400_000);
  });

  it('reads Retry-After as seconds or an HTTP date; anything else is none', () => {
    const now = new Date('2026-11-27T12:00:00Z');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('Fri, 27 Nov 2026 12:01:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('Fri, 27 Nov 2026 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
  });
});

describe('webhook events of a recorded batch', () => {
  const row = {
    id: '0193a000-0000-7000-8000-000000000001',
    app_id: 'app',
    type: 'batch',
    created_at: new Date('2026-11-27T12:00:00Z'),
    data: {
      notification_id: 'n',
      platform: 'ios',
      attempt: 2,
      delivered: ['d1', 'd2'],
      failed: [['d3', 'payload_too_large']],
      unregistered: [['d4', 'BadDeviceToken']],
    } satisfies BatchOutcomes as unknown as Record<string, unknown>,
  };

  const expand = (events: string[]) => serializedEvents(row, events).map((json) => JSON.parse(json) as WebhookEvent);

  it('expands into an event per device with ids that do not depend on the subscription', () => {
    const all = expand(['*']);
    expect(all.map((e) => [e.id, e.type, e.data.device_id])).toEqual([
      [`${row.id}.0`, 'push.delivered', 'd1'],
      [`${row.id}.1`, 'push.delivered', 'd2'],
      [`${row.id}.2`, 'push.failed', 'd3'],
      [`${row.id}.3`, 'device.unregistered', 'd4'],
    ]);
    expect(all[2]!.data).toEqual({ notification_id: 'n', platform: 'ios', attempt: 2, device_id: 'd3', reason: 'payload_too_large' });
    expect(expand(['device.unregistered']).map((e) => e.id)).toEqual([`${row.id}.3`]);
    expect(all.every((e) => e.timestamp === '2026-11-27T12:00:00.000Z' && e.app_id === 'app')).toBe(true);
  });

  it('writes each event as JSON.stringify writes it, strings escaped', () => {
    const odd = { ...row, app_id: 'a"b', data: { ...row.data, failed: [['d"3', 'line\nbreak \u2028']] } };
    const [, , failed] = serializedEvents(odd, ['*']);
    const event = {
      id: `${row.id}.2`,
      type: 'push.failed',
      app_id: 'a"b',
      timestamp: '2026-11-27T12:00:00.000Z',
      data: { notification_id: 'n', platform: 'ios', attempt: 2, device_id: 'd"3', reason: 'line\nbreak \u2028' },
    };
    expect(failed).toBe(JSON.stringify(event));
    const ping = { ...row, type: 'ping', data: { endpoint_id: 'e' } };
    expect(serializedEvents(ping, ['push.delivered'])).toEqual([
      JSON.stringify({ id: row.id, type: 'ping', app_id: 'app', timestamp: '2026-11-27T12:00:00.000Z', data: { endpoint_id: 'e' } }),
    ]);
  });
});

describe('webhook signature', () => {
  it('verifies with the public Standard Webhooks library under each of two secrets, and not under another', () => {
    const secrets = ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_dGVzdHNlY3JldHRlc3RzZWNyZXQxMjM0NTY='];
    const timestamp = Math.floor(Date.now() / 1000);
    const body = JSON.stringify([{ id: 'e1', type: 'ping' }]);
    const headers = {
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(secrets, 'msg_1', timestamp, body),
    };
    for (const secret of secrets) expect(new Webhook(secret).verify(body, headers)).toEqual([{ id: 'e1', type: 'ping' }]);
    expect(() => new Webhook('whsec_b3RoZXJzZWNyZXRvdGhlcnNlY3JldA==').verify(body, headers)).toThrow();
    // the body as the bytes the sender posts signs the same
    expect(signatureHeader(secrets, 'msg_1', timestamp, Buffer.from(body))).toBe(headers['webhook-signature']);
  });
});
