import { describe, expect, it } from 'vitest';
import { abBounds, abPoint, bucketOf, HOLDOUT, parseDuration, parseMetric, pickWinner, REST } from '../../src/domain/ab-test.js';
import { notificationRequestSchema } from '../../src/domain/notification-request.js';

const v = (alert: string, extra: Record<string, unknown> = {}) => ({ payload: { alert }, ...extra });
const base = { to: '*', variants: [v('A'), v('B')], test_fraction: 0.2, winner: { metric: 'direct_opens', after: '4h' } };
const parse = (fields: Record<string, unknown>) => notificationRequestSchema.safeParse({ notification: { ...base, ...fields } });
const firstError = (fields: Record<string, unknown>) => {
  const r = parse(fields);
  if (r.success) return null;
  const issue = r.error.issues[0]!;
  return `${issue.path.join('.')}: ${issue.message}`;
};

describe('A/B test requests', () => {
  it('accepts variants and takes the first variant as the payload', () => {
    const r = parse({});
    expect(r.success).toBe(true);
    expect(r.data!.notification.payload).toEqual({ alert: 'A' });
    expect(parse({ winner: 'manual', holdout_fraction: 0.1, variants: [v('A'), v('B'), v('C')] }).success).toBe(true);
    expect(parse({ winner: { metric: 'conversions:purchase', after: '2d' }, test_fraction: 1 }).success).toBe(true);
  });

  it('names the field of each problem', () => {
    expect(firstError({ variants: [v('A')] })).toBe('notification.variants: must hold at least 2 variants');
    expect(firstError({ variants: [1, 2, 3, 4, 5, 6].map((i) => v(`${i}`)) })).toBe('notification.variants: must hold at most 5 variants');
    expect(firstError({ test_fraction: 0 })).toBe('notification.test_fraction: must be more than 0');
    expect(firstError({ test_fraction: 1.5 })).toBe('notification.test_fraction: must be at most 1');
    expect(firstError({ test_fraction: undefined })).toBe('notification.test_fraction: is required with variants');
    expect(firstError({ holdout_fraction: 1 })).toBe('notification.holdout_fraction: must be less than 1');
    expect(firstError({ test_fraction: 0.8, holdout_fraction: 0.3 })).toBe(
      'notification.holdout_fraction: with test_fraction must be at most 1',
    );
    expect(firstError({ winner: undefined })).toBe('notification.winner: is required with variants');
    expect(firstError({ winner: { metric: 'clicks', after: '4h' } })).toMatch(/^notification\.winner/);
    expect(firstError({ winner: { metric: 'direct_opens', after: '4 hours' } })).toMatch(/^notification\.winner/);
    expect(firstError({ payload: { alert: 'x' } })).toBe(
      'notification.payload: cannot be combined with variants (each variant has its own)',
    );
    expect(firstError({ localized: { fr: { alert: 'x' } } })).toBe(
      'notification.localized: cannot be combined with variants (give it in each variant)',
    );
    expect(firstError({ variants: [v('A'), { payload: { alert: 'B', collapse_key: 'k' } }] })).toBe(
      'notification.variants.1.payload.collapse_key: cannot be used in an A/B test',
    );
    // who may be sent to (a device's notification setting) is one question for the whole audience
    expect(firstError({ variants: [{ payload: { content_available: true } }, v('B')] })).toBe(
      'notification.variants.1.payload: must show something if the first variant does, and only then',
    );
  });

  it('checks every variant by the payload size limits, in every language', () => {
    expect(firstError({ variants: [v('A'), v('x'.repeat(5000))] })).toMatch(/^notification\.variants\.1\.payload/);
    const big = firstError({ variants: [v('A'), v('B', { localized: { fr: { alert: 'x'.repeat(5000) } } })] });
    expect(big).toMatch(/^notification\.variants\.1\.localized\.fr/);
  });

  it('without variants: payload is required, and the A/B fields need variants', () => {
    const plain = (fields: Record<string, unknown>) => notificationRequestSchema.safeParse({ notification: { to: '*', ...fields } });
    expect(plain({}).error!.issues[0]!.path.join('.')).toBe('notification.payload');
    expect(plain({ payload: { alert: 'x' }, test_fraction: 0.5 }).error!.issues[0]!.message).toBe('needs variants');
    expect(plain({ payload: { alert: 'x' } }).success).toBe(true);
  });
});

describe('grammar', () => {
  it('reads durations and metrics', () => {
    expect(parseDuration('4h')).toBe(4 * 3_600_000);
    expect(parseDuration('30m')).toBe(1_800_000);
    expect(parseDuration('2d')).toBe(2 * 86_400_000);
    for (const bad of ['0h', '4', 'h', '4H', ' 4h', '1.5h']) expect(parseDuration(bad)).toBeNull();
    expect(parseMetric('direct_opens')).toEqual({ kind: 'direct_opens' });
    expect(parseMetric('conversions:shop.purchase')).toEqual({ kind: 'conversions', event: 'shop.purchase' });
    expect(parseMetric('conversions:')).toBeNull();
    expect(parseMetric('opens')).toBeNull();
  });
});

describe('buckets', () => {
  const test = { variants: [v('A'), v('B'), v('C')], test_fraction: 0.3, holdout_fraction: 0.1, winner: 'manual' as const };
  it('split the test share evenly, then the holdout, then the rest', () => {
    const b = abBounds(test);
    const counts = new Map<number, number>();
    for (let i = 0; i < 20_000; i++) {
      const k = bucketOf(abPoint('n1', `device-${i}`), b);
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    for (const k of [0, 1, 2]) expect(counts.get(k)! / 20_000).toBeCloseTo(0.1, 1);
    expect(counts.get(HOLDOUT)! / 20_000).toBeCloseTo(0.1, 1);
    expect(counts.get(REST)! / 20_000).toBeCloseTo(0.6, 1);
    expect(bucketOf(0, b)).toBe(0);
    expect(bucketOf(b.testEnd - 1, b)).toBe(2);
    expect(bucketOf(2 ** 32 - 1, abBounds({ ...test, test_fraction: 1, holdout_fraction: 0 }))).toBe(2);
  });
  it('are stable per device and differ per notification', () => {
    expect(abPoint('n1', 'd1')).toBe(abPoint('n1', 'd1'));
    expect(abPoint('n1', 'd1')).not.toBe(abPoint('n2', 'd1'));
  });
  it('the winner has the most, the first of a tie', () => {
    expect(pickWinner([3, 5, 5])).toBe(1);
    expect(pickWinner([0, 0])).toBe(0);
  });
});
