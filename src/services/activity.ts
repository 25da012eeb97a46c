import { onGenericPlans, type Db } from '../db/database.js';
import type { ActivityRepository, DayCount, OpenCounts, OpenRow, OpenTarget, SessionRow } from '../db/repositories/activity.js';
import type { ConversionCount, ConversionsRepository } from '../db/repositories/conversions.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { BatchesRepository } from '../db/repositories/batches.js';
import type { KeyRole, Notification } from '../db/schema.js';
import {
  reportedAt,
  sessionStart,
  statsWindow,
  totalWindow,
  type DailyMetric,
  type OpenReport,
  type SessionReport,
} from '../domain/activity.js';
import { ErasedError, NotFoundError, ValidationError } from '../domain/errors.js';
import type { AbTestsRepository, AbFigures, BucketAppOpens } from '../db/repositories/ab-tests.js';
import { abBounds, abTestOf, type AbTest } from '../domain/ab-test.js';
import type { ServiceDeps } from './deps.js';
import type { Clock } from '../platform/clock.js';
import { GroupRunner } from '../platform/group-runner.js';
import type { Admission } from '../platform/admission.js';

type WindowQuery = { from?: string | undefined; to?: string | undefined };

/**
 * Session and open reports that arrive together are written in one transaction: a phone reports each time its app
 * opens and closes, the taps on a broadcast's push come in a burst, and one transaction a report held a database
 * connection for its commit's flush each time.
 */
const REPORT_GROUPS = { maxInFlight: 1, maxGroup: 200 };

/** What became of a report in its group: written, or left to its request to write alone. */
type ReportWrite = 'written' | 'alone';

/** A push open as its group checks it: with the role of the key that reported it. */
interface OpenReportRow extends OpenRow {
  role: KeyRole;
}

/** A notification with what devices did after receiving it. */
export interface NotificationEngagement {
  notification: Notification;
  opens: OpenCounts;
  conversions: ConversionCount[];
  /** its rejected pushes by reason (`payload_too_large`, `template_error`, a gateway's, `invalid_token`) */
  failedByReason: Record<string, number>;
  /**
   * an A/B test's figures per bucket (its variants' test shares, its rest, its holdout) and the app opens of its
   * variants and holdout within `windowHours`; null for a notification of one payload
   */
  abTest: { test: AbTest; figures: AbFigures; appOpens: BucketAppOpens[]; windowHours: number } | null;
}

export type ActivityServiceDeps = Pick<ServiceDeps, 'db' | 'readDb' | 'repos' | 'clock'> & {
  /** the window after a push (or an A/B holdout's start) in which an event converts and a session counts */
  conversionWindowHours: number;
  /** bounds how long a session or open report waits for its group's turn */
  admission?: Admission | undefined;
};

/** App sessions and push opens the SDK reports, and the statistics counted from them. */
export class ActivityService {
  private readonly db: Db;
  /** the statistics: a replica while it keeps up (a notification by id reads the primary, to see its creation) */
  private readonly readDb: Db;
  private readonly activity: ActivityRepository;
  private readonly conversions: ConversionsRepository;
  private readonly devices: DevicesRepository;
  private readonly notifications: NotificationsRepository;
  private readonly abTests: AbTestsRepository;
  private readonly batches: BatchesRepository;
  private readonly conversionWindowHours: number;
  private readonly clock: Clock;
  private readonly sessions: GroupRunner<SessionRow, ReportWrite>;
  private readonly opens: GroupRunner<OpenReportRow, ReportWrite>;

  constructor(deps: ActivityServiceDeps) {
    this.db = deps.db;
    this.clock = deps.clock;
    this.readDb = deps.readDb;
    this.activity = deps.repos.activity;
    this.conversions = deps.repos.conversions;
    this.devices = deps.repos.devices;
    this.notifications = deps.repos.notifications;
    this.abTests = deps.repos.abTests;
    this.batches = deps.repos.batches;
    this.conversionWindowHours = deps.conversionWindowHours;
    this.sessions = new GroupRunner(
      (group) => this.writeSessions(group),
      { ...REPORT_GROUPS, admission: deps.admission },
      (row) => this.writeSession(row).then(() => 'written' as const),
    );
    this.opens = new GroupRunner(
      (group) => this.writeOpens(group),
      { ...REPORT_GROUPS, admission: deps.admission },
      (row) => this.writeOpen(row).then(() => 'written' as const),
    );
  }

