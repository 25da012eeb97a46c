import type { Db } from '../db/database.js';
import { IDEMPOTENCY_KEY_TTL_HOURS } from '../domain/idempotency.js';
import { DAY_PARTITIONED, type DayPartition, type DayPartitionedTable } from '../db/repositories/partitions.js';
import { PLANNED_ON_STATISTICS, type PlannedTable } from '../db/repositories/table-statistics.js';
import type { DeliveryRepositories } from './repositories.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';

/**
 * Days of partitions kept ready after today: maintenance runs every sweep, so three days is a weekend without any
 * worker before a write falls back to the default partition (which still takes it).
 */
export const PARTITIONS_AHEAD_DAYS = 3;
const DAY_MS = 86_400_000;

/** The tables the maintenance keeps by day: those of DAY_PARTITIONED, and those keyed by a version 7 id. */
export type MaintainedTable = DayPartitionedTable | 'notifications' | 'messages';
/** How long each time-partitioned table keeps its rows, in days (`notifications`: with their batches and ranges). */
export type Retention = Record<MaintainedTable, number>;
/** Notifications past retention one maintenance deletes at most from the default partition (a bounded statement). */
const PURGE_NOTIFICATIONS = 10_000;
/**
 * Message partitions one maintenance creates at most: the default partition's rows may name many days (messages
 * shown for years, before their days come within the retention), more tables than one transaction may lock; the next
 * sweeps make the rest (a message meanwhile in the default one).
 */
const MESSAGE_DAYS_AT_ONCE = 31;

/** The repositories the maintenance works through. */
export type MaintenanceRepositories = Pick<
  DeliveryRepositories,
  'audiences' | 'journeyEntrants' | 'messagePartitions' | 'notificationPartitions' | 'partitions' | 'tableStatistics'
>;
/** What the maintenance needs: the primary, its repositories, where it reports. */
export interface MaintenanceDeps {
  db: Db;
  repos: MaintenanceRepositories;
  log: Logger;
  metrics?: Metrics;
}

/** Each table's retention setting. */
export function retentionOf(config: Config): Retention {
  return {
    device_pushes: config.RETENTION_RECEIPTS_DAYS,
    app_active_devices: config.RETENTION_ACTIVE_DEVICES_DAYS,
    app_sessions: config.RETENTION_SESSIONS_DAYS,
    push_opens: config.RETENTION_ACTIVITY_DAYS,
    notification_conversions: config.RETENTION_ACTIVITY_DAYS,
    // rows keyed on when their message's retention starts: dropped as the message expires
    device_messages: config.MESSAGE_RETENTION_DAYS,
    // a key answers again for its 24 hours, then is free: nothing reads it after
    idempotency_keys: Math.ceil(IDEMPOTENCY_KEY_TTL_HOURS / 24),
    journey_entrants: config.RETENTION_JOURNEY_ENTRANTS_DAYS,
    // an entrant's history goes with its day's entrants
    journey_entrant_history: config.RETENTION_JOURNEY_ENTRANTS_DAYS,
    notifications: config.RETENTION_NOTIFICATIONS_DAYS,
    audit_log: config.RETENTION_AUDIT_DAYS,
    webhook_events: config.RETENTION_WEBHOOK_EVENTS_DAYS,
    webhook_attempts: config.RETENTION_WEBHOOK_EVENTS_DAYS,
    // each message's retention is in its id (its expires_at's day): this says how far ahead a message made now goes
    messages: config.MESSAGE_RETENTION_DAYS,
  };
}

export interface MaintenanceResult {
  /** false: another process held the maintenance, this one did nothing */
  ran: boolean;
  created: string[];
  dropped: string[];
}

/**
 * Keeps each time-partitioned table's day partitions: today's and the next PARTITIONS_AHEAD_DAYS' created ahead
 * (and the day of any row that fell back to the default partition, moved into it), and those whose every row is
 * past retention dropped whole. One transaction per table, under a transaction-scoped advisory lock, so any number
 * of workers may run it at once: one does the work, the others skip it. DETACH PARTITION CONCURRENTLY cannot run
 * inside a transaction, so it could not be under that lock; a DROP TABLE locks the parent only for a moment.
 */
