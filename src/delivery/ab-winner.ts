import type { Job } from 'bullmq';
import type { AbTestsRepository } from '../db/repositories/ab-tests.js';
import { abBounds, abTestOf, parseMetric, pickWinner, restTiming } from '../domain/ab-test.js';
import type { FanoutDeps } from './fanout-deps.js';
import type { JobTypes, NotificationScheduler } from './jobs.js';

/** The figure a test's metric reads of each variant: its direct opens, or its conversions of one event. */
export function metricOf(metric: string, variants: number, figures: Awaited<ReturnType<AbTestsRepository['figures']>>): number[] {
  const m = parseMetric(metric)!;
  const values = new Array<number>(variants).fill(0);
  if (m.kind === 'direct_opens') {
    for (const f of figures.buckets) if (f.bucket >= 0 && f.bucket < variants) values[f.bucket] = f.direct_opens;
  } else {
    for (const c of figures.conversions)
      if (c.bucket >= 0 && c.bucket < variants && (c.source ? `${c.source}.${c.name}` : c.name) === m.event) values[c.bucket]! += c.count;
  }
  return values;
}

/**
 * Picks an A/B test's winner by its metric once the due poller released it (`after` passed since its test share
 * went out), then enqueues the rest's fan-out. Idempotent: the pick happens once (`AbTestsRepository.pick`), a
 * repeat only enqueues the rest's fan-out again under its deterministic id; a canceled test picks nothing.
 */
export function abWinnerProcessor(deps: FanoutDeps & { abTests: AbTestsRepository; scheduler: NotificationScheduler }) {
  return async (job: Job<JobTypes['abWinner']>): Promise<void> => {
    const { notificationId, generation } = job.data;
    const log = deps.log.child({ notificationId, generation, job: 'abWinner' });
    const n = await deps.notifications.findById(deps.db, notificationId);
    const test = n && abTestOf(n.request);
    if (!n || !test || n.generation !== generation || test.winner === 'manual') return;
    if (n.ab_stage === 'waiting') {
      if (n.next_due_at && n.next_due_at > deps.clock.now()) return; // not due: the due poller releases it
      const bounds = abBounds(test);
      const metric = metricOf(test.winner.metric, bounds.variants, await deps.abTests.figures(deps.db, n.id, bounds));
      const winner = pickWinner(metric);
      const { quiet_hours } = await deps.apps.campaignSettings(deps.db, n.app_id);
      const now = deps.clock.now();
      if (!(await deps.abTests.pick(deps.db, n.id, winner, now, restTiming(n, quiet_hours, now)))) return;
      log.info({ winner, metric }, 'A/B test winner picked');
    } else if (n.ab_stage !== 'rest') return;
    await deps.scheduler.schedule(notificationId, generation, 0, true);
  };
}
