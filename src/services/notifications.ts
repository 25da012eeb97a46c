import type { AuditRepository } from '../db/repositories/audit.js';
import { templateDataOf } from '../domain/template-data.js';
import type { Db } from '../db/database.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { BatchesRepository } from '../db/repositories/batches.js';
import type { DeliverableDevicesRepository } from '../db/repositories/deliverable-devices.js';
import { FIRST_GENERATION, type CutNotification } from '../db/repositories/notifications.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { Notification } from '../db/schema.js';
import { audienceSpec, DIRECT_AUDIENCE_MAX_DEVICES } from '../domain/audience-spec.js';
import { resolveDeliveryOptions, type DeliveryOptions } from '../domain/delivery-options.js';
import type { Filter } from '../domain/filters.js';
import { NotFoundError } from '../domain/errors.js';
import { targetOf, type NotificationInput, type NotificationRequest } from '../domain/notification-request.js';
import { resolveTemplate } from './templates.js';
import { isVisiblePush } from '../domain/push-mapping.js';
import { allowedOf, cutBatches, cutOf } from '../domain/batches.js';
import type { BatchRef, NotificationScheduler } from '../delivery/jobs.js';
import type { DirectDelivery } from '../delivery/direct-delivery.js';
import type { AppsRepository, CampaignSettings } from '../db/repositories/apps.js';
import type { AppChanges, FollowedCache } from '../db/app-changes.js';
import { timingOf } from '../domain/campaign.js';
import type { NotificationState } from '../domain/notification-request.js';
import type { Clock } from '../platform/clock.js';
import { GroupRunner } from '../platform/group-runner.js';
import { timeOrderedUuid } from '../platform/random-id.js';
import type { Admission } from '../platform/admission.js';
import { ConflictError, ValidationError } from '../domain/errors.js';
import { sendAtProblem } from '../domain/schedule.js';
import { quietHoursOf } from '../domain/quiet-hours.js';
import { Replay, type IdempotencyKeys, type IdempotentRequest } from './idempotency.js';
import { storeNotification, type NotificationStoreDeps } from './notification-store.js';
import { previewPush, previewPushForUser, type PushPreviewed, type UserPreview } from './push-preview.js';
import {
  accepted,
  createdDetails,
  isAuditedCreation,
  isUnicast,
  type CreatedNotification,
  type InsertSpec,
  type NotificationFields,
  type ResolvedAudience,
  type UnicastItem,
} from './notification-shapes.js';

export type { CreatedNotification, JourneyTag, ResolvedAudience } from './notification-shapes.js';

export { PREVIEW_DEVICE_TOKEN, PREVIEW_NOTIFICATION_ID, type PushPreview } from './push-preview.js';
import type { Transaction } from 'kysely';
import type { AbTestsRepository } from '../db/repositories/ab-tests.js';
import type { TemplatesRepository } from '../db/repositories/templates.js';
import type { ServiceDeps } from './deps.js';
import { abTestOf, restTiming } from '../domain/ab-test.js';
import type { Database } from '../db/schema.js';
import { CLI_ACTOR, type Actor } from '../domain/audit.js';

/**
 * Small creations (unicast notifications, transactional sends) run as one group at a time: what comes while it
 * runs goes in the next, so a busy server commits fewer, larger groups. Each group costs statements whatever its
 * size: a second group in flight makes the groups smaller, which costs more than the wait it saves. A group gives
 * its turn up once its writes are sent (a unicast group's one statement; a transactional group's after
 * `writeThenRelease`): their commit's flush is waited for beside the next group's work.
 */
export const CREATION_GROUPS = { maxInFlight: 1, maxGroup: 200 };

/** A create's Idempotency-Key and how its answer is stored. */
type KeyedCreate = IdempotentRequest<CutNotification>;

export type NotificationServiceDeps = Pick<ServiceDeps, 'db' | 'readDb' | 'repos' | 'clock' | 'idempotency'> & {
  scheduler: NotificationScheduler;
  /** DELIVERY_BATCH_SIZE: the devices in one delivery batch */
  batchSize: number;
  /** told of an enqueue that failed after its commit (the sweeper re-enqueues it) */
  onScheduleError: (err: unknown, id: string) => void;
  /** sends the small audiences this process cut (none: the queue delivers them) */
  direct?: DirectDelivery | null;
  /** the changes this process follows, to keep the apps' settings it read (none: every notification reads them) */
  changes?: AppChanges | null;
  /** bounds how long a unicast creation waits for its group's turn (none: as long as it takes) */
  admission?: Admission;
};

