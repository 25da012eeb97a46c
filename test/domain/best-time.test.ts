import { describe, expect, it } from 'vitest';
import { bestTimeSlots } from '../../src/domain/best-time.js';
import { sendAtProblem } from '../../src/domain/schedule.js';

const NOW = new Date('2026-06-10T10:30:00Z');
const hours = (counts: Record<number, number>) => Array.from({ length: 24 }, (_, h) => counts[h] ?? 0);

describe('bestTimeSlots', () => {
  it('groups the devices by their best instant, in time order, the ones without activity at 10:00 local', () => {
    const devices = [
      { id: 'a', zone: 'UTC' },
      { id: 'b', zone: 'UTC' },
      { id: 'c', zone: 'Asia/Kolkata' }, // +05:30: its hours start at :30 UTC
      { id: 'd', zone: 'UTC' },
    ];
    const activity = new Map([
      ['a', hours({ 19: 3, 8: 1 })],
      ['b', hours({ 19: 2 })],
      ['c', hours({ 21: 4 })],
    ]);
    expect(bestTimeSlots(devices, activity, NOW, null).map((s) => [s.at.toISOString(), s.ids])).toEqual([
      ['2026-06-10T15:30:00.000Z', ['c']],
      ['2026-06-10T19:00:00.000Z', ['a', 'b']],
      ['2026-06-11T10:00:00.000Z', ['d']],
    ]);
  });

  it('holds a best hour inside quiet hours to their end, whether they hold or drop', () => {
    const devices = [{ id: 'night', zone: 'Europe/Paris' }];
    const activity = new Map([['night', hours({ 23: 5 })]]);
    for (const then of ['hold', 'drop'] as const)
      expect(bestTimeSlots(devices, activity, NOW, { start: '22:00', end: '08:00', then })[0]!.at.toISOString()).toBe(
        '2026-06-11T06:00:00.000Z', // 08:00 in Paris (UTC+2)
      );
  });
});

describe('send_at: "best_time"', () => {
  it('goes alone, and only in a notification', () => {
    expect(sendAtProblem({ send_at: 'best_time' }, NOW)).toBeNull();
    expect(sendAtProblem({ send_at: 'best_time', local_time: false }, NOW)).toBeNull();
    expect(sendAtProblem({ send_at: 'best_time', local_time: true }, NOW)).toBe(
      'notification.local_time: cannot be combined with send_at: "best_time"',
    );
    expect(sendAtProblem({ send_at: 'best_time' }, NOW, { object: 'message', localTimeOption: false })).toMatch(/^message\.send_at: /);
    expect(sendAtProblem({ send_at: 'best-time' }, NOW)).toMatch(/^notification\.send_at: must be an ISO 8601 date-time.*"best_time"/);
  });
});
