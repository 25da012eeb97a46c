import { z } from 'zod';
import { filterListSchema, parseFilterName, type Filter } from './filters.js';
import { notificationRequestSchema } from './notification-request.js';
import { messageRequestSchema } from './message-request.js';
import { BOTH_EXPIRIES_ERROR } from './delivery-options.js';
import { LIMITS, parseCustomAttributes } from './device-input.js';
import type { TemplateEvent } from './template-data.js';
import { webhookUrl } from './webhooks.js';

/**
 * A journey's definition as `POST /v6/journeys` takes it: what enters it (an event, or the API), who may enter
 * (entry filters, re-entry), what ends it early (exit_on, counted as converted), and its steps, each naming its next.
 */

export const JOURNEY_STATES = ['active', 'paused', 'archived'] as const;
export type JourneyState = (typeof JOURNEY_STATES)[number];
export const STEP_TYPES = ['delay', 'wait_for', 'branch', 'send', 'message', 'update', 'split', 'webhook', 'digest'] as const;
export type StepType = (typeof STEP_TYPES)[number];
/** A step's `next` (or then/else/on_event/on_timeout) that leaves the journey. */
export const END = 'end';

const SECOND_MS = 1000;
const DAY_MS = 86_400_000;
export const MIN_DURATION_MS = SECOND_MS;
export const MAX_DURATION_MS = 90 * DAY_MS;
export const MAX_STEPS = 100;
const UNIT_MS = { s: SECOND_MS, m: 60 * SECOND_MS, h: 3600 * SECOND_MS, d: DAY_MS } as const;

/** `90s`, `10m`, `2h`, `3d` in ms, or null when it is not one. */
export function parseJourneyDuration(text: string): number | null {
  const m = /^(\d{1,9})(s|m|h|d)$/.exec(text);
  return m ? Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS] : null;
}

const duration = z.string({ error: 'must be a duration such as "90s", "10m", "2h" or "3d"' }).superRefine((text, ctx) => {
  const ms = parseJourneyDuration(text);
  if (ms === null) ctx.addIssue({ code: 'custom', message: 'must be a duration such as "90s", "10m", "2h" or "3d"' });
  else if (ms < MIN_DURATION_MS) ctx.addIssue({ code: 'custom', message: 'must be at least 1 second' });
  else if (ms > MAX_DURATION_MS) ctx.addIssue({ code: 'custom', message: 'must be at most 90 days' });
});

/**
 * An event as the filter language names it without `events.`: `name` (recorded from any source) or
 * `source.name` (from that source only, e.g. `Public Api.purchase`).
 */
const eventName = z
  .string({ error: 'must be an event name' })
  .refine(
    (name) => parseFilterName(`events.${name}`) !== null,
    'must be an event name as the filter language names it (name or source.name)',
  );

const stepId = z
  .string({ error: 'must be a string' })
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or -')
  // a step named "end" could never be reached: every way onward naming it leaves the journey
  .refine((id) => id !== END, `must not be "${END}", which names the way out of the journey`);
const nextRef = z.string({ error: 'must be a step id or "end"' }).min(1, 'must be a step id or "end"');
const wallTime = z.string({ error: 'must be a time "HH:MM"' }).regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be a time "HH:MM"');

/** Stands for the entrants a send goes to while its notification is checked: the usual checks, without `to`. */
const CHECKED_TARGET = [{ name: 'device_id', criteria: ['00000000-0000-0000-0000-000000000000'] }];

/** A send step's notification: what POST /v6/notifications takes, without `to` (its entrants) and `send_at` (its step's time). */
const sendNotification = z
  .record(z.string(), z.unknown(), { error: 'must be an object as POST /v6/notifications takes it' })
  .superRefine((n, ctx) => {
    for (const field of ['to', 'send_at', 'local_time'] as const)
      if (n[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: 'is set by the journey; leave it out' });
    const parsed = notificationRequestSchema.safeParse({ notification: { ...n, to: CHECKED_TARGET } });
    if (!parsed.success)
      for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', path: issue.path.slice(1), message: issue.message });
    else refuseBothExpiries(n, [], ctx);
  });