export class NotificationService {
  private readonly unicast: GroupRunner<UnicastItem, CutNotification>;
  /** the apps' campaign settings read, by app id (none kept: every notification reads them) */
  private readonly settings: FollowedCache<string, CampaignSettings> | null;

  private readonly db: Db;
  private readonly readDb: Db;
  private readonly audiences: AudiencesRepository;
  private readonly notifications: NotificationsRepository;
  private readonly devices: DevicesRepository;
  private readonly deliverable: DeliverableDevicesRepository;
  private readonly batches: BatchesRepository;
  private readonly apps: AppsRepository;
  private readonly abTests: AbTestsRepository;
  private readonly templates: TemplatesRepository;
  private readonly audit: AuditRepository;
  private readonly scheduler: NotificationScheduler;
  private readonly clock: Clock;
  private readonly idempotency: IdempotencyKeys;
  private readonly batchSize: number;
  private readonly onScheduleError: (err: unknown, id: string) => void;
  private readonly direct: DirectDelivery | null;
  /** what `storeNotification` reads and writes through */
  private readonly storing: NotificationStoreDeps;

  constructor(deps: NotificationServiceDeps) {
    this.db = deps.db;
    this.readDb = deps.readDb;
    this.audiences = deps.repos.audiences;
    this.notifications = deps.repos.notifications;
    this.devices = deps.repos.devices;
    this.deliverable = deps.repos.deliverableDevices;
    this.batches = deps.repos.batches;
    this.apps = deps.repos.apps;
    this.abTests = deps.repos.abTests;
    this.templates = deps.repos.templates;
    this.audit = deps.repos.audit;
    this.scheduler = deps.scheduler;
    this.clock = deps.clock;
    this.idempotency = deps.idempotency;
    this.batchSize = deps.batchSize;
    this.onScheduleError = deps.onScheduleError;
    this.direct = deps.direct ?? null;
    this.settings = deps.changes?.cache() ?? null;
    this.storing = {
      repos: deps.repos,
      batchSize: deps.batchSize,
      campaignSettingsOf: (db, appIds) => this.campaignSettingsOf(db, appIds),
      resolveAudience: (trx, appId, to) => this.resolveAudience(trx, appId, to),
    };
    this.unicast = new GroupRunner(
      (items, giveTurn) => this.createUnicastGroup(items, giveTurn),
      { ...CREATION_GROUPS, admission: deps.admission },
      (item) => this.createUnicastAlone(item),
    );
  }

  /**
   * What shapes when the apps' notifications go out (`AppsRepository.campaignSettings`), by app id: those not kept
   * read in one statement. Read through the caller's handle: a transaction that waited for another connection of
   * the pool could wait for ever.
   */
  private campaignSettingsOf(db: Db, appIds: string[]): Promise<Map<string, CampaignSettings>> {
    const read = (ids: string[]) => this.apps.campaignSettingsOf(db, ids);
    return this.settings ? this.settings.getMany(appIds, read) : read(appIds);
  }

  async get(appId: string, id: string): Promise<Notification> {
    const n = await this.notifications.findForApp(this.db, appId, id);
    // a Live Activity push is read and canceled as one (src/services/live-activities.ts)
    if (!n || n.live_activity) throw new NotFoundError('notification');
    return (await this.notifications.withCounters(this.db, [n]))[0]!;
  }

  /** The app's notifications, newest first, of one state when given. */
  async list(appId: string, page: { per: number; page: number; state?: NotificationState }): Promise<Notification[]> {
    const found = await this.notifications.listForApp(this.readDb, appId, page.state, page.per, (page.page - 1) * page.per);
    return this.notifications.withCounters(this.readDb, found);
  }

  /** Cancels a waiting or sending notification: nothing more starts (batches in flight finish, counted); else 409. */
  async cancel(appId: string, id: string, actor: Actor = CLI_ACTOR): Promise<Notification> {
    await this.get(appId, id);
    const canceled = await this.db.transaction().execute(async (trx) => {
      const row = await this.notifications.cancel(trx, appId, id);
      if (row) await this.batches.closeHeldBatches(trx, id);
      if (row) await this.audit.recordChange(trx, actor, appId, 'notification.canceled', { notification_id: id });
      return row;
    });
    if (canceled) return (await this.notifications.withCounters(this.db, [canceled]))[0]!;
    const n = await this.get(appId, id);
    throw new ConflictError(`notification: it is ${n.state} and can no longer be canceled`);
  }

