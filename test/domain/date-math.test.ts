import { describe, expect, it } from 'vitest';
import { isDateValue, parseDateMath, parseIsoDate, resolveDate } from '../../src/domain/date-math.js';

const at = (iso: string) => new Date(iso);
const resolve = (expr: string, now: string) => resolveDate(expr, at(now)).toISOString();

describe('date math: calendar units clamp to the month end', () => {
  it.each([
    ['now+1M', '2024-01-31T10:00:00.000Z', '2024-02-29T10:00:00.000Z'], // leap year
    ['now+1M', '2023-01-31T10:00:00.000Z', '2023-02-28T10:00:00.000Z'],
    ['now-1M', '2024-03-31T00:00:00.000Z', '2024-02-29T00:00:00.000Z'],
    ['now+1M+1M', '2024-01-31T00:00:00.000Z', '2024-03-29T00:00:00.000Z'], // steps apply one after the other
    ['now+2M', '2024-01-31T00:00:00.000Z', '2024-03-31T00:00:00.000Z'],
    ['now+1M', '2024-12-15T08:00:00.000Z', '2025-01-15T08:00:00.000Z'],
    ['now-13M', '2024-01-15T08:00:00.000Z', '2022-12-15T08:00:00.000Z'],
    ['now+1y', '2024-02-29T12:00:00.000Z', '2025-02-28T12:00:00.000Z'],
    ['now-1y', '2024-02-29T12:00:00.000Z', '2023-02-28T12:00:00.000Z'],
    ['now+4y', '2024-02-29T12:00:00.000Z', '2028-02-29T12:00:00.000Z'],
    ['now-30d', '2024-03-01T00:00:00.000Z', '2024-01-31T00:00:00.000Z'],
  ])('%s at %s = %s', (expr, now, expected) => {
    expect(resolve(expr, now)).toBe(expected);
  });
});

describe('date math: rounding down', () => {
  it('/w rounds to Monday 00:00 UTC, also across months and years', () => {
    expect(resolve('now/w', '2024-06-09T15:30:00.000Z')).toBe('2024-06-03T00:00:00.000Z'); // a Sunday
    expect(resolve('now/w', '2024-06-10T00:00:00.000Z')).toBe('2024-06-10T00:00:00.000Z'); // a Monday stays
    expect(resolve('now/w', '2024-06-11T23:59:59.999Z')).toBe('2024-06-10T00:00:00.000Z');
    expect(resolve('now/w', '2025-01-01T09:00:00.000Z')).toBe('2024-12-30T00:00:00.000Z'); // a Wednesday
    expect(resolve('now-1w/w', '2024-06-09T15:30:00.000Z')).toBe('2024-05-27T00:00:00.000Z');
  });

  it.each([
    ['now/y', '2024-02-29T13:14:15.678Z', '2024-01-01T00:00:00.000Z'],
    ['now/M', '2024-02-29T13:14:15.678Z', '2024-02-01T00:00:00.000Z'],
    ['now/d', '2024-02-29T13:14:15.678Z', '2024-02-29T00:00:00.000Z'],
    ['now/h', '2024-02-29T13:14:15.678Z', '2024-02-29T13:00:00.000Z'],
    ['now/m', '2024-02-29T13:14:15.678Z', '2024-02-29T13:14:00.000Z'],
    ['now/s', '2024-02-29T13:14:15.678Z', '2024-02-29T13:14:15.000Z'],
    ['now-1d/d', '2024-03-01T00:30:00.000Z', '2024-02-29T00:00:00.000Z'],
    ['now+1h/d', '2024-02-29T23:30:00.000Z', '2024-03-01T00:00:00.000Z'], // the step applies before the rounding
  ])('%s at %s = %s', (expr, now, expected) => {
    expect(resolve(expr, now)).toBe(expected);
  });
});

describe('date math: H and h are hours, m is minutes, M is months', () => {
  const now = '2024-05-10T10:00:00.000Z';
  it('H equals h in steps and in rounding', () => {
    expect(resolve('now+2H', now)).toBe(resolve('now+2h', now));
    expect(resolve('now+2H', now)).toBe('2024-05-10T12:00:00.000Z');
    expect(resolve('now+90m/H', now)).toBe(resolve('now+90m/h', now));
    expect(resolve('now+90m/H', now)).toBe('2024-05-10T11:00:00.000Z');
    expect(parseDateMath('now+1H')).toEqual(parseDateMath('now+1h'));
  });
  it('m and M differ', () => {
    expect(resolve('now+1m', now)).toBe('2024-05-10T10:01:00.000Z');
    expect(resolve('now+1M', now)).toBe('2024-06-10T10:00:00.000Z');
  });
  it('steps chain left to right, with seconds and millisecond resolution kept', () => {
    expect(resolve('now-1d+12h-30m+15s', '2024-05-10T10:00:00.250Z')).toBe('2024-05-09T21:30:15.250Z');
  });
});

describe('date math: || anchors replace now', () => {
  const now = '2030-07-01T00:00:00.000Z';
  it.each([
    ['2024-01-31||+1M', '2024-02-29T00:00:00.000Z'],
    ['2024-03-10||-1w', '2024-03-03T00:00:00.000Z'],
    ['2024-03-10T12:00:00Z||/d', '2024-03-10T00:00:00.000Z'],
    ['2024-01-31T23:59:59.999+02:00||/d', '2024-01-31T00:00:00.000Z'], // the anchor is read in its zone, rounded in UTC
    ['2024-01-01T00:00:00-05:00||+1h', '2024-01-01T06:00:00.000Z'],
    ['2024-01-31||', '2024-01-31T00:00:00.000Z'],
  ])('%s = %s whatever now is', (expr, expected) => {
    expect(resolve(expr, now)).toBe(expected);
  });
});