  /** POST /devices/:id/sessions: a session starts, or (the same id with a duration) ends; a retry changes nothing. */
  async recordSession(appId: string, deviceId: string, report: SessionReport): Promise<void> {
    const startedAt = sessionStart(report, this.clock.now());
    // the path takes a uuid in either case; the group tells a device's reports apart by its id as stored
    const row = { appId, deviceId: deviceId.toLowerCase(), id: report.id, startedAt, durationSeconds: report.duration ?? null };
    if ((await this.sessions.submit(row)) === 'alone') await this.writeSession(row);
  }

  /** A group of session reports, as `writeGroup` writes them: the live devices' sessions in one statement. */
  private writeSessions(group: SessionRow[]): Promise<PromiseSettledResult<ReportWrite>[]> {
    return this.writeGroup(group, async (trx, live) => {
      await this.activity.recordSessions(trx, live);
      return new Map();
    });
  }

  /**
   * A group of reports: the devices no other transaction holds are locked (451 for an erased one) and the live ones'
   * reports written by `writeLive`, which answers those it refuses. The others are told to go alone, each by its own
   * request once the group has answered: a device not found (404) or held by other work (its report waits for it, the
   * rest of the group does not), and a device's second report in the group, which would not see its first in the
   * group's statement.
   */
  private async writeGroup<R extends { appId: string; deviceId: string }>(
    group: R[],
    writeLive: (trx: Db, live: R[]) => Promise<Map<R, Error | null>>,
  ): Promise<PromiseSettledResult<ReportWrite>[]> {
    const first = new Map<string, R>();
    for (const row of group) if (!first.has(row.deviceId)) first.set(row.deviceId, row);
    const firsts = [...first.values()];
    const { locked, refused } = await this.db.transaction().execute(async (trx) => {
      await onGenericPlans(trx);
      const locked = await this.devices.lockForReports(trx, firsts);
      const refused = await writeLive(
        trx,
        firsts.filter((row) => locked.get(row.deviceId) === false),
      );
      return { locked, refused };
    });
    return group.map((row): PromiseSettledResult<ReportWrite> => {
      const erased = first.get(row.deviceId) === row ? locked.get(row.deviceId) : undefined;
      if (erased === undefined) return { status: 'fulfilled', value: 'alone' };
      if (erased) return { status: 'rejected', reason: new ErasedError() };
      const refusal = refused.get(row);
      return refusal ? { status: 'rejected', reason: refusal } : { status: 'fulfilled', value: 'written' };
    });
  }

  /** One session report in a transaction of its own. */
  private async writeSession(row: SessionRow): Promise<void> {
    await this.onLiveDevice(row.appId, row.deviceId, (trx) => this.activity.recordSessions(trx, [row]));
  }

  /**
   * POST /devices/:id/opens. `_nid` must be a notification of this app (400 otherwise: a 404 would say the
   * device is unknown, and an SDK registers again on that), and the open cannot precede it. With the sdk key, which
   * anyone may hold, the device must have received it (delivery's receipt), or one could count opens of any
   * notification from devices of one's own; a write key (a backend relaying its app's reports) is believed.
   */
  async recordOpen(appId: string, deviceId: string, report: OpenReport, role: KeyRole): Promise<void> {
    // judged against the real time, not the Clock: the notification's created_at it must follow is PostgreSQL's now()
    const openedAt = reportedAt(report.opened_at, new Date(), 'open.opened_at');
    const kind = report.tapped ? 'direct' : 'indirect';
    const row = { appId, deviceId: deviceId.toLowerCase(), notificationId: report._nid, kind, openedAt, role } as const;
    if ((await this.opens.submit(row)) === 'alone') await this.writeOpen(row);
  }