/** The one check of a send's options that runs when it is sent but needs no clock: so refused here, not failed then. */
function refuseBothExpiries(n: Record<string, unknown>, path: string[], ctx: z.RefinementCtx): void {
  if (n.ttl !== undefined && n.expires_at !== undefined)
    ctx.addIssue({ code: 'custom', path: [...path, 'ttl'], message: BOTH_EXPIRIES_ERROR });
}

/** A message step's message: what POST /v6/messages takes, without `to`. */
const messageFields = z
  .record(z.string(), z.unknown(), { error: 'must be an object as POST /v6/messages takes it' })
  .superRefine((m, ctx) => {
    for (const field of ['to', 'send_at'] as const)
      if (m[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: 'is set by the journey; leave it out' });
    const parsed = messageRequestSchema.safeParse({ message: { ...m, to: CHECKED_TARGET } });
    if (!parsed.success)
      for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', path: issue.path.slice(1), message: issue.message });
    else if (parsed.data.message.notification) refuseBothExpiries(parsed.data.message.notification, ['notification'], ctx);
  });

/** An update step's custom attributes: `{name: {"type", "value"} | null}` as PUT /v6/devices takes `custom`. */
const updateCustom = z
  .record(z.string(), z.unknown(), { error: 'must be an object of {"type", "value"} (or null) by attribute name' })
  .superRefine((custom, ctx) => {
    if (Object.keys(custom).length > MAX_UPDATED) ctx.addIssue({ code: 'custom', message: `must set at most ${MAX_UPDATED} attributes` });
    for (const d of parseCustomAttributes(custom, '').dropped) ctx.addIssue({ code: 'custom', path: [d.field.slice(1)], message: d.error });
  });
const tagList = z
  .array(
    z
      .string({ error: 'must be a string' })
      .min(1, 'must not be empty')
      .max(LIMITS.stringLength, `must be at most ${LIMITS.stringLength} characters`),
    { error: 'must be an array of tags' },
  )
  .max(LIMITS.tags, `must hold at most ${LIMITS.tags} tags`);
/** Attributes one update step sets at most. */
const MAX_UPDATED = 20;

const pathName = z.string({ error: 'must be a string' }).regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or -');
const splitPaths = z
  .array(
    z.strictObject({
      name: pathName,
      percent: z
        .number({ error: 'must be a whole percentage' })
        .int('must be a whole percentage')
        .min(1, 'must be 1 to 100')
        .max(100, 'must be 1 to 100'),
      next: nextRef.optional(),
    }),
    { error: 'must be an array of {"name", "percent", "next"}' },
  )
  .min(2, 'must hold at least 2 paths')
  .max(10, 'must hold at most 10 paths')
  .superRefine((paths, ctx) => {
    const total = paths.reduce((sum, p) => sum + p.percent, 0);
    if (total !== 100) ctx.addIssue({ code: 'custom', message: `percentages must add up to 100 (they add up to ${total})` });
    const seen = new Set<string>();
    for (const [i, p] of paths.entries()) {
      if (seen.has(p.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: 'repeats the name of another path' });
      seen.add(p.name);
    }
  });

