import type { CampaignSettings } from '../db/repositories/apps.js';
import type { Deliverable } from '../db/repositories/deliverable-devices.js';
import type { Notification } from '../db/schema.js';
import { allowedOf, cutBatches, type CutPage, type NewBatch } from '../domain/batches.js';
import { BEST_TIME_HISTORY_MS, bestTimeSlots, zoneOf } from '../domain/best-time.js';
import type { NotificationRequest } from '../domain/notification-request.js';
import { quietHoursOf } from '../domain/quiet-hours.js';
import { BEST_TIME } from '../domain/schedule.js';
import type { FanoutDeps } from './fanout-deps.js';

/** Whether a notification goes to each device at its best hour (`send_at: "best_time"`). */
export function isBestTime(n: Pick<Notification, 'request'>): boolean {
  return (n.request as Partial<NotificationRequest['notification']>).send_at === BEST_TIME;
}

/**
 * A page of a best-time send cut into batches of the devices due at one instant each, held until it
 * (`not_before`): the waves are stored with the batches, computed once, so a restart recomputes nothing sent.
 */
export async function bestTimeCut(
  deps: Pick<FanoutDeps, 'db' | 'journeyDevices'>,
  n: Notification,
  devices: Deliverable[],
  cut: { seq: number; batchSize: number; now: Date; settings: CampaignSettings },
): Promise<CutPage> {
  const { sendable, notAllowed } = allowedOf(devices);
  const { now, settings } = cut;
  const zones = await deps.journeyDevices.timeZonesOf(
    deps.db,
    sendable.map((d) => d.id),
  );
  const located = sendable.map((d) => ({ id: d.id, zone: zoneOf(zones.get(d.id) ?? null, settings.default_time_zone) }));
  const activity = await deps.journeyDevices.activityHours(deps.db, located, new Date(now.getTime() - BEST_TIME_HISTORY_MS));
  const quiet = quietHoursOf((n.request as Partial<NotificationRequest['notification']>).quiet_hours, settings.quiet_hours);
  const byId = new Map(sendable.map((d) => [d.id, d]));
  const batches: NewBatch[] = [];
  for (const slot of bestTimeSlots(located, activity, now, quiet)) {
    const wave = cutBatches(
      n.id,
      n.generation,
      slot.ids.map((id) => byId.get(id)!),
      cut.seq + batches.length,
      cut.batchSize,
    );
    for (const b of wave) batches.push({ ...b, notBefore: slot.at, held: true });
  }
  return { batches, targeted: sendable.length, notAllowed, holdout: [] };
}

/**
 * The run of a best-time send once it is cut: the batches whose hour has come are enqueued (sending from the first),
 * and it waits for the next hour (the due poller releases it then, as a local-time send's next wave); with none left
 * it completes once they are sent. A canceled one is not released again, so its later waves never go out.
 */
export async function releaseBestTimeWaves(
  deps: Pick<FanoutDeps, 'db' | 'batches' | 'notifications' | 'fanout' | 'log'>,
  n: Notification,
  wave: { now: Date; appPerMinute: number | null },
  enqueue: (b: { id: string; not_before: Date | null }) => Promise<unknown>,
): Promise<void> {
  const { now, appPerMinute } = wave;
  // only batches never released: one released before and still sending or retrying has its job and its pace
  const held = await deps.batches.heldBatches(deps.db, n.id, n.generation);
  const due = held.filter((b) => !b.not_before || b.not_before <= now);
  const hours = held.flatMap((b) => (b.not_before ? [b.not_before.getTime()] : []));
  // the first release holds every wave: the span its record answers
  if (n.wave === 0 && hours.length)
    await deps.notifications.setBestTimeWaves(deps.db, n.id, n.generation, {
      first: new Date(Math.min(...hours)),
      last: new Date(Math.max(...hours)),
    });
  if (due.length) await deps.notifications.markSending(deps.db, n.id, n.generation);
  if (appPerMinute !== null && due.length) {
    // the app's ceiling holds across its notifications: a wave takes its turns from the hour it is due
    const starts = await deps.fanout.reserveSlots(
      deps.db,
      n.id,
      n.app_id,
      due.map((b) => b.size),
      { notification: null, app: appPerMinute },
      now,
    );
    due.forEach((b, i) => (b.not_before = starts[i]!));
  }
  // enqueued before they are marked released: a crash between the two releases them again (the same job ids)
  for (const b of due) await enqueue(b);
  await deps.batches.releaseHeld(
    deps.db,
    n.id,
    n.generation,
    due.map((b) => ({ seq: b.seq, at: b.not_before })),
  );
  const later = held.filter((b) => !due.includes(b));
  const next = later.reduce<Date | null>(
    (soonest, b) => (b.not_before && b.not_before > now && !(soonest && soonest <= b.not_before) ? b.not_before : soonest),
    null,
  );
  // the next release is a fan-out job of its own (its id names the wave)
  await deps.notifications.finishWave(deps.db, n.id, n.generation, n.wave + 1);
  if (next) await deps.notifications.awaitWave(deps.db, n.id, n.generation, next);
  else await deps.notifications.completeIfFinished(deps.db, [{ id: n.id, generation: n.generation }]);
  deps.log.info({ batches: due.length, next }, 'best-time wave released');
}
