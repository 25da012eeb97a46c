/**
 * Date math as the contract defines it: `now` or `<date>||`, then any number of `+N<unit>` / `-N<unit>`,
 * then an optional `/<unit>` that rounds down. Units: y M w d h H m s. All arithmetic is UTC, milliseconds.
 */
export type DateUnit = 'y' | 'M' | 'w' | 'd' | 'h' | 'm' | 's';

export interface DateMath {
  anchor: 'now' | Date;
  steps: { sign: 1 | -1; amount: number; unit: DateUnit }[];
  roundTo?: DateUnit;
}

const UNIT_PATTERN = '[yMwdhHms]';
const STEP = new RegExp(`^([+-])(\\d+)(${UNIT_PATTERN})`);
const ROUND = new RegExp(`^/(${UNIT_PATTERN})$`);
// ISO 8601 calendar date with optional time, fraction and zone; no zone means UTC. A zone offset is at most 23:59.
const ZONE = '(?:Z|[+-](?:[01]\\d|2[0-3]):?[0-5]\\d)';
const isoDate = (zone: string) =>
  new RegExp(`^(\\d{4})-(\\d{2})-(\\d{2})(?:[T ](\\d{2}):(\\d{2})(?::(\\d{2})(\\.\\d{1,9})?)?(${zone})?)?$`);
const ISO_DATE = isoDate(ZONE);
// what was accepted before the years and zones were limited: still read in filters stored then
const STORED_ISO_DATE = isoDate('Z|[+-]\\d{2}:?\\d{2}');

/**
 * The instants a date may name: years 1 to 9999 (UTC), what PostgreSQL's timestamptz and ISO 8601's four-digit
 * years both hold. A date-math expression may reach past them (`now+9000y`); what stores or compares it clamps.
 */
export const EARLIEST_INSTANT = utc(1, 0, 1);
export const LATEST_INSTANT = utc(9999, 11, 31, 23, 59, 59, 999);

/** The greatest span a date-math expression's steps may add up to: 10,000 years, so its arithmetic stays exact. */
const MAX_SPAN_MS = 10_000 * 366 * 86_400_000;

/** Date.UTC, but years 0 to 99 are those years (Date.UTC reads them as 1900 to 1999). */
function utc(year: number, month: number, day: number, h = 0, mi = 0, s = 0, ms = 0): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month, day);
  return d.setUTCHours(h, mi, s, ms);
}

const normaliseUnit = (u: string): DateUnit => (u === 'H' ? 'h' : (u as DateUnit));

// A date and a time with an explicit zone: a zoneless time would be read in some server's zone.
const ISO_INSTANT = new RegExp(`^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(?::\\d{2}(?:\\.\\d{1,9})?)?${ZONE}$`);

/** Parses an ISO 8601 date-time with a zone offset or Z (an instant); null when it is not one. */
export function parseIsoInstant(text: string): Date | null {
  return ISO_INSTANT.test(text) ? parseIsoDate(text) : null;
}

/**
 * Parses an ISO 8601 date or date-time; null when it is not one, names an impossible day, or an instant outside
 * EARLIEST_INSTANT..LATEST_INSTANT once its zone is applied.
 */
export function parseIsoDate(text: string): Date | null {
  return readIsoDate(text, false);
}