const base = { id: stepId, next: nextRef.optional() };
const STEP_SCHEMAS = {
  delay: z
    .strictObject({
      ...base,
      type: z.literal('delay'),
      duration: duration.optional(),
      until_local_time: wallTime.optional(),
      until: z.literal('best_time', { error: 'must be "best_time"' }).optional(),
      within: duration.optional(),
    })
    .refine((s) => [s.duration, s.until_local_time, s.until].filter((v) => v !== undefined).length === 1, {
      message: 'takes one of duration, until_local_time and until',
      path: ['duration'],
    })
    .refine((s) => s.within === undefined || s.until !== undefined, { message: 'goes with until: "best_time"', path: ['within'] }),
  wait_for: z.strictObject({
    ...base,
    type: z.literal('wait_for'),
    event: eventName,
    timeout: duration,
    on_event: nextRef.optional(),
    on_timeout: nextRef.optional(),
  }),
  branch: z.strictObject({
    ...base,
    type: z.literal('branch'),
    filters: filterListSchema,
    // the count of the entrant's last digest (none: 0), AND'ed with the filters
    digest_count: z
      .strictObject(
        { at_least: z.number({ error: 'must be a whole number' }).int('must be a whole number').min(0, 'must be 0 or more') },
        { error: 'must be {"at_least": N}' },
      )
      .optional(),
    then: nextRef.optional(),
    else: nextRef.optional(),
  }),
  send: z.strictObject({ ...base, type: z.literal('send'), notification: sendNotification }),
  message: z.strictObject({ ...base, type: z.literal('message'), message: messageFields }),
  update: z
    .strictObject({
      ...base,
      type: z.literal('update'),
      custom: updateCustom.optional(),
      add_tags: tagList.optional(),
      remove_tags: tagList.optional(),
    })
    .refine((s) => s.custom !== undefined || s.add_tags !== undefined || s.remove_tags !== undefined, {
      message: 'takes custom, add_tags or remove_tags',
      path: ['custom'],
    }),
  split: z.strictObject({ ...base, type: z.literal('split'), paths: splitPaths }),
  webhook: z.strictObject({
    ...base,
    type: z.literal('webhook'),
    url: webhookUrl,
    max_attempts: z
      .number({ error: 'must be a whole number from 1 to 10' })
      .int('must be a whole number from 1 to 10')
      .min(1, 'must be a whole number from 1 to 10')
      .max(10, 'must be a whole number from 1 to 10')
      .optional(),
    on_success: nextRef.optional(),
    on_failure: nextRef.optional(),
  }),
  digest: z.strictObject({ ...base, type: z.literal('digest'), event: eventName, window: duration }),
};

export type DelayStep = z.output<(typeof STEP_SCHEMAS)['delay']>;
export type WaitForStep = z.output<(typeof STEP_SCHEMAS)['wait_for']>;
export type BranchStep = Omit<z.output<(typeof STEP_SCHEMAS)['branch']>, 'filters'> & { filters: Filter[] };
export type SendStep = z.output<(typeof STEP_SCHEMAS)['send']>;
export type MessageStep = z.output<(typeof STEP_SCHEMAS)['message']>;
export type UpdateStep = z.output<(typeof STEP_SCHEMAS)['update']>;
export type SplitStep = z.output<(typeof STEP_SCHEMAS)['split']>;
export type WebhookStep = z.output<(typeof STEP_SCHEMAS)['webhook']>;
export type DigestStep = z.output<(typeof STEP_SCHEMAS)['digest']>;
export type JourneyStep = DelayStep | WaitForStep | BranchStep | SendStep | MessageStep | UpdateStep | SplitStep | WebhookStep | DigestStep;
/** Attempts a webhook step makes when its step names none. */
export const WEBHOOK_STEP_ATTEMPTS = 3;

/** Picks a step's schema by its type and reports that schema's own errors (an unknown type names `type`). */
const stepSchema = z.unknown().transform((value, ctx): JourneyStep => {
  const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
  if (typeof type !== 'string' || !Object.hasOwn(STEP_SCHEMAS, type)) {
    const path = typeof value === 'object' && value !== null ? ['type'] : [];
    ctx.addIssue({ code: 'custom', path, message: `must be one of ${STEP_TYPES.join(', ')}` });
    return z.NEVER;
  }
  const parsed = STEP_SCHEMAS[type as StepType].safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
    return z.NEVER;
  }
  return parsed.data as JourneyStep;
});

const triggerSchema = z.union([z.strictObject({ event: eventName }), z.strictObject({ api: z.literal(true) })], {
  error: 'must be {"event": NAME} or {"api": true}',
});
const reEntrySchema = z.union([z.literal('never'), z.literal('after_exit'), z.strictObject({ after: duration })], {
  error: 'must be "never", "after_exit" or {"after": DURATION}',
});