  /**
   * A group of open reports, as `writeGroup` writes them: each live device's open checked (their notifications and
   * receipts read in one statement) and those that pass written in one; an open refused is refused alone.
   */
  private writeOpens(group: OpenReportRow[]): Promise<PromiseSettledResult<ReportWrite>[]> {
    return this.writeGroup(group, async (trx, live) => {
      const targets = await this.activity.openTargets(trx, live);
      const refused = new Map(live.map((row, i) => [row, openRefusal(row, targets[i])]));
      await this.activity.recordOpens(
        trx,
        live.filter((row) => refused.get(row) === null),
      );
      return refused;
    });
  }

  /** One open report in a transaction of its own. */
  private async writeOpen(row: OpenReportRow): Promise<void> {
    await this.onLiveDevice(row.appId, row.deviceId, async (trx) => {
      const [target] = await this.activity.openTargets(trx, [row]);
      const refusal = openRefusal(row, target);
      if (refusal) throw refusal;
      await this.activity.recordOpens(trx, [row]);
    });
  }

  /** One of the daily statistics over the query's window of UTC days. */
  daily(appId: string, metric: DailyMetric, query: WindowQuery): Promise<DayCount[]> {
    const { from, to } = statsWindow(query, this.clock.now());
    return this.activity.daily(this.readDb, appId, metric, from, to);
  }

  totalInstalls(appId: string, query: WindowQuery): Promise<number> {
    const { from, to } = totalWindow(query, this.clock.now());
    return this.activity.totalInstalls(this.readDb, appId, from, to);
  }

  /** GET /stats/notifications/:id/events: the notification, its opens and its event conversions. */
  async notificationEngagement(appId: string, id: string): Promise<NotificationEngagement> {
    const found = await this.notifications.findForApp(this.db, appId, id);
    if (!found) throw new NotFoundError('notification');
    const test = abTestOf(found.request);
    const windowHours = this.conversionWindowHours;
    const [[notification], opens, conversions, figures, appOpens, failedByReason] = await Promise.all([
      this.notifications.withCounters(this.readDb, [found]),
      this.activity.opensOf(this.readDb, found.id),
      this.conversions.countsFor(this.readDb, found.id),
      test ? this.abTests.figures(this.readDb, found.id, abBounds(test)) : null,
      test ? this.abTests.appOpens(this.readDb, found.id, windowHours) : null,
      this.batches.failedByReason(this.readDb, found.id),
    ]);
    const abTest = test && figures && appOpens && { test, figures, appOpens, windowHours };
    // the tokens invalidated are among the rejected pushes: by reason, they sum to them
    const invalidated = notification!.tokens_invalidated;
    const rejected = { ...failedByReason, ...(invalidated > 0 && { invalid_token: invalidated }) };
    return { notification: notification!, opens, conversions, failedByReason: rejected, abTest };
  }

  /** Runs `write` with the device locked (404 unknown, 451 erased): it moves the device's last open. */
  private async onLiveDevice(appId: string, deviceId: string, write: (trx: Db) => Promise<void>): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      // the day-partitioned tables are read by keys that name no day (every partition), or by the notification's id
      await onGenericPlans(trx);
      const device = await this.devices.lock(trx, appId, deviceId, 'update');
      if (!device) throw new NotFoundError('device');
      if (device.erased_at) throw new ErasedError();
      await write(trx);
    });
  }
}

/**
 * Why an open is refused (null: it is not), its notification as `openTargets` read it (undefined: not the app's):
 * opens count toward a notification's figures, so the sdk key, which anyone may hold, counts only pushes it received.
 */
function openRefusal(row: OpenReportRow, target: OpenTarget | undefined): ValidationError | null {
  if (!target) return new ValidationError('open._nid: is not a notification of this app');
  if (row.openedAt < target.createdAt) return new ValidationError('open.opened_at: is before the notification was created');
  if (row.role === 'sdk' && !target.received) return new ValidationError('open._nid: was not delivered to this device');
  return null;
}