/** parseIsoDate; `stored`: a date written before the limits (any year and zone offset), read as written. */
function readIsoDate(text: string, stored: boolean): Date | null {
  const m = (stored ? STORED_ISO_DATE : ISO_DATE).exec(text);
  if (!m) return null;
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', zone = 'Z'] = m;
  const ms = frac ? Math.floor(Number(`0${frac}`) * 1000) : 0;
  const local = utc(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
  const check = new Date(local);
  if (check.getUTCDate() !== Number(d) || check.getUTCMonth() !== Number(mo) - 1 || Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) {
    return null;
  }
  let offsetMin = 0;
  if (zone !== 'Z') {
    const z = zone.replace(':', '');
    offsetMin = (z[0] === '-' ? -1 : 1) * (Number(z.slice(1, 3)) * 60 + Number(z.slice(3, 5)));
  }
  const instant = local - offsetMin * 60_000;
  return stored || (instant >= EARLIEST_INSTANT && instant <= LATEST_INSTANT) ? new Date(instant) : null;
}

/** The units of a fixed length; years and months are calendar arithmetic (addUnit). */
const FIXED_MS: Partial<Record<DateUnit, number>> = { w: 604_800_000, d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000 };

/** The most a step of each unit moves a date (a year or a month at its longest). */
const UNIT_SPAN_MS: Record<DateUnit, number> = { ...FIXED_MS, y: 366 * 86_400_000, M: 31 * 86_400_000 } as Record<DateUnit, number>;

/**
 * Parses date math; returns null with no exception for anything outside the grammar, and for steps that add up
 * to more than 10,000 years. `stored`: math written before that limit (and its anchor before the years' and
 * zones'), taken as written.
 */
export function parseDateMath(text: string, stored = false): DateMath | null {
  let rest: string;
  let anchor: DateMath['anchor'];
  if (text.startsWith('now')) {
    anchor = 'now';
    rest = text.slice(3);
  } else {
    const bar = text.indexOf('||');
    if (bar < 0) return null;
    const date = readIsoDate(text.slice(0, bar), stored);
    if (!date) return null;
    anchor = date;
    rest = text.slice(bar + 2);
  }
  const steps: DateMath['steps'] = [];
  let span = 0;
  for (let m = STEP.exec(rest); m; m = STEP.exec(rest)) {
    const amount = Number(m[2]);
    const unit = normaliseUnit(m[3]!);
    span += amount * UNIT_SPAN_MS[unit];
    if (!stored && !(span <= MAX_SPAN_MS)) return null;
    steps.push({ sign: m[1] === '-' ? -1 : 1, amount, unit });
    rest = rest.slice(m[0].length);
  }
  let roundTo: DateUnit | undefined;
  if (rest !== '') {
    const r = ROUND.exec(rest);
    if (!r) return null;
    roundTo = normaliseUnit(r[1]!);
  }
  return { anchor, steps, roundTo };
}

/** A range bound as accepted by filters: an ISO date or a date-math expression. */
export function isDateValue(text: string): boolean {
  return parseIsoDate(text) !== null || parseDateMath(text) !== null;
}

/** Resolves an ISO date or date-math string to an instant, `now` being the given time. */
export function resolveDate(text: string, now: Date): Date {
  // read as the filters stored before the limits were written, which are compiled again at each use
  const iso = readIsoDate(text, true);
  if (iso) return iso;
  const expr = parseDateMath(text, true);
  if (!expr) throw new Error(`not a date or date-math expression: ${text}`);
  return evaluateDateMath(expr, now);
}

export function evaluateDateMath(expr: DateMath, now: Date): Date {
  let t = new Date((expr.anchor === 'now' ? now : expr.anchor).getTime());
  for (const step of expr.steps) {
    t = addUnit(t, step.sign * step.amount, step.unit);
    // past the dates JavaScript holds (only math longer than parseDateMath allows): the farthest one that way
    if (Number.isNaN(t.getTime())) return new Date(step.sign * 8.64e15);
  }
  return expr.roundTo ? roundDown(t, expr.roundTo) : t;
}

function addUnit(t: Date, amount: number, unit: DateUnit): Date {
  const fixed = FIXED_MS[unit];
  if (fixed !== undefined) return new Date(t.getTime() + amount * fixed);
  const months = unit === 'y' ? amount * 12 : amount;
  const y = t.getUTCFullYear();
  const targetMonth = t.getUTCMonth() + months;
  const ty = y + Math.floor(targetMonth / 12);
  const tm = ((targetMonth % 12) + 12) % 12;
  // Calendar arithmetic clamps to the month's last day (Jan 31 + 1M = Feb 28/29), as Elasticsearch does.
  const lastDay = new Date(utc(ty, tm + 1, 0)).getUTCDate();
  const day = Math.min(t.getUTCDate(), lastDay);
  return new Date(utc(ty, tm, day, t.getUTCHours(), t.getUTCMinutes(), t.getUTCSeconds(), t.getUTCMilliseconds()));
}

function roundDown(t: Date, unit: DateUnit): Date {
  const y = t.getUTCFullYear();
  const mo = t.getUTCMonth();
  const d = t.getUTCDate();
  switch (unit) {
    case 'y':
      return new Date(utc(y, 0, 1));
    case 'M':
      return new Date(utc(y, mo, 1));
    case 'w': {
      const dayStart = utc(y, mo, d);
      const sinceMonday = (t.getUTCDay() + 6) % 7; // ISO weeks start on Monday
      return new Date(dayStart - sinceMonday * 86_400_000);
    }
    case 'd':
      return new Date(utc(y, mo, d));
    case 'h':
      return new Date(utc(y, mo, d, t.getUTCHours()));
    case 'm':
      return new Date(utc(y, mo, d, t.getUTCHours(), t.getUTCMinutes()));
    case 's':
      return new Date(Math.floor(t.getTime() / 1000) * 1000);
  }
}