export const journeyFieldsSchema = z
  .strictObject(
    {
      name: z.string({ error: 'must be a string' }).trim().min(1, 'must not be empty').max(255, 'must be at most 255 characters'),
      trigger: triggerSchema,
      entry_filters: filterListSchema.optional(),
      re_entry: reEntrySchema.default('never'),
      exit_on: z.array(eventName, { error: 'must be an array of event names' }).max(20, 'must hold at most 20 events').default([]),
      steps: z
        .array(stepSchema, { error: 'must be an array of steps' })
        .min(1, 'must hold at least one step')
        .max(MAX_STEPS, `must hold at most ${MAX_STEPS} steps`),
      state: z.enum(['active', 'paused'], { error: 'must be "active" or "paused"' }).default('active'),
    },
    { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object with name, trigger and steps' : undefined) },
  )
  .superRefine((journey, ctx) => checkGraph(journey.steps, ctx));

export const journeyRequestSchema = z.strictObject(
  { journey: journeyFieldsSchema },
  { error: (issue) => (issue.code === 'invalid_type' ? 'body must be {"journey": {"name", "trigger", "steps", ...}}' : undefined) },
);
export type JourneyFields = z.output<typeof journeyFieldsSchema>;
/** What a version stores: the fields but its name and state, which belong to the journey. */
export type JourneyDefinition = Omit<JourneyFields, 'name' | 'state'>;

/**
 * Each step's way onward: the field that names it (a split's path: `paths.<name>`), where it leads (a step id or
 * "end"), and where the field is in the step.
 */
export function exitsOf(steps: readonly JourneyStep[], index: number): { field: string; to: string; at: (string | number)[] }[] {
  const step = steps[index]!;
  const following = steps[index + 1]?.id ?? END;
  const next = step.next ?? following;
  switch (step.type) {
    case 'wait_for':
      return [
        { field: 'on_event', to: step.on_event ?? next, at: ['on_event'] },
        { field: 'on_timeout', to: step.on_timeout ?? next, at: ['on_timeout'] },
      ];
    case 'branch':
      return [
        { field: 'then', to: step.then ?? next, at: ['then'] },
        { field: 'else', to: step.else ?? next, at: ['else'] },
      ];
    case 'split':
      return step.paths.map((p, i) => ({ field: `paths.${p.name}`, to: p.next ?? next, at: ['paths', i, 'next'] }));
    case 'webhook':
      return [
        { field: 'on_success', to: step.on_success ?? next, at: ['on_success'] },
        { field: 'on_failure', to: step.on_failure ?? next, at: ['on_failure'] },
      ];
    default:
      return [{ field: 'next', to: next, at: ['next'] }];
  }
}

/**
 * Step ids are unique, every way onward names a step or "end", and every cycle holds a delay or a wait_for (else an
 * entrant would go round it at once, for ever).
 */
function checkGraph(steps: readonly JourneyStep[], ctx: z.RefinementCtx): void {
  const index = new Map<string, number>();
  for (const [i, s] of steps.entries()) {
    if (index.has(s.id)) ctx.addIssue({ code: 'custom', path: ['steps', i, 'id'], message: `repeats the id of steps[${index.get(s.id)}]` });
    else index.set(s.id, i);
  }
  for (const i of steps.keys())
    for (const { to, at } of exitsOf(steps, i))
      if (to !== END && !index.has(to))
        ctx.addIssue({ code: 'custom', path: ['steps', i, ...at], message: `names no step ("${to}"; a step id or "end")` });
  // a cycle among the steps that move on at once (not a delay, a wait_for or a digest): depth first, by colour
  const instant = (i: number) => !['delay', 'wait_for', 'digest'].includes(steps[i]!.type);
  const colour = new Map<number, 'open' | 'done'>();
  const visit = (i: number): { step: number; at: (string | number)[] } | null => {
    colour.set(i, 'open');
    for (const { to, at } of exitsOf(steps, i)) {
      const j = index.get(to);
      if (j === undefined || !instant(j)) continue;
      if (colour.get(j) === 'open') return { step: i, at };
      if (!colour.has(j)) {
        const found = visit(j);
        if (found) return found;
      }
    }
    colour.set(i, 'done');
    return null;
  };
  for (const i of steps.keys()) {
    if (!instant(i) || colour.has(i)) continue;
    const cycle = visit(i);
    if (cycle) {
      ctx.addIssue({
        code: 'custom',
        path: ['steps', cycle.step, ...cycle.at],
        message: 'closes a cycle without a delay or a wait_for in it',
      });
      return;
    }
  }
}

/** The keys an event recorded with `source` and `name` answers to: its name, and its `source.name`. */
export function eventKeys(events: readonly { source: string; name: string }[]): string[] {
  return [...new Set(events.flatMap((e) => [e.name, `${e.source}.${e.name}`]))];
}

/**
 * Each event by every key a journey may name it by (`eventKeys`), as templates read it (`event.*`); of two events
 * with a key the later in the request wins.
 */
export function eventsByKey(
  events: readonly { source: string; name: string; date: Date; properties?: Record<string, unknown> }[],
): Record<string, TemplateEvent> {
  const out = new Map<string, TemplateEvent>();
  for (const e of events) {
    const event = { name: e.name, date: e.date.toISOString(), properties: e.properties ?? {} };
    out.set(e.name, event);
    out.set(`${e.source}.${e.name}`, event);
  }
  // own properties whatever the names (an event may be named __proto__)
  return Object.fromEntries(out);
}

/** The events a definition waits for or exits on. */
export function listenedEvents(d: JourneyDefinition): string[] {
  const waits = d.steps.flatMap((s) => (s.type === 'wait_for' || s.type === 'digest' ? [s.event] : []));
  return [...new Set([...d.exit_on, ...waits])];
}

/** What a delay until a local time takes at the least once round a cycle: it passes that time once a day. */
const LOCAL_TIME_ROUND_MS = 23 * 3_600_000;

/**
 * The quickest an entrant can come back to a send or message step round a cycle, when that is under `minMs`: the
 * step and how long the round takes. A round spends a delay's duration (a day for one until a local time) and a
 * wait_for's timeout when it leaves by on_timeout; leaving by on_event waits for the user, and does not count as quick.
 */
export function quickSendingCycle(steps: readonly JourneyStep[], minMs: number): { at: number; ms: number } | null {
  const index = new Map(steps.map((s, i) => [s.id, i]));
  const spent = (s: JourneyStep, field: string): number => {
    // a delay until the best time may end within the hour
    if (s.type === 'delay') return s.duration !== undefined ? parseJourneyDuration(s.duration)! : s.until ? 0 : LOCAL_TIME_ROUND_MS;
    if (s.type === 'digest') return parseJourneyDuration(s.window)!;
    if (s.type === 'wait_for') return field === 'on_timeout' ? parseJourneyDuration(s.timeout)! : Infinity;
    return 0;
  };
  for (const [start, step] of steps.entries()) {
    if (step.type !== 'send' && step.type !== 'message') continue;
    // shortest time from this step back to it (Dijkstra over at most MAX_STEPS steps)
    const best = new Map<number, number>([[start, 0]]);
    const done = new Set<number>();
    let back = Infinity;
    for (;;) {
      let i = -1;
      for (const [j, t] of best) if (!done.has(j) && (i === -1 || t < best.get(i)!)) i = j;
      if (i === -1 || best.get(i)! >= Math.min(back, minMs)) break;
      done.add(i);
      for (const { field, to } of exitsOf(steps, i)) {
        const j = index.get(to);
        const t = best.get(i)! + spent(steps[i]!, field);
        if (j === undefined) continue;
        if (j === start) back = Math.min(back, t);
        else if (t < (best.get(j) ?? Infinity)) best.set(j, t);
      }
    }
    if (back < minMs) return { at: start, ms: back };
  }
  return null;
}
