import { createHash } from 'node:crypto';
import { z } from 'zod';
import { checkLocalized, localizedSchema, type Localized } from './localized.js';
import { payloadSchema, type Payload } from './payload.js';
import { isVisiblePush } from './push-mapping.js';
import { timingOf, type LocalPlan } from './campaign.js';
import { quietHoursOf, type QuietHours } from './quiet-hours.js';

/**
 * A/B tests (issue 42): `variants` (2–5 payloads, each with its own `localized`) beside `test_fraction`, an optional
 * `holdout_fraction` and `winner`. Each device of the audience falls in one bucket, stable for the notification: a
 * variant of the test share (split evenly), the holdout (sent nothing) or the rest, which is sent the winner.
 */

export const AB_MIN_VARIANTS = 2;
export const AB_MAX_VARIANTS = 5;
/** `after` at most this long: the rest's audience and the test's opens are read when it passes. */
const MAX_AFTER_MINUTES = 30 * 24 * 60;

export const variantSchema = z.strictObject(
  { payload: payloadSchema, localized: localizedSchema.optional() },
  { error: (issue) => (issue.code === 'invalid_type' ? 'must be {"payload": {...}, "localized"?: {...}}' : undefined) },
);
export type Variant = z.output<typeof variantSchema>;

/** `4h`, `30m`, `2d`: a number of minutes, hours or days. */
export function parseDuration(text: string): number | null {
  const m = /^([1-9]\d{0,5})(m|h|d)$/.exec(text);
  if (!m) return null;
  return Number(m[1]) * { m: 1, h: 60, d: 1440 }[m[2] as 'm' | 'h' | 'd'] * 60_000;
}

/** What the winner is picked by: direct opens, or conversions of one event (keyed as in the statistics). */
export type AbMetric = { kind: 'direct_opens' } | { kind: 'conversions'; event: string };

export function parseMetric(text: string): AbMetric | null {
  if (text === 'direct_opens') return { kind: 'direct_opens' };
  const m = /^conversions:(.{1,255})$/s.exec(text);
  return m && m[1]!.trim() === m[1] ? { kind: 'conversions', event: m[1]! } : null;
}

const winnerSchema = z.union(
  [
    z.literal('manual'),
    z.strictObject({
      metric: z
        .string({ error: 'must be a string' })
        .refine((v) => parseMetric(v) !== null, 'must be "direct_opens" or "conversions:<event>"'),
      after: z.string({ error: 'must be a string' }).refine((v) => {
        const ms = parseDuration(v);
        return ms !== null && ms <= MAX_AFTER_MINUTES * 60_000;
      }, 'must be a duration such as "30m", "4h" or "2d" (at most 30 days)'),
    }),
  ],
  { error: 'must be "manual" or {"metric": "direct_opens"|"conversions:<event>", "after": "4h"}' },
);

const fraction = () => z.number({ error: 'must be a number' });

/** The request fields, spread into a notification object; their cross-checks are `checkAbTest`. */
export const abTestFields = {
  variants: z
    .array(variantSchema, { error: 'must be an array of {"payload", "localized"?}' })
    .min(AB_MIN_VARIANTS, `must hold at least ${AB_MIN_VARIANTS} variants`)
    .max(AB_MAX_VARIANTS, `must hold at most ${AB_MAX_VARIANTS} variants`)
    .optional(),
  test_fraction: fraction().gt(0, 'must be more than 0').max(1, 'must be at most 1').optional(),
  holdout_fraction: fraction().min(0, 'must be at least 0').lt(1, 'must be less than 1').optional(),
  winner: winnerSchema.optional(),
};

interface AbFields {
  payload?: Payload;
  localized?: Localized;
  variants?: Variant[];
  test_fraction?: number;
  holdout_fraction?: number;
  winner?: z.output<typeof winnerSchema>;
  local_time?: boolean;
}