  /**
   * Picks an A/B test's winner by hand (`winner: "manual"`, or before its metric does): the rest is sent it. Only
   * while the test waits for it: 409 before its test share starts (naming when it is due), while it is still going out,
   * once picked, or when it finished.
   */
  async pickWinner(appId: string, id: string, variant: number, actor: Actor = CLI_ACTOR): Promise<Notification> {
    const n = await this.get(appId, id);
    const test = abTestOf(n.request);
    if (!test) throw new ConflictError('notification: it is not an A/B test (it has no variants)');
    if (variant >= test.variants.length) throw new ValidationError(`variant: must be 0 to ${test.variants.length - 1}`);
    const now = this.clock.now();
    const settings = (await this.campaignSettingsOf(this.db, [appId])).get(appId);
    const picked = await this.db.transaction().execute(async (trx) => {
      const row = await this.abTests.pick(trx, n.id, variant, now, restTiming(n, settings?.quiet_hours ?? null, now));
      if (row) await this.audit.recordChange(trx, actor, appId, 'notification.winner_picked', { notification_id: n.id, variant });
      return row;
    });
    if (!picked) {
      const why =
        n.state !== 'scheduled' && n.state !== 'sending'
          ? `it is ${n.state}`
          : n.ab_stage === 'rest'
            ? `its winner was picked (variant ${n.ab_winner})`
            : n.state === 'scheduled'
              ? notStarted(n.next_due_at ?? n.send_at)
              : 'its test share is still going out';
      throw new ConflictError(`notification: ${why}; no winner can be picked`);
    }
    await this.scheduler.schedule(picked.id, picked.generation, 0, true).catch((err) => this.onScheduleError(err, picked.id));
    return this.get(appId, id);
  }

  /**
   * Resolves the target to an audience and stores the notification in one transaction, then enqueues it (unless
   * it waits for its send time: the due poller releases it). With an Idempotency-Key the key is claimed first in
   * that transaction and the answer stored before it commits; a replay creates and enqueues nothing (the first
   * request enqueued, and the sweeper covers a lost enqueue).
   */
  async create(appId: string, input: NotificationInput): Promise<CutNotification>;
  async create(appId: string, input: NotificationInput, idempotency?: KeyedCreate, actor?: Actor): Promise<CutNotification | Replay>;
  async create(
    appId: string,
    input: NotificationInput,
    idempotency?: KeyedCreate,
    actor: Actor = CLI_ACTOR,
  ): Promise<CutNotification | Replay> {
    const early = input.notification.template_id && (await this.idempotency.answered(this.db, appId, idempotency));
    if (early) return early; // a retry's first answer, even when the template it named is gone since
    const request = await this.withTemplate(appId, input);
    const now = this.clock.now();
    const options = this.checkedOptions(request.notification, now);
    if (!idempotency && isUnicast(request)) return this.unicast.submit({ appId, request, now, options, actor });
    const created = await this.db.transaction().execute(async (trx) => {
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      const audience = await this.resolveAudience(trx, appId, request.notification.to);
      const stored = await storeNotification(this.storing, trx, appId, request.notification, { audience, now, options, actor });
      if (isAuditedCreation(request.notification.to))
        await this.audit.recordChange(trx, actor, appId, 'notification.created', createdDetails(stored.notification));
      await this.idempotency.store(trx, appId, idempotency, accepted(stored.notification));
      return stored;
    });
    if (created instanceof Replay) return created;
    await this.release(created);
    return accepted(created.notification);
  }

  /**
   * The checks of a create that need the clock (send time, expiry with local time) and its delivery options as of
   * `now`; `object` is the path of the notification's fields in the request, for the errors.
   */
  checkedOptions(notification: NotificationFields, now: Date, object = 'notification'): DeliveryOptions {
    const problem = sendAtProblem(notification, now, { object });
    if (problem) throw new ValidationError(problem);
    const options = resolveDeliveryOptions(notification, now, object);
    // one expiry for a send that goes out over 26 hours would cut off the later zones
    if (notification.local_time && (options.ttlSeconds !== null || options.expiresAt !== null))
      throw new ValidationError(`${object}.${options.ttlSeconds !== null ? 'ttl' : 'expires_at'}: cannot be combined with local_time`);
    return options;
  }

  /** The audience a target names: the app's all-devices audience, its stored on-the-fly spec (created once), or 404. */
  async resolveAudience(trx: Transaction<Database>, appId: string, to: NotificationFields['to']): Promise<ResolvedAudience> {
    const target = targetOf(to);
    if (target.kind === 'all') return this.audiences.upsertAllDevices(trx, appId);
    if (target.kind === 'filters') {
      const { key, canonical } = audienceSpec(target.filters);
      return this.audiences.upsertFilters(trx, appId, key, canonical);
    }
    const found = await this.audiences.claimForTarget(trx, appId, target.audienceId);
    if (!found) throw new NotFoundError('audience');
    return found;
  }

