import { z } from 'zod';
import { REPORT_MAX_AGE_DAYS } from '../domain/activity.js';

/** How long what is kept lasts (the conversion window, each table's retention): a section of `envSchema` (config.ts), in its order. */
export const retentionSettings = {
  CONVERSION_WINDOW_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(720)
    .default(24)
    .describe(
      'An event a device sends within this many hours after receiving a push counts as a conversion of that push ' +
        '(`event_conversions` of its statistics); 1–720.',
    ),
  MESSAGE_RETENTION_DAYS: z.coerce
    .number()
    .int()
    .min(1)
    .max(3650)
    .default(90)
    .describe(
      'How long an in-app message is kept after it leaves the streams (1–3650 days): from its `unpublish_at`, or ' +
        'without one from when it is published (it leaves every stream then); it and its stream rows then go whole with ' +
        'their day partitions at the end of that day (see [data retention](deploying.md#data-retention)).',
    ),
  RETENTION_RECEIPTS_DAYS: z.coerce
    .number()
    .int()
    .min(1)
    .max(3650)
    .optional()
    .meta({
      description:
        'Days a push receipt is kept, after which an event is no longer attributed to its push (see [data ' +
        'retention](deploying.md#data-retention)). At least `CONVERSION_WINDOW_HOURS` in days, rounded up, plus the 7 ' +
        'days an event may be reported late, which is also the default; less stops start-up.',
      defaultText: 'window + 7 (`8`)',
    }),
  RETENTION_ACTIVE_DEVICES_DAYS: z.coerce
    .number()
    .int()
    .min(REPORT_MAX_AGE_DAYS + 1)
    .max(3650)
    .default(REPORT_MAX_AGE_DAYS + 1)
    .describe(
      'Whole days before today whose active devices (what makes `active_users` count a device once a day) are kept; ' +
        'at least 8, one more than a report may be dated back, since a device active on a day dropped while reports may ' +
        'still name it would count twice.',
    ),
  RETENTION_ACTIVITY_DAYS: z.coerce
    .number()
    .int()
    .min(REPORT_MAX_AGE_DAYS + 1)
    .max(3650)
    .default(90)
    .describe(
      "Days push opens and event conversions are kept, from when they happened (8–3650): what a notification's opens " +
        'and `event_conversions` count (see [data retention](deploying.md#data-retention)).',
    ),
  RETENTION_NOTIFICATIONS_DAYS: z.coerce
    .number()
    .int()
    .min(REPORT_MAX_AGE_DAYS + 1)
    .max(3650)
    .default(90)
    .describe(
      'Days a notification is kept with its delivery batches and fan-out ranges (8–3650), from the day it was made, ' +
        'or from its last send when it is sent again with its `collapse_key` or transactional key or has not finished: ' +
        'its record, statistics and opens are read through it (see [data retention](deploying.md#data-retention)).',
    ),
  RETENTION_JOURNEY_ENTRANTS_DAYS: z.coerce
    .number()
    .int()
    .min(1)
    .max(3650)
    .default(180)
    .describe(
      'Days a journey entrant is kept from when it entered (its day partition is then dropped, whether or not it left): ' +
        'beyond the 90 days one delay may last.',
    ),
  RETENTION_SESSIONS_DAYS: z.coerce
    .number()
    .int()
    .min(REPORT_MAX_AGE_DAYS + 1)
    .max(3650)
    .default(REPORT_MAX_AGE_DAYS + 1)
    .describe(
      'Days app sessions are kept, from their start (8–3650): only to count a session reported again once; the daily ' +
        'statistics are counted when it is stored.',
    ),
  RETENTION_WEBHOOK_EVENTS_DAYS: z.coerce
    .number()
    .int()
    .min(4)
    .max(90)
    .default(7)
    .describe(
      'Days the [webhook](api/webhooks.md) events and attempts are kept (4–90: at least the 3 days an event is retried), ' +
        'by when they were recorded: what `POST /v6/webhooks/:id/replay` can send again.',
    ),
  RETENTION_AUDIT_DAYS: z.coerce
    .number()
    .int()
    .min(1)
    .max(3650)
    .default(365)
    .describe('Days the audit log keeps its rows (1–3650), by when the change was made: `GET /v6/audit`, `pushd audit`.'),
};