export async function maintainPartitions(
  deps: MaintenanceDeps,
  retention: Retention,
  now: Date,
): Promise<Record<MaintainedTable, MaintenanceResult>> {
  const results = {} as Record<MaintainedTable, MaintenanceResult>;
  for (const table of Object.keys(DAY_PARTITIONED) as DayPartitionedTable[]) {
    const cutoff = retentionCutoff(table, now, retention[table]);
    results[table] = await deps.db.transaction().execute(async (trx) => {
      const result: MaintenanceResult = { ran: false, created: [], dropped: [] };
      if (!(await deps.repos.partitions.claim(trx))) return result;
      result.ran = true;
      const existing = await deps.repos.partitions.list(trx, table);
      const plan = planDays(existing, await deps.repos.partitions.defaultDays(trx, table), utcDay(now), cutoff);
      for (const day of plan.create) {
        await deps.repos.partitions.create(trx, table, day);
        result.created.push(day);
      }
      for (const partition of plan.drop) {
        if (table === 'journey_entrants') await deps.repos.journeyEntrants.keepEntered(trx, partition.name, addDays(partition.day, 1));
        const bytes = await deps.repos.partitions.drop(trx, table, partition);
        deps.metrics?.partitionBytesDropped.inc({ table }, bytes);
        result.dropped.push(partition.day);
      }
      if (table === 'journey_entrants') await deps.repos.journeyEntrants.keepEntered(trx, `${table}_default`, utcDay(cutoff));
      await deps.repos.partitions.purgeDefault(trx, table, utcDay(cutoff));
      return result;
    });
    if (results[table].created.length || results[table].dropped.length)
      deps.log.info({ table, ...results[table] }, 'partitions maintained');
    if (deps.metrics) reportKept(deps.metrics, table, await deps.repos.partitions.list(deps.db, table));
  }
  results.notifications = await maintainNotifications(deps, retention.notifications, now);
  results.messages = await maintainMessages(deps, retention.messages, now);
  // an audience is left unnamed when its notifications' day goes, so its sweep (a scan of the notifications) runs then
  if (results.notifications.dropped.length) await sweepAudiences(deps, retention.notifications, now);
  return results;
}

/**
 * On a server whose autovacuum is off, analyzes the tables the queries plan on once they changed as much as autovacuum
 * would wait for, one worker at a time under the maintenance's lock: never analyzed, a devices table filled by
 * 20,000 registrations cost 4.4 ms of PostgreSQL a one-device notification instead of 0.43.
 */
export async function keepStatistics(deps: MaintenanceDeps): Promise<PlannedTable[]> {
  return deps.db.transaction().execute(async (trx) => {
    if (!(await deps.repos.partitions.claim(trx))) return [];
    const stale = await deps.repos.tableStatistics.staleWithoutAutovacuum(trx, PLANNED_ON_STATISTICS);
    for (const table of stale) await deps.repos.tableStatistics.analyze(trx, table);
    if (stale.length) deps.log.info({ tables: stale }, 'tables analyzed: autovacuum is off');
    return stale;
  });
}

/**
 * How long an audience stays retired before it may be deleted: longer than any transaction that found it by its spec
 * just before it was retired (and names it in what it inserts) takes to commit.
 */
export const AUDIENCE_RETIRED_GRACE_MS = 3_600_000;

/**
 * The on-the-fly audiences' retention: those retired a grace ago that nothing names still are deleted, then those
 * created more than `days` ago that no notification or message names are retired (AudiencesRepository). The app's
 * all-devices audience, and any a kept notification or message names, stay.
 */
export async function sweepAudiences(
  deps: { db: Db; repos: Pick<MaintenanceRepositories, 'audiences'>; log: Logger },
  days: number,
  now: Date,
): Promise<{ deleted: number; retired: number }> {
  const deleted = await deps.repos.audiences.deleteRetired(deps.db, new Date(now.getTime() - AUDIENCE_RETIRED_GRACE_MS));
  const retired = await deps.repos.audiences.retireUnused(deps.db, new Date(now.getTime() - days * DAY_MS), now);
  if (deleted || retired) deps.log.info({ deleted, retired }, 'audiences no notification names retired and deleted');
  return { deleted, retired };
}

/**
 * The messages' day partitions (MessagePartitionsRepository): a message's id is made from the instant its retention
 * ends, so the days are those of expiry. A message made now expires `days` ahead or later, so that day and the
 * PARTITIONS_AHEAD_DAYS after it are created (the days before it were made when they were that far ahead; a new
 * database makes 4 beside migration 040's first 4, not `days` + 4 that no message made now goes to but every stream
 * read visits), and the day of any row in the default partition up to there. Each is dropped as soon as it is over,
 * a row still in use (from before migration 040) kept in the default partition, that one made again without its rows
 * past retention once they are a day past.
 */
async function maintainMessages(deps: MaintenanceDeps, days: number, now: Date): Promise<MaintenanceResult> {
  const today = utcDay(now);
  const result = await deps.db.transaction().execute(async (trx) => {
    const result: MaintenanceResult = { ran: false, created: [], dropped: [] };
    if (!(await deps.repos.partitions.claim(trx))) return result;
    result.ran = true;
    const defaults = await deps.repos.messagePartitions.defaultDays(trx, today, addDays(today, days + PARTITIONS_AHEAD_DAYS));
    const plan = planDays(await deps.repos.messagePartitions.list(trx), defaults, addDays(today, days), now);
    for (const day of plan.create.slice(0, MESSAGE_DAYS_AT_ONCE)) {
      await deps.repos.messagePartitions.create(trx, day);
      result.created.push(day);
    }
    let bytes = 0;
    for (const partition of plan.drop) {
      bytes += await deps.repos.messagePartitions.drop(trx, partition.day, now);
      result.dropped.push(partition.day);
    }
    bytes += await deps.repos.messagePartitions.rebuildDefault(trx, now);
    if (bytes) deps.metrics?.partitionBytesDropped.inc({ table: 'messages' }, bytes);
    return result;
  });
  if (result.created.length || result.dropped.length) deps.log.info({ table: 'messages', ...result }, 'partitions maintained');
  if (deps.metrics) reportKept(deps.metrics, 'messages', await deps.repos.messagePartitions.list(deps.db));
  return result;
}