  /**
   * After the notifications' transaction committed, hands them to the pipeline: the delivery of those cut at creation
   * (sent from here when their tokens were read with them and there is room, else one enqueue for all), the fan-out
   * of the others that go out now; one that waits for its send time is left to the due poller. If an enqueue fails
   * the sweeper re-enqueues the notification.
   */
  async release(...created: CreatedNotification<CutNotification>[]): Promise<void> {
    const direct = this.direct;
    // a journey's large batch waits for the journeys' turns: its engine moves no faster than they send
    const journeys = direct ? created.filter(({ sendable: s }) => s?.journey && s.batches.length) : [];
    const sendable = created.flatMap(({ notification, sendable: s }) => (s?.batches.length && !s.journey ? [{ notification, ...s }] : []));
    const sentHere = sendable.length > 0 && direct !== null && direct.take(sendable);
    const batches: BatchRef[] = created.flatMap((c) =>
      (sentHere && c.sendable && !c.sendable.journey) || journeys.includes(c)
        ? []
        : (c.batchIds ?? []).map((batchId) => ({ notificationId: c.notification.id, batchId })),
    );
    const fanouts = created.filter(({ notification, batchIds }) => !batchIds && !notification.next_due_at);
    await Promise.all([
      ...journeys.map(({ notification, sendable: s }) =>
        direct!.sendJourneyBatches({ notification, batches: s!.batches, tokens: s!.tokens }),
      ),
      batches.length
        ? this.scheduler.deliver(batches).catch((err) => batches.forEach((b) => this.onScheduleError(err, b.notificationId)))
        : null,
      ...fanouts.map(({ notification: n }) => this.scheduler.schedule(n.id, n.generation).catch((err) => this.onScheduleError(err, n.id))),
    ]);
  }

  private async createUnicastAlone(i: UnicastItem): Promise<CutNotification> {
    const created = await this.db.transaction().execute(async (trx) => {
      const audience = await this.resolveAudience(trx, i.appId, i.request.notification.to);
      return storeNotification(this.storing, trx, i.appId, i.request.notification, {
        audience,
        now: i.now,
        options: i.options,
        actor: i.actor,
      });
    });
    await this.release(created);
    return accepted(created.notification);
  }

  /**
   * Creates a group of unicast notifications (see `isUnicast`) with two statements, however many there are, and
   * enqueues them with one call: the shape most traffic has, created at the cost of a few. One statement reads
   * the devices (the apps' settings are kept, or read at once with it); then one inserts the notifications with
   * their batches and the audiences they name, atomically (the rows `store` writes). If the group fails, the runner
   * creates each one again on its own (`createUnicastAlone`), so a request the database refuses fails alone.
   */
  private async createUnicastGroup(items: UnicastItem[], giveTurn: () => void): Promise<PromiseSettledResult<CutNotification>[]> {
    const now = this.clock.now();
    const specs = items.map((i) => ({ appId: i.appId, ...audienceSpec(i.request.notification.to as Filter[]) }));
    // the devices of a spec are those of its stored audience: the same canonical filters
    const [settings, found] = await Promise.all([
      this.campaignSettingsOf(this.db, [...new Set(items.map((i) => i.appId))]),
      this.deliverable.deliverableOfEach(
        this.db,
        specs.map((s, k) => ({ appId: s.appId, filters: s.canonical, visible: isVisiblePush(items[k]!.request.notification.payload) })),
        { limit: DIRECT_AUDIENCE_MAX_DEVICES + 1, now },
      ),
    ]);
    // an app with a ceiling paces every notification, and one with quiet hours plans it per zone: those go through
    // the fan-out (its reservations, its waves)
    const quietOf = (k: number) =>
      quietHoursOf(items[k]!.request.notification.quiet_hours, settings.get(items[k]!.appId)?.quiet_hours ?? null);
    // a plan per zone needs the zones the app's devices name: a zone missing from Intl's list (a link such as
    // Asia/Kolkata) would otherwise fall to the default zone's wave
    const quietApps = [...new Set(items.filter((_, k) => quietOf(k)).map((i) => i.appId))];
    const zonesOf = new Map(await Promise.all(quietApps.map(async (a) => [a, await this.devices.timeZonesOf(this.db, a)] as const)));
    const devicesOf = (k: number) =>
      settings.get(items[k]!.appId)?.max_per_minute == null && !quietOf(k) && found[k]!.length <= DIRECT_AUDIENCE_MAX_DEVICES
        ? found[k]
        : undefined;
    const rows = items.map((i, k) => {
      const id = timeOrderedUuid();
      const devices = devicesOf(k);
      return {
        notification: {
          id,
          appId: i.appId,
          audienceId: null,
          audienceSpecKey: specs[k]!.key,
          request: i.request.notification,
          payload: i.request.notification.payload,
          localized: i.request.notification.localized,
          templateData: templateDataOf(i.request.notification),
          collapseKey: null,
          timing: timingOf(
            i.request.notification,
            i.now,
            settings.get(i.appId)?.default_time_zone ?? null,
            zonesOf.get(i.appId) ?? [],
            quietOf(k),
          ),
          options: i.options,
          cut: cutOf(devices, this.batchSize),
          actor: i.actor,
        },
        batches: devices ? cutBatches(id, FIRST_GENERATION, allowedOf(devices).sendable, 0, this.batchSize) : [],
      };
    });
    // one statement, atomic on its own, so no BEGIN and COMMIT round trips; the turn is given up as soon as it is
    // issued: its run and its commit's flush are waited for beside the next group's read
    const insert = this.notifications.insertCut(
      this.db,
      rows.map((r) => r.notification),
      this.batches.batchesInsert(
        rows.map((r) => ({ notificationId: r.notification.id, generation: FIRST_GENERATION, batches: r.batches })),
      ),
      this.audiences.specAudiences(specs),
    );
    giveTurn();
    const created = (await insert).map((notification, k): CreatedNotification<CutNotification> => {
      if (!rows[k]!.notification.cut) return { notification, batchIds: null };
      const { batches } = rows[k]!;
      const tokens = new Map(found[k]!.map((d) => [d.id, d.token]));
      return { notification, batchIds: batches.map((b) => b.id), sendable: { batches, tokens } };
    });
    await this.release(...created);
    return created.map((c) => ({ status: 'fulfilled', value: accepted(c.notification) }));
  }

