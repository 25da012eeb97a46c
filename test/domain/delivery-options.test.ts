import { describe, expect, it } from 'vitest';
import { expiryOf, isExpired, MAX_TTL_SECONDS, msLeft, resolveDeliveryOptions, secondsLeft } from '../../src/domain/delivery-options.js';
import { ValidationError } from '../../src/domain/errors.js';
import { notificationRequestSchema } from '../../src/domain/notification-request.js';
import { transactionalRequestSchema } from '../../src/domain/transactional-request.js';

const NOW = new Date('2026-05-01T12:00:00.000Z');
const payload = { alert: 'a' };
const create = (options: Record<string, unknown>) =>
  notificationRequestSchema.safeParse({ notification: { to: '*', payload, ...options } });
const transactional = (options: Record<string, unknown>) =>
  transactionalRequestSchema.safeParse({ to: { field: 'device_id', value: 'd' }, group: 'grp', notification: { payload, ...options } });
const issue = (r: ReturnType<typeof create> | ReturnType<typeof transactional>) => {
  if (r.success) throw new Error('expected a failure');
  const i = r.error.issues[0]!;
  return `${i.path.join('.')}: ${i.message}`;
};

const INSTANT = 'must be an ISO 8601 date-time with a time zone offset or Z, e.g. 2026-05-01T12:00:00Z';
const TTL_RANGE = `must be an integer number of seconds from 1 to ${MAX_TTL_SECONDS}`;

describe('delivery options in the request schemas', () => {
  it('accepts expires_at, ttl and priority beside to and payload, and keeps them as sent', () => {
    for (const options of [
      { expires_at: '2026-05-01T13:00:00Z' },
      { expires_at: '2026-05-01T14:00:00.123+02:00' },
      { expires_at: '2026-05-01T13:00-0130' },
      { ttl: 1 },
      { ttl: MAX_TTL_SECONDS },
      { priority: 'high' },
      { priority: 'normal', ttl: 60 },
    ]) {
      const r = create(options);
      expect(r.success, JSON.stringify(options)).toBe(true);
      expect(r.data).toStrictEqual({ notification: { to: '*', payload, ...options } });
      expect(transactional(options).success, JSON.stringify(options)).toBe(true);
    }
  });

  it.each([
    ['expires_at without a zone', { expires_at: '2026-05-01T13:00:00' }, `notification.expires_at: ${INSTANT}`],
    ['expires_at a date only', { expires_at: '2026-05-01' }, `notification.expires_at: ${INSTANT}`],
    ['expires_at an impossible day', { expires_at: '2026-02-30T10:00:00Z' }, `notification.expires_at: ${INSTANT}`],
    ['expires_at date math', { expires_at: 'now+1h' }, `notification.expires_at: ${INSTANT}`],
    ['expires_at a number', { expires_at: 1777777777 }, `notification.expires_at: ${INSTANT}`],
    ['ttl a string', { ttl: '60' }, `notification.ttl: ${TTL_RANGE}`],
    ['ttl fractional', { ttl: 1.5 }, `notification.ttl: ${TTL_RANGE}`],
    ['ttl 0', { ttl: 0 }, `notification.ttl: ${TTL_RANGE}`],
    ['ttl negative', { ttl: -1 }, `notification.ttl: ${TTL_RANGE}`],
    [
      'ttl over 28 days',
      { ttl: MAX_TTL_SECONDS + 1 },
      `notification.ttl: must be at most ${MAX_TTL_SECONDS} seconds (28 days, FCM's limit)`,
    ],
    ['priority unknown', { priority: 'urgent' }, 'notification.priority: must be "high" or "normal"'],
    ['priority upper case', { priority: 'HIGH' }, 'notification.priority: must be "high" or "normal"'],
    ['priority a number', { priority: 10 }, 'notification.priority: must be "high" or "normal"'],
  ])('refuses %s, naming the field', (_name, options, error) => {
    expect(issue(create(options))).toBe(error);
    expect(issue(transactional(options))).toBe(error);
  });
});

