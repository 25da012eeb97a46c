import { z } from 'zod';
import { parseJourneyDuration } from '../domain/journey.js';

/** The settings of delivery, its queue, retries, journeys' pace and shutdown: a section of `envSchema` (config.ts), in its order. */
export const deliverySettings = {
  DELIVERY_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .max(256)
    .default(8)
    .describe(
      "Batches of more than 100 devices one worker process sends at once (1–256), and as many more of its journeys' " +
        '(turns of their own); it runs 8 times as many jobs at once, the rest for small batches (one-device ' +
        'notifications, whose statements are grouped across the jobs running at once). A batch interrupted by a crash ' +
        'is sent again whole, so this bounds what a crash re-sends.',
    ),
  DELIVERY_BATCH_SIZE: z.coerce.number().int().min(1).max(10000).default(2000).describe('Devices per delivery batch, at most (1–10000).'),
  FANOUT_PAGE_SIZE: z.coerce
    .number()
    .int()
    .min(1)
    .max(50000)
    .default(10000)
    .describe('Devices the fan-out reads per page and checkpoint (1–50000).'),
  FANOUT_RANGE_DEVICES: z.coerce
    .number()
    .int()
    .min(1)
    .max(10_000_000)
    .default(100_000)
    .describe(
      'A broadcast estimated larger than this is fanned out in ranges of about this many devices (at most 1,000 ' +
        'ranges), which any worker takes at once; a smaller one stays one fan-out job ' +
        '([delivery](concepts.md#delivery)).',
    ),
  GATEWAY_MAX_IN_FLIGHT: z.coerce
    .number()
    .int()
    .min(1)
    .max(20000)
    .default(2000)
    .describe(
      'Ceiling of the window of requests in flight per gateway, across its connections (APNs: per app and ' +
        'environment; FCM: per app); the window itself follows the round trip, and each connection stays within what ' +
        'its gateway announces.',
    ),
  GATEWAY_MAX_CONNECTIONS: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .default(4)
    .describe('HTTP/2 connections per gateway, at most; another opens only when the open ones are full.'),
  GATEWAY_THREADS: z.coerce
    .number()
    .int()
    .min(0)
    .max(16)
    .default(0)
    .describe("Worker threads that run the gateways; 0 runs them on the worker's main thread (see " + '[performance](performance.md)).'),
  JOURNEY_MIN_CYCLE: z
    .string()
    .default('1h')
    .transform((v, ctx) => {
      const ms = parseJourneyDuration(v);
      if (ms === null) ctx.addIssue({ code: 'custom', message: 'must be a duration such as 30m, 1h or 1d' });
      return ms ?? z.NEVER;
    })
    .describe(
      'The least time round a cycle of a journey that sends (a send or message step on it): a journey whose entrant could ' +
        'come back to such a step sooner, counting its delays and the timeouts it leaves a wait_for by, is refused (400 ' +
        'naming the step). A cycle through the event of a wait_for waits for the user, so it is allowed ([journeys](api/journeys.md)).',
    ),
  JOURNEY_POLL_MS: z.coerce
    .number()
    .int()
    .min(10)
    .max(60_000)
    .default(1000)
    .describe(
      'How often workers apply events to journeys and run entrants whose step has come due; one due sooner is run at its ' +
        'moment (see [journeys](api/journeys.md)).',
    ),
  JOURNEY_BATCH_SIZE: z.coerce
    .number()
    .int()
    .min(1)
    .max(100_000)
    .default(1000)
    .describe('Due journey entrants one transaction moves, and sends one notification to per step.'),
  DELIVERY_MAX_ATTEMPTS: z.coerce
    .number()
    .int()
    .min(1)
    .max(50)
    .default(8)
    .describe('Attempts of a delivery batch before it is given up (1–50).'),
  RETRY_BASE_MS: z.coerce
    .number()
    .int()
    .min(1)
    .default(1000)
    .describe("First retry delay; retries back off exponentially with jitter, never sooner than a gateway's Retry-After."),
  RETRY_MAX_MS: z.coerce.number().int().min(1).default(300_000).describe('Longest retry delay.'),
  JOB_LOCK_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(30_000)
    .describe("How long a job stays locked to a worker without renewal; a killed worker's job is taken over after this."),
  SWEEP_AFTER_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .default(30)
    .describe(
      'A notification that made no progress for this long is enqueued again (covers a lost enqueue or lost queue); it ' +
        'resumes from its checkpoint, sending nothing twice. A transactional send, and a small audience its API process ' +
        'sends itself, are left to that process until `TRANSACTIONAL_TIMEOUT_MS` + 20 s after they were created. One ' +
        'worker of the deployment looks for such notifications, the one holding a lease in PostgreSQL (10 s, renewed ' +
        "every 3 s; another takes it over within about 13 s of its holder's death); metric `pushd_sweeper_scans_total`.",
    ),
  SCHEDULE_POLL_MS: z.coerce
    .number()
    .int()
    .min(10)
    .max(60_000)
    .default(1000)
    .describe('How often workers look for scheduled notifications (and local-time waves) that have come due.'),
  TRANSACTIONAL_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(60_000)
    .default(5000)
    .describe(
      'How long `POST /v6/transactional/notifications` retries before it answers; what is left is counted failed ' +
        '(`deadline_exceeded`). An attempt under way at the deadline is waited for (a gateway request times out after ' +
        '10 s).',
    ),
  SHUTDOWN_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(25000)
    .describe(
      'On SIGTERM/SIGINT/SIGHUP: how long in-flight requests and batches may take before the process exits anyway ' +
        '(exit 1, after stopping its embedded PostgreSQL).',
    ),
};