  /** A message's push, stored in the message's transaction (its caller runs `release` once that committed). */
  insertForMessage(
    trx: Transaction<Database>,
    appId: string,
    fields: NotificationFields,
    at: Required<Pick<InsertSpec, 'audience' | 'now' | 'options' | 'messageId'>> & Pick<InsertSpec, 'journey'>,
  ): Promise<CreatedNotification> {
    return storeNotification(this.storing, trx, appId, fields, at);
  }

  /**
   * A journey step's send to the entrants its filters name (no audience): cut here whatever their number, with
   * what its templates render with.
   */
  insertForJourney(
    trx: Transaction<Database>,
    appId: string,
    fields: NotificationFields,
    at: Required<Pick<InsertSpec, 'now' | 'options' | 'journey'>> & Pick<InsertSpec, 'templateData'>,
  ): Promise<CreatedNotification> {
    return storeNotification(this.storing, trx, appId, fields, at);
  }

  /** A Live Activity push, stored with the request it came as. */
  insertLiveActivity(
    trx: Transaction<Database>,
    appId: string,
    fields: NotificationFields,
    at: Required<Pick<InsertSpec, 'audience' | 'now' | 'options' | 'liveActivity'>>,
  ): Promise<CreatedNotification> {
    return storeNotification(this.storing, trx, appId, fields, at);
  }

  /** What `create` would send, without storing or sending anything (`previewPush`). */
  async preview(appId: string, input: NotificationInput, at: { locale?: string; deviceId?: string } = {}): Promise<PushPreviewed> {
    return previewPush(this.previewDeps(), appId, await this.withTemplate(appId, input), at);
  }

  /** `preview` for each of a user's devices (`previewPushForUser`). */
  async previewForUser(appId: string, input: NotificationInput, userId: string, locale?: string): Promise<UserPreview[]> {
    return previewPushForUser(this.previewDeps(), appId, await this.withTemplate(appId, input), { userId, locale });
  }

  private previewDeps() {
    return { db: this.db, devices: this.devices, audiences: this.audiences, clock: this.clock };
  }

  /** The request with the content of the stored template it names, if it names one. */
  private async withTemplate(appId: string, input: NotificationInput): Promise<NotificationRequest> {
    return { notification: await resolveTemplate(this.db, this.templates, appId, input.notification) };
  }
}

/** Why a scheduled A/B test takes no winner yet: its test share has not gone out, and when it will. */
function notStarted(due: Date | null): string {
  return due ? `its test share has not started (it is due at ${due.toISOString()})` : 'its test share has not started';
}