/**
 * The notifications' day partitions, with their batches' and fan-out ranges' (NotificationPartitionsRepository), as
 * maintainPartitions keeps the others: created ahead (and a day of the default partition's ids within retention),
 * dropped once the day's every id is past retention but for the notifications still in use, which stay in the
 * default partition until they are not; then the default partition's rows past retention deleted, a bounded number.
 */
async function maintainNotifications(deps: MaintenanceDeps, days: number, now: Date): Promise<MaintenanceResult> {
  const cutoff = new Date(now.getTime() - days * DAY_MS);
  const today = utcDay(now);
  const result = await deps.db.transaction().execute(async (trx) => {
    const result: MaintenanceResult = { ran: false, created: [], dropped: [] };
    if (!(await deps.repos.partitions.claim(trx))) return result;
    result.ran = true;
    const existing = await deps.repos.notificationPartitions.list(trx);
    const defaults = await deps.repos.notificationPartitions.defaultDays(trx, utcDay(cutoff), addDays(today, PARTITIONS_AHEAD_DAYS));
    const plan = planDays(existing, defaults, today, cutoff);
    for (const day of plan.create) {
      await deps.repos.notificationPartitions.create(trx, day);
      result.created.push(day);
    }
    for (const partition of plan.drop) {
      const bytes = await deps.repos.notificationPartitions.drop(trx, partition.day, cutoff);
      deps.metrics?.partitionBytesDropped.inc({ table: 'notifications' }, bytes);
      result.dropped.push(partition.day);
    }
    return result;
  });
  // apart: a delete of many rows need not hold the lock the drops took on the tables
  if (result.ran)
    await deps.db.transaction().execute((trx) => deps.repos.notificationPartitions.purgeDefault(trx, cutoff, PURGE_NOTIFICATIONS));
  if (result.ran) {
    const identities = await deps.repos.notificationPartitions.repairReplicaIdentities(deps.db);
    if (identities.repaired.length)
      deps.log.info({ partitions: identities.repaired }, 'replica identity given to partitions made without it');
    for (const f of identities.failed) deps.log.warn(f, 'replica identity not given to a partition; tried again at the next sweep');
  }
  if (result.created.length || result.dropped.length) deps.log.info({ table: 'notifications', ...result }, 'partitions maintained');
  if (deps.metrics) reportKept(deps.metrics, 'notifications', await deps.repos.notificationPartitions.list(deps.db));
  return result;
}

/**
 * What a maintenance does to one table's days: create `first` (the first day written to, today for most) and the
 * PARTITIONS_AHEAD_DAYS after it (and the days of the default partition's rows) unless past `cutoff` or there, and
 * drop the partitions whose every row is past it.
 */
function planDays(existing: DayPartition[], defaultDays: string[], first: string, cutoff: Date) {
  const have = new Set(existing.map((p) => p.day));
  const wanted = new Set([...Array.from({ length: PARTITIONS_AHEAD_DAYS + 1 }, (_, i) => addDays(first, i)), ...defaultDays]);
  return {
    create: [...wanted].sort().filter((day) => !have.has(day) && endOf(day) > cutoff.getTime()),
    drop: existing.filter((p) => endOf(p.day) <= cutoff.getTime()),
  };
}

/** The partitions a table keeps and its oldest day, in /metrics. */
function reportKept(metrics: Metrics, table: string, kept: DayPartition[]): void {
  metrics.partitions.set({ table }, kept.length);
  if (kept.length) metrics.partitionOldestKept.set({ table }, Date.parse(`${kept[0]!.day}T00:00:00Z`) / 1000);
}

/**
 * Rows before this instant are past retention. A table keyed by an instant keeps its rows `days` × 24 hours from
 * it; one keyed by a date, `days` whole days before today (a report may be dated up to 7 days back).
 */
function retentionCutoff(table: DayPartitionedTable, now: Date, days: number): Date {
  if (DAY_PARTITIONED[table].type === 'date') return new Date(Date.parse(`${addDays(utcDay(now), -days)}T00:00:00Z`));
  return new Date(now.getTime() - days * DAY_MS);
}

const utcDay = (at: Date) => at.toISOString().slice(0, 10);
const addDays = (day: string, n: number) => utcDay(new Date(Date.parse(`${day}T00:00:00Z`) + n * DAY_MS));
/** The instant a day partition's range ends (exclusive). */
const endOf = (day: string) => Date.parse(`${day}T00:00:00Z`) + DAY_MS;