/** The cross-checks of a notification's A/B fields; without variants, the payload is required. */
export function checkAbTest(n: AbFields, ctx: z.RefinementCtx): void {
  const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
  if (!n.variants) {
    if (n.payload === undefined) issue(['payload'], 'must be an object');
    for (const key of ['test_fraction', 'holdout_fraction', 'winner'] as const) if (n[key] !== undefined) issue([key], 'needs variants');
    return;
  }
  if (n.payload !== undefined) issue(['payload'], 'cannot be combined with variants (each variant has its own)');
  if (n.localized !== undefined) issue(['localized'], 'cannot be combined with variants (give it in each variant)');
  if (n.test_fraction === undefined) issue(['test_fraction'], 'is required with variants');
  if (n.winner === undefined) issue(['winner'], 'is required with variants');
  if ((n.test_fraction ?? 0) + (n.holdout_fraction ?? 0) > 1) issue(['holdout_fraction'], 'with test_fraction must be at most 1');
  // which devices may be sent to (their notification setting) is decided once for the audience
  const visible = isVisiblePush(n.variants[0]!.payload);
  n.variants.forEach((v, i) => {
    if (isVisiblePush(v.payload) !== visible)
      issue(['variants', i, 'payload'], 'must show something if the first variant does, and only then');
    // a collapse_key replaces a notification in place: the test and its rest are one notification
    if (v.payload.collapse_key !== undefined) issue(['variants', i, 'payload', 'collapse_key'], 'cannot be used in an A/B test');
    checkLocalized(v.payload, v.localized, ctx, undefined, ['variants', i]);
  });
}

/** An A/B test as its notification stores it (its request's fields). */
export interface AbTest {
  variants: Variant[];
  test_fraction: number;
  holdout_fraction?: number;
  winner: 'manual' | { metric: string; after: string };
}

/** The A/B test of a stored request, or null for a notification of one payload. */
export function abTestOf(request: unknown): AbTest | null {
  const r = request as Partial<AbTest> | null;
  return r && Array.isArray(r.variants) && typeof r.test_fraction === 'number' && r.winner !== undefined ? (r as AbTest) : null;
}

/** The device's bucket code: a variant index (0…), HOLDOUT, or REST. */
export const HOLDOUT = -1;
export const REST = -2;

/** The bounds of the buckets on the 32-bit hash line: `[0, testEnd)` split evenly among the variants, then the holdout. */
export interface AbBounds {
  variants: number;
  testEnd: number;
  holdoutEnd: number;
}

const LINE = 2 ** 32;

export function abBounds(test: AbTest): AbBounds {
  const testEnd = Math.floor(test.test_fraction * LINE);
  return {
    variants: test.variants.length,
    testEnd,
    holdoutEnd: Math.min(LINE, testEnd + Math.floor((test.holdout_fraction ?? 0) * LINE)),
  };
}

/**
 * A device's place on the hash line: the first 32 bits of md5("<notification id><device id>"), which SQL computes
 * alike (`AbTestsRepository`'s statistics), so a device's bucket is the same wherever it is read.
 */
export function abPoint(notificationId: string, deviceId: string): number {
  return parseInt(
    createHash('md5')
      .update(notificationId + deviceId)
      .digest('hex')
      .slice(0, 8),
    16,
  );
}

export function bucketOf(point: number, b: AbBounds): number {
  if (point < b.testEnd) return Math.floor((point * b.variants) / b.testEnd);
  return point < b.holdoutEnd ? HOLDOUT : REST;
}

/** The time the winner is picked: `after` past the end of the test's fan-out; null for a manual pick. */
export function decideAt(test: AbTest, testSentAt: Date): Date | null {
  if (test.winner === 'manual') return null;
  return new Date(testSentAt.getTime() + parseDuration(test.winner.after)!);
}

/** The winner by its metric: the variant with the most, the first of those tied. */
export function pickWinner(metric: number[]): number {
  let best = 0;
  for (let i = 1; i < metric.length; i++) if (metric[i]! > metric[best]!) best = i;
  return best;
}

/**
 * When an A/B test's rest goes out, from the moment its winner is picked: at once, or, with quiet hours (the request's,
 * else the app's), each zone when it is out of them, planned again from then (a local-time test's wall time is past).
 */
export function restTiming(
  n: { request: unknown; local_plan: LocalPlan | null },
  appQuiet: QuietHours | null,
  now: Date,
): { localPlan: LocalPlan | null; nextDueAt: Date | null } {
  if (!n.local_plan) return { localPlan: null, nextDueAt: null };
  const quiet = quietHoursOf((n.request as { quiet_hours?: QuietHours | false }).quiet_hours, appQuiet);
  const t = timingOf({}, now, n.local_plan.defaultZone, n.local_plan.zones, quiet);
  return { localPlan: t.localPlan, nextDueAt: t.nextDueAt && t.nextDueAt > now ? t.nextDueAt : null };
}