describe('resolveDeliveryOptions', () => {
  it('resolves nothing to nothing', () => {
    expect(resolveDeliveryOptions({}, NOW)).toEqual({ expiresAt: null, ttlSeconds: null, priority: null });
  });

  it('reads expires_at in its own zone, and keeps ttl and priority', () => {
    expect(resolveDeliveryOptions({ expires_at: '2026-05-01T14:30:00+02:00', priority: 'normal' }, NOW)).toEqual({
      expiresAt: new Date('2026-05-01T12:30:00Z'),
      ttlSeconds: null,
      priority: 'normal',
    });
    expect(resolveDeliveryOptions({ ttl: 90, priority: 'high' }, NOW)).toEqual({ expiresAt: null, ttlSeconds: 90, priority: 'high' });
  });

  it('refuses both expiry forms together, naming ttl', () => {
    expect(() => resolveDeliveryOptions({ expires_at: '2026-05-01T13:00:00Z', ttl: 60 }, NOW)).toThrow(
      new ValidationError('notification.ttl: cannot be given with expires_at; give one of them'),
    );
  });

  it('refuses an expires_at that is not in the future', () => {
    for (const past of ['2026-05-01T12:00:00Z', '2026-05-01T11:59:59.999Z', '2020-01-01T00:00:00Z', '2026-05-01T13:00:00+01:00']) {
      expect(() => resolveDeliveryOptions({ expires_at: past }, NOW), past).toThrow(
        new ValidationError('notification.expires_at: must be in the future'),
      );
    }
    expect(resolveDeliveryOptions({ expires_at: '2026-05-01T12:00:00.001Z' }, NOW).expiresAt).toEqual(new Date('2026-05-01T12:00:00.001Z'));
  });

  it('refuses an expires_at more than 28 days ahead, FCM’s ceiling', () => {
    const limit = new Date(NOW.getTime() + MAX_TTL_SECONDS * 1000);
    expect(resolveDeliveryOptions({ expires_at: limit.toISOString() }, NOW).expiresAt).toEqual(limit);
    expect(() => resolveDeliveryOptions({ expires_at: new Date(limit.getTime() + 1).toISOString() }, NOW)).toThrow(
      new ValidationError('notification.expires_at: must be at most 28 days ahead (FCM keeps a message at most 28 days)'),
    );
  });
});

describe('expiry arithmetic', () => {
  it('a ttl counts from the creation time; an absolute expiry stays as it is', () => {
    expect(expiryOf({ expiresAt: null, ttlSeconds: 30, priority: null }, NOW)).toEqual(new Date('2026-05-01T12:00:30Z'));
    const at = new Date('2026-05-02T00:00:00Z');
    expect(expiryOf({ expiresAt: at, ttlSeconds: null, priority: null }, NOW)).toBe(at);
    expect(expiryOf({ expiresAt: null, ttlSeconds: null, priority: 'high' }, NOW)).toBeNull();
  });

  it('time left is whole seconds rounded down and never negative', () => {
    const at = new Date('2026-05-01T12:01:00.000Z');
    expect(secondsLeft(at, NOW)).toBe(60);
    expect(secondsLeft(at, new Date('2026-05-01T12:00:59.001Z'))).toBe(0);
    expect(secondsLeft(at, new Date('2026-05-01T12:00:58.999Z'))).toBe(1);
    expect(secondsLeft(at, new Date('2026-05-01T13:00:00Z'))).toBe(0);
    expect(msLeft(at, NOW)).toBe(60_000);
    expect(msLeft(at, new Date('2026-05-01T13:00:00Z'))).toBe(0);
    expect(msLeft(null, NOW)).toBeUndefined();
  });

  it('a push is expired from its expiry instant on', () => {
    const at = new Date('2026-05-01T12:01:00.000Z');
    expect(isExpired(at, new Date('2026-05-01T12:00:59.999Z'))).toBe(false);
    expect(isExpired(at, at)).toBe(true);
    expect(isExpired(at, new Date('2026-05-01T12:01:00.001Z'))).toBe(true);
    expect(isExpired(null, NOW)).toBe(false);
  });
});
