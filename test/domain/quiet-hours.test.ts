import { describe, expect, it } from 'vitest';
import { parseQuietHoursSetting, quietEnd, quietWaves, type QuietHours } from '../../src/domain/quiet-hours.js';

const NIGHT: QuietHours = { start: '22:00', end: '08:00', then: 'hold' };
const at = (iso: string) => new Date(iso);

describe('quietEnd', () => {
  it('holds a time inside a window over midnight to its end, that night', () => {
    expect(quietEnd(at('2026-03-07T22:00:00Z'), 'Europe/Paris', NIGHT)).toEqual(at('2026-03-08T07:00:00Z')); // 23:00 -> 08:00
    expect(quietEnd(at('2026-03-07T22:00:00Z'), 'Asia/Tokyo', NIGHT)).toEqual(at('2026-03-07T23:00:00Z')); // 07:00 -> 08:00
    expect(quietEnd(at('2026-03-07T21:00:00Z'), 'Europe/Paris', NIGHT)).toEqual(at('2026-03-08T07:00:00Z')); // 22:00 sharp
    expect(quietEnd(at('2026-03-07T22:00:00Z'), 'America/New_York', NIGHT)).toBeNull(); // 17:00
    expect(quietEnd(at('2026-03-08T07:00:00Z'), 'Europe/Paris', NIGHT)).toBeNull(); // 08:00 sharp: over
  });

  it('takes a window within one day, and the clocks going forward in the night', () => {
    const lunch: QuietHours = { start: '12:00', end: '14:00', then: 'drop' };
    expect(quietEnd(at('2026-03-07T12:30:00Z'), 'UTC', lunch)).toEqual(at('2026-03-07T14:00:00Z'));
    expect(quietEnd(at('2026-03-07T14:00:00Z'), 'UTC', lunch)).toBeNull();
    // 29 March 2026, Paris goes from 02:00 to 03:00: 23:00 on the 28th (CET) ends at 08:00 CEST, 06:00 UTC
    expect(quietEnd(at('2026-03-28T22:00:00Z'), 'Europe/Paris', NIGHT)).toEqual(at('2026-03-29T06:00:00Z'));
  });
});

describe('quietWaves', () => {
  it('groups the zones by when they go, and drops those inside with then: drop', () => {
    const due = [{ at: at('2026-03-07T22:00:00Z'), zones: ['America/New_York', 'Europe/Paris', 'Europe/Berlin', 'Asia/Tokyo'] }];
    expect(quietWaves(due, NIGHT)).toEqual({
      waves: [
        { at: at('2026-03-07T22:00:00Z'), zones: ['America/New_York'] },
        { at: at('2026-03-07T23:00:00Z'), zones: ['Asia/Tokyo'] },
        { at: at('2026-03-08T07:00:00Z'), zones: ['Europe/Paris', 'Europe/Berlin'] },
      ],
      dropped: [],
    });
    expect(quietWaves(due, { ...NIGHT, then: 'drop' })).toEqual({
      waves: [{ at: at('2026-03-07T22:00:00Z'), zones: ['America/New_York'] }],
      dropped: ['Europe/Paris', 'Europe/Berlin', 'Asia/Tokyo'],
    });
  });
});

describe('parseQuietHoursSetting', () => {
  it('reads the CLI form', () => {
    expect(parseQuietHoursSetting('22:00-08:00')).toEqual(NIGHT);
    expect(parseQuietHoursSetting('22:00-08:00/drop')).toEqual({ ...NIGHT, then: 'drop' });
    for (const bad of ['22-08', '22:00-22:00', '25:00-08:00', '22:00-08:00/later', '']) expect(parseQuietHoursSetting(bad), bad).toBeNull();
  });
});