describe('ISO dates and the grammar edges', () => {
  it('reads ISO dates in UTC unless they carry a zone; fractions truncate to milliseconds', () => {
    expect(parseIsoDate('2024-01-01')!.toISOString()).toBe('2024-01-01T00:00:00.000Z');
    expect(parseIsoDate('2024-01-01T10:00')!.toISOString()).toBe('2024-01-01T10:00:00.000Z');
    expect(parseIsoDate('2024-01-01T10:00:00+05:30')!.toISOString()).toBe('2024-01-01T04:30:00.000Z');
    expect(parseIsoDate('2024-01-01T10:00:00.123456Z')!.toISOString()).toBe('2024-01-01T10:00:00.123Z');
    expect(parseIsoDate('2024-02-30')).toBeNull();
    expect(parseIsoDate('2023-02-29')).toBeNull();
    expect(parseIsoDate('2024-01-01T24:00:00Z')).toBeNull();
  });

  it.each([
    'now+',
    'now+1',
    'now+1x',
    'now/x',
    'now/d/d',
    'now/d+1d',
    'now-1d+',
    'Now',
    'now +1d',
    'now+1.5d',
    '2024-02-30||+1d',
    '2024-01-01|+1d',
    '||+1d',
    'yesterday',
    '',
  ])('%j is not a date value', (text) => {
    expect(isDateValue(text)).toBe(false);
    expect(() => resolveDate(text, new Date())).toThrow();
  });
});

describe('the years a date may name: 1 to 9999', () => {
  it('reads years 1 to 99 as those years, not 1901 to 1999', () => {
    expect(parseIsoDate('0050-06-15T00:00:00Z')?.toISOString()).toBe('0050-06-15T00:00:00.000Z');
    expect(parseIsoDate('0001-01-01')?.toISOString()).toBe('0001-01-01T00:00:00.000Z');
    expect(parseIsoDate('0004-02-29')?.toISOString()).toBe('0004-02-29T00:00:00.000Z');
    expect(resolve('0099-12-31||+1d', '2026-01-01T00:00:00Z')).toBe('0100-01-01T00:00:00.000Z');
    expect(resolve('0050-01-31||+1M/M', '2026-01-01T00:00:00Z')).toBe('0050-02-01T00:00:00.000Z');
  });

  it.each([
    ['year 0', '0000-01-01'],
    ['past 9999 once its zone is applied', '9999-12-31T23:59:59-23:59'],
    ['before year 1 once its zone is applied', '0001-01-01T00:00:00+00:01'],
    ['a zone offset of 24 hours', '2026-11-25T12:00:00+24:00'],
    ['a zone offset of 99:99', '2026-11-25T12:00:00+99:99'],
    ['zone minutes past 59', '2026-11-25T12:00:00+01:60'],
  ])('refuses %s (%s)', (_name, text) => {
    expect(parseIsoDate(text)).toBeNull();
    expect(isDateValue(text)).toBe(false);
  });

  it('takes the zone offsets that exist', () => {
    expect(parseIsoDate('2026-11-25T12:00:00+14:00')?.toISOString()).toBe('2026-11-24T22:00:00.000Z');
    expect(parseIsoDate('2026-11-25T12:00:00-0930')?.toISOString()).toBe('2026-11-25T21:30:00.000Z');
    expect(parseIsoDate('9999-12-31T23:59:59+01:00')?.toISOString()).toBe('9999-12-31T22:59:59.000Z');
  });

  it('refuses date math whose steps add up to more than 10,000 years, however written', () => {
    for (const text of ['now+99999999999y', 'now+10001y', 'now+100000000d', 'now+5001y-5001y', `now+${'9'.repeat(400)}s`])
      expect(isDateValue(text), text).toBe(false);
    expect(isDateValue('now+9999y')).toBe(true);
    expect(isDateValue('now-120000M')).toBe(false);
  });

  it('resolves what filters stored before these limits hold, as written', () => {
    expect(resolve('0000-01-01', '2026-01-01T00:00:00Z')).toBe('0000-01-01T00:00:00.000Z');
    expect(resolve('2026-01-01T00:00+24:00', '2026-01-01T00:00:00Z')).toBe('2025-12-31T00:00:00.000Z');
    expect(resolve('now+6000y-6000y', '2026-01-01T00:00:00Z')).toBe('2026-01-01T00:00:00.000Z');
    expect(resolve('0000-01-01||+1d', '2026-01-01T00:00:00Z')).toBe('0000-01-02T00:00:00.000Z');
  });

  it('resolves math stored before the limit to the farthest date JavaScript holds that way', () => {
    expect(resolveDate('now+99999999999y', at('2026-01-01T00:00:00Z')).getTime()).toBe(8.64e15);
    expect(resolveDate(`now-${'9'.repeat(400)}s`, at('2026-01-01T00:00:00Z')).getTime()).toBe(-8.64e15);
  });

  it('resolves math that reaches past year 9999 to a valid instant (what stores or compares it clamps)', () => {
    expect(resolve('now+9000y', '2026-01-01T00:00:00Z')).toBe('+011026-01-01T00:00:00.000Z');
    expect(resolve('9999-12-31||+1y', '2026-01-01T00:00:00Z')).toBe('+010000-12-31T00:00:00.000Z');
    expect(resolve('now-9000y/d', '2026-01-01T12:00:00Z')).toBe('-006974-01-01T00:00:00.000Z');
  });
});
