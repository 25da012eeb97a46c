import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  instantOf,
  isInLocalMinute,
  isTimeZone,
  parseLocalDateTime,
  planLocalTime,
  sendAtProblem,
  wallTimeAt,
  type LocalDateTime,
} from '../../src/domain/schedule.js';

const local = (text: string): LocalDateTime => parseLocalDateTime(text)!;
const at = (text: string, zone: string) => instantOf(local(text), zone).toISOString();

describe('instantOf: a wall time in a zone', () => {
  it('plain offsets, half and quarter hours, both ends of the world', () => {
    expect(at('2026-07-01T09:00', 'UTC')).toBe('2026-07-01T09:00:00.000Z');
    expect(at('2026-07-01T09:00', 'Asia/Kolkata')).toBe('2026-07-01T03:30:00.000Z'); // +5:30
    expect(at('2026-07-01T09:00', 'Asia/Kathmandu')).toBe('2026-07-01T03:15:00.000Z'); // +5:45
    expect(at('2026-07-01T09:00', 'Pacific/Kiritimati')).toBe('2026-06-30T19:00:00.000Z'); // +14
    expect(at('2026-07-01T09:00', 'Pacific/Pago_Pago')).toBe('2026-07-01T20:00:00.000Z'); // -11
    expect(at('2026-07-01T09:00', 'America/New_York')).toBe('2026-07-01T13:00:00.000Z'); // EDT
    expect(at('2026-01-15T09:00', 'America/New_York')).toBe('2026-01-15T14:00:00.000Z'); // EST
    expect(at('2026-01-15T09:00', 'Australia/Sydney')).toBe('2026-01-14T22:00:00.000Z'); // AEDT, southern summer
    expect(at('2026-07-15T09:00', 'Australia/Sydney')).toBe('2026-07-14T23:00:00.000Z'); // AEST
  });

  it('a wall time in the spring-forward gap goes out as far past the gap as it was asked into it', () => {
    // New York 2026-03-08 02:00 -> 03:00: 02:30 does not exist, it is sent at 03:30 EDT
    expect(at('2026-03-08T02:30', 'America/New_York')).toBe('2026-03-08T07:30:00.000Z');
    // Berlin 2026-03-29 02:00 -> 03:00
    expect(at('2026-03-29T02:15', 'Europe/Berlin')).toBe('2026-03-29T01:15:00.000Z'); // 03:15 CEST
    // Sydney 2026-10-04 02:00 -> 03:00 (southern spring)
    expect(at('2026-10-04T02:45', 'Australia/Sydney')).toBe('2026-10-03T16:45:00.000Z'); // 03:45 AEDT
    // Lord Howe moves by 30 minutes: 2026-10-04 02:00 -> 02:30
    expect(at('2026-10-04T02:10', 'Australia/Lord_Howe')).toBe('2026-10-03T15:40:00.000Z'); // 02:40 at +11
  });

  it('a wall time that happens twice (fall back) goes out the first time', () => {
    // New York 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 happens at 05:30Z and 06:30Z
    expect(at('2026-11-01T01:30', 'America/New_York')).toBe('2026-11-01T05:30:00.000Z');
    // Berlin 2026-10-25 03:00 CEST -> 02:00 CET: 02:30 at 00:30Z and 01:30Z
    expect(at('2026-10-25T02:30', 'Europe/Berlin')).toBe('2026-10-25T00:30:00.000Z');
    // Sydney 2026-04-05 03:00 AEDT -> 02:00 AEST: 02:30 at 15:30Z and 16:30Z on the 4th
    expect(at('2026-04-05T02:30', 'Australia/Sydney')).toBe('2026-04-04T15:30:00.000Z');
    // Lord Howe 2026-04-05 02:00 (+11) -> 01:30 (+10:30): 01:45 at 14:45Z and 15:15Z on the 4th
    expect(at('2026-04-05T01:45', 'Australia/Lord_Howe')).toBe('2026-04-04T14:45:00.000Z');
  });

  it('gives back the wall time asked for whenever that wall time exists (any zone, any minute)', () => {
    const zones = Intl.supportedValuesOf('timeZone');
    fc.assert(
      fc.property(
        fc.constantFrom(...zones),
        fc.date({ min: new Date('2025-01-01T00:00:00Z'), max: new Date('2028-01-01T00:00:00Z'), noInvalidDate: true }),
        (zone, instant) => {
          // a wall time that exists: the one this zone shows at some instant
          const wall = wallTimeAt(zone, new Date(Math.floor(instant.getTime() / 60_000) * 60_000));
          const back = instantOf(wall, zone);
          expect(wallTimeAt(zone, back)).toEqual(wall);
          // and it is the first instant showing that wall time
          expect(wallTimeAt(zone, new Date(back.getTime() - 3_600_000))).not.toEqual(wall);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('planLocalTime', () => {
  it('groups zones by the instant their wall time comes, in time order, and sets aside those already past', () => {
    const plan = planLocalTime(
      '2026-03-08T02:30',
      ['America/New_York', 'Europe/Berlin', 'Europe/Paris', 'UTC', 'Pacific/Kiritimati', 'Australia/Sydney'],
      new Date('2026-03-07T12:45:00Z'),
    );
    expect(plan.past).toEqual(['Pacific/Kiritimati']); // 02:30 at +14 was 12:30Z
    expect(plan.waves.map((w) => [w.at.toISOString(), w.zones])).toEqual([
      ['2026-03-07T15:30:00.000Z', ['Australia/Sydney']],
      ['2026-03-08T01:30:00.000Z', ['Europe/Berlin', 'Europe/Paris']],
      ['2026-03-08T02:30:00.000Z', ['UTC']],
      ['2026-03-08T07:30:00.000Z', ['America/New_York']],
    ]);
  });

  it('plans every zone the runtime knows in well under a second', () => {
    const zones = Intl.supportedValuesOf('timeZone');
    planLocalTime('2026-12-24T09:00', zones, new Date('2026-12-01T00:00:00Z')); // warm the formatters
    const started = performance.now();
    const plan = planLocalTime('2026-12-24T18:00', zones, new Date('2026-12-01T00:00:00Z'));
    // a few ms here; the bound leaves a loaded machine room and still catches a formatter built per zone (seconds)
    expect(performance.now() - started).toBeLessThan(250);
    expect(plan.waves.flatMap((w) => w.zones).sort()).toEqual([...zones].sort());
    for (const w of plan.waves) for (const z of w.zones) expect(isInLocalMinute(w.at, z, local('2026-12-24T18:00'))).toBe(true);
  });
});

describe('send_at rules', () => {
  const now = new Date('2026-03-07T12:45:00Z');
  it('accepts an instant with an offset, or a local wall time with local_time', () => {
    expect(sendAtProblem({ send_at: '2026-03-07T14:00:00+01:00' }, now)).toBeNull();
    expect(sendAtProblem({ send_at: '2026-03-07T13:00Z' }, now)).toBeNull();
    expect(sendAtProblem({ send_at: '2026-03-08T09:00', local_time: true }, now)).toBeNull();
    expect(sendAtProblem({ send_at: '2026-03-08T09:00:30', local_time: true }, now)).toBeNull();
    expect(sendAtProblem({}, now)).toBeNull();
  });

  it('refuses the past, more than a year ahead, and the wrong form, naming the field', () => {
    expect(sendAtProblem({ send_at: '2026-03-07T12:44:59Z' }, now)).toBe('notification.send_at: is in the past');
    expect(sendAtProblem({ send_at: '2027-03-10T00:00:00Z' }, now)).toBe('notification.send_at: is more than a year ahead');
    // a local time is past only once it is past in the last zone to reach it (UTC-12)
    expect(sendAtProblem({ send_at: '2026-03-07T01:00', local_time: true }, now)).toBeNull(); // 13:00Z at UTC-12
    expect(sendAtProblem({ send_at: '2026-03-07T00:30', local_time: true }, now)).toBe('notification.send_at: is in the past');
    expect(sendAtProblem({ send_at: '2026-03-08T09:00' }, now)).toMatch(
      /^notification\.send_at: must be an ISO 8601 date-time with an offset/,
    );
    expect(sendAtProblem({ send_at: '2026-03-08T09:00Z', local_time: true }, now)).toMatch(/^notification\.send_at: with local_time/);
    expect(sendAtProblem({ send_at: '2026-02-30T09:00', local_time: true }, now)).toMatch(/^notification\.send_at: with local_time/);
    expect(sendAtProblem({ send_at: '2026-13-01T09:00:00Z' }, now)).toMatch(/^notification\.send_at: must be/);
    expect(sendAtProblem({ local_time: true }, now)).toBe('notification.send_at: is required with local_time');
  });

  it('knows the IANA zones', () => {
    expect(isTimeZone('Europe/Paris')).toBe(true);
    expect(isTimeZone('America/Argentina/Buenos_Aires')).toBe(true);
    expect(isTimeZone('Mars/Olympus_Mons')).toBe(false);
    expect(isTimeZone('')).toBe(false);
  });
});
