import { BEST_TIME, isTimeZone, planLocalTime } from './schedule.js';
import { quietWaves, type QuietHours } from './quiet-hours.js';

/** One pass of a local-time send: the zones whose wall time falls at `at`. */
export interface LocalWave {
  at: string;
  zones: string[];
}

/**
 * A local-time send, planned when it is created: the wall time, every zone it was planned over (a device in
 * another zone, or in none, follows `defaultZone`), the zones already past that wall time, and the waves.
 */
export interface LocalPlan {
  /** null: not a local-time send, planned per zone for its quiet hours */
  wallTime: string | null;
  defaultZone: string;
  zones: string[];
  past: string[];
  /** zones due inside their quiet hours, whose devices are not sent to (`then: drop`) */
  dropped?: string[];
  waves: LocalWave[];
}

/** When and how fast a notification goes out. */
export interface Timing {
  sendAt: Date | null;
  /** When its fan-out is due: send_at, or the first local-time wave; null to enqueue it now */
  nextDueAt: Date | null;
  localPlan: LocalPlan | null;
  throttlePerMinute: number | null;
  /** each device at its best hour: its fan-out runs now, cutting each device's batch for that hour (a wave each) */
  bestTime?: true;
}

export interface TimingRequest {
  send_at?: string;
  local_time?: boolean;
  throttle?: { per_minute: number };
}

/** The zones a plan covers: every zone the runtime knows, UTC, the default zone and those the app's devices use. */
function planZones(defaultZone: string, deviceZones: readonly string[]): string[] {
  return [...new Set([...Intl.supportedValuesOf('timeZone'), 'UTC', defaultZone, ...deviceZones.filter(isTimeZone)])].sort();
}

/**
 * The timing a request asks for. A local-time send is planned over every zone the runtime knows and those the
 * app's devices use (`deviceZones`); the request was validated before (send_at's shape, not in the past).
 */
export function timingOf(
  request: TimingRequest,
  now: Date,
  defaultZone: string | null,
  deviceZones: readonly string[] = [],
  quiet: QuietHours | null = null,
): Timing {
  const throttlePerMinute = request.throttle?.per_minute ?? null;
  // quiet hours hold a device's best hour in its fan-out, device by device (`bestTimeCut`)
  if (request.send_at === BEST_TIME) return { sendAt: null, nextDueAt: null, localPlan: null, throttlePerMinute, bestTime: true };
  if (quiet) return quietTiming(request, now, defaultZone ?? 'UTC', deviceZones, quiet);
  if (request.send_at === undefined) return { sendAt: null, nextDueAt: null, localPlan: null, throttlePerMinute };
  if (!request.local_time) {
    const sendAt = new Date(request.send_at);
    return { sendAt, nextDueAt: sendAt, localPlan: null, throttlePerMinute };
  }
  const zone = defaultZone ?? 'UTC';
  const zones = planZones(zone, deviceZones);
  const plan = planLocalTime(request.send_at, zones, now);
  const waves = plan.waves.map((w) => ({ at: w.at.toISOString(), zones: w.zones }));
  const first = plan.waves[0]?.at ?? null;
  return {
    sendAt: first,
    // with every zone past there is nothing to wait for: the fan-out runs now and counts them skipped
    nextDueAt: first ?? now,
    localPlan: { wallTime: request.send_at, defaultZone: zone, zones, past: plan.past, waves },
    throttlePerMinute,
  };
}

/**
 * The timing of a send with quiet hours: planned per zone as a local-time send is, each zone going when it is due
 * (now, send_at, or its local time) unless that falls in its quiet hours (then at their end, or never: `dropped`).
 * `sendAt` stays the time asked, so a ttl counts from when the push was due, not from when it was held to.
 */
function quietTiming(request: TimingRequest, now: Date, zone: string, deviceZones: readonly string[], quiet: QuietHours): Timing {
  const zones = planZones(zone, deviceZones);
  const local = request.local_time && request.send_at !== undefined ? planLocalTime(request.send_at, zones, now) : null;
  const at = request.send_at !== undefined && !local ? new Date(request.send_at) : now;
  const { waves, dropped } = quietWaves(local ? local.waves : [{ at, zones }], quiet);
  const first = waves[0]?.at ?? null;
  return {
    sendAt: local ? first : request.send_at !== undefined ? at : null,
    nextDueAt: first ?? now,
    localPlan: {
      wallTime: local ? request.send_at! : null,
      defaultZone: zone,
      zones,
      past: local?.past ?? [],
      dropped,
      waves: waves.map((w) => ({ at: w.at.toISOString(), zones: w.zones })),
    },
    throttlePerMinute: request.throttle?.per_minute ?? null,
  };
}

/** The zones of a wave as the fan-out selects them: the default zone's wave also takes the devices of no planned zone. */
export function waveSlice(plan: LocalPlan, zones: readonly string[]): { zones: string[]; orOutside?: string[] } {
  return zones.includes(plan.defaultZone) ? { zones: [...zones], orOutside: plan.zones } : { zones: [...zones] };
}

/**
 * When the last push of a notification should be out: for a paced one whose fan-out is done, the end of its
 * reserved schedule; one still waiting for local-time or best-time waves, the last wave (or later, by its pace).
 * Null when it has finished or nothing bounds it (unpaced sends go as fast as the gateways take them).
 */
export function estimatedFinish(n: {
  state: string;
  fanout_done: boolean;
  pace_next_at: Date | null;
  local_plan: LocalPlan | null;
  send_at: Date | null;
  best_time_last_at: Date | null;
}): Date | null {
  if (n.state !== 'scheduled' && n.state !== 'sending') return null;
  // a local-time send's last wave, or a best-time send's
  const lastWave = n.local_plan?.waves.at(-1)?.at ?? n.best_time_last_at;
  const candidates = [n.fanout_done ? n.pace_next_at : null, lastWave ? new Date(lastWave) : null, n.send_at].filter(
    (d): d is Date => d !== null,
  );
  return candidates.length ? new Date(Math.max(...candidates.map((d) => d.getTime()))) : null;
}
