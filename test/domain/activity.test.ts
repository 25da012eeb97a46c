import { describe, expect, it } from 'vitest';
import { reportedAt, sessionStart, statsWindow, totalWindow } from '../../src/domain/activity.js';

const now = new Date('2026-03-01T10:00:00.000Z');

describe('stats windows', () => {
  it('defaults to the 30 days up to today (UTC), or up to `to`', () => {
    expect(statsWindow({}, now)).toEqual({ from: '2026-01-31', to: '2026-03-01' });
    expect(statsWindow({ to: '2026-02-10' }, now)).toEqual({ from: '2026-01-12', to: '2026-02-10' });
    expect(statsWindow({ from: '2026-02-27' }, now)).toEqual({ from: '2026-02-27', to: '2026-03-01' });
    // today in UTC, whatever the hour
    expect(statsWindow({}, new Date('2026-03-01T23:59:59.999Z')).to).toBe('2026-03-01');
    expect(statsWindow({}, new Date('2026-03-02T00:00:00.000Z')).to).toBe('2026-03-02');
  });

  it('takes exact calendar days, leap days included, and at most 366 of them', () => {
    expect(statsWindow({ from: '2024-02-29', to: '2024-02-29' }, now)).toEqual({ from: '2024-02-29', to: '2024-02-29' });
    expect(() => statsWindow({ from: '2025-02-29' }, now)).toThrow('from: must be a date YYYY-MM-DD');
    expect(() => statsWindow({ to: '2026-03-01T00:00:00Z' }, now)).toThrow('to: must be a date YYYY-MM-DD');
    expect(statsWindow({ from: '2024-01-01', to: '2024-12-31' }, now).from).toBe('2024-01-01');
    expect(() => statsWindow({ from: '2023-01-01', to: '2024-01-02' }, now)).toThrow('from: the window may span at most 366 days');
    expect(() => statsWindow({ from: '2026-03-02', to: '2026-03-01' }, now)).toThrow('from: must not be after to');
  });

  it('total_installs: up to `to`, since the first install unless `from` is given', () => {
    expect(totalWindow({}, now)).toEqual({ from: null, to: '2026-03-01' });
    expect(totalWindow({ from: '2000-01-01', to: '2026-01-01' }, now)).toEqual({ from: '2000-01-01', to: '2026-01-01' });
    expect(() => totalWindow({ from: '2026-01-02', to: '2026-01-01' }, now)).toThrow('from: must not be after to');
  });
});

describe('report dates', () => {
  it('now when absent; a date up to an hour ahead counts as now; within the last 7 days', () => {
    expect(reportedAt(undefined, now, 'f')).toEqual(now);
    expect(reportedAt('2026-03-01T10:59:00Z', now, 'f')).toEqual(now);
    expect(() => reportedAt('2026-03-01T11:00:01Z', now, 'f')).toThrow('f: must not be in the future');
    expect(reportedAt('2026-02-22T10:00:00Z', now, 'f').toISOString()).toBe('2026-02-22T10:00:00.000Z');
    expect(() => reportedAt('2026-02-22T09:59:59Z', now, 'f')).toThrow('f: must be within the last 7 days');
    expect(reportedAt('2026-03-01T12:00:00+03:00', now, 'f').toISOString()).toBe('2026-03-01T09:00:00.000Z');
  });

  it('a session without a start began its duration before now', () => {
    const id = '6f1c2f1e-2a53-4d3c-9a63-0d6c7a3f2b11';
    expect(sessionStart({ id, duration: 90 }, now).toISOString()).toBe('2026-03-01T09:58:30.000Z');
    expect(sessionStart({ id, started_at: '2026-03-01T09:00:00Z', duration: 90 }, now).toISOString()).toBe('2026-03-01T09:00:00.000Z');
    expect(sessionStart({ id }, now)).toEqual(now);
  });
});
