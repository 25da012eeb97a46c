import { templateDataOf } from '../domain/template-data.js';
import { writeThenRelease, type Db } from '../db/database.js';
import type { DeliverableDevicesRepository, DeliverableNow } from '../db/repositories/deliverable-devices.js';
import { FIRST_GENERATION, type CutNotification, type NotificationsRepository } from '../db/repositories/notifications.js';
import type { Notification } from '../db/schema.js';
import type { Platform } from '../domain/device-input.js';
import { resolveDeliveryOptions, type DeliveryOptions } from '../domain/delivery-options.js';
import { ValidationError } from '../domain/errors.js';
import {
  transactionalFilters,
  transactionalKey,
  type TransactionalInput,
  type TransactionalRequest,
} from '../domain/transactional-request.js';
import type { TemplatesRepository } from '../db/repositories/templates.js';
import { resolveTemplate } from './templates.js';
import { attemptBatch, type BatchAttemptDeps, type BatchToAttempt } from '../delivery/batch-attempt.js';
import { committedBatches } from '../delivery/direct-delivery.js';
import { allowedOf, cutBatches, type NewBatch } from '../domain/batches.js';
import { isVisiblePush } from '../domain/push-mapping.js';
import type { Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { backoffDelay, type RetryPolicy } from '../delivery/retry.js';
import { Replay, type IdempotencyKeys, type IdempotentRequest } from './idempotency.js';
import type { ServiceDeps } from './deps.js';
import { GroupRunner } from '../platform/group-runner.js';
import type { Admission } from '../platform/admission.js';
import { timeOrderedUuid } from '../platform/random-id.js';
import { CREATION_GROUPS } from './notifications.js';
import { CLI_ACTOR, type Actor } from '../domain/audit.js';

/** A device a transactional send did not reach, and why. */
export interface TransactionalFailure {
  deviceId: string;
  /** the gateway's own code ("BadTopic", "HTTP 413"), or pushd's reason in words ("no credentials for APNs") */
  reason: string;
}

/** Most devices one transactional send reaches: one device, or one user's. */
export const TRANSACTIONAL_MAX_DEVICES = 100;

export interface TransactionalResult {
  /** the notification's id */
  id: string;
  /** pushes the gateways accepted, tokens they reported uninstalled, devices not reached (expired ones included) */
  success: number;
  uninstalled: number;
  failures: TransactionalFailure[];
  /** devices not sent a visible push: their notifications are Disabled */
  notAllowed: number;
}

/**
 * Sends within the request. The notification and its batches are committed first, exactly as a small audience's
 * are, so a process that dies mid-send leaves them to the sweeper and the workers (at least once, as for every
 * notification). Then the batches are sent here, retried until `timeoutMs`; what is still unsent at the deadline
 * counts as failed (`deadline_exceeded`) and is reported, so the caller decides whether to send again. A push
 * that expires first is not retried past its expiry: it is recorded expired and reported among the failures.
 */
interface Creation {
  appId: string;
  request: TransactionalRequest;
  options: DeliveryOptions;
  now: Date;
  /** the id its notification takes; made by `store` when absent (a key names it before it is stored) */
  id?: string;
  /** who sends it, for its audit row */
  actor: Actor;
}

/**
 * A send as committed: its notification, the batches it was cut into, how many of its devices were not sent it
 * (notifications Disabled), and its devices' tokens as just read.
 */
interface Committed {
  notification: CutNotification;
  batches: NewBatch[];
  notAllowed: number;
  tokens: Map<string, string>;
}

/** The audience of a send: the devices it names; a visible push leaves out those whose notifications are Disabled. */
const sendTo = (appId: string, request: TransactionalRequest) => ({
  appId,
  filters: transactionalFilters(request),
  visible: isVisiblePush(request.notification.payload),
});

function withinLimit(devices: DeliverableNow[]): DeliverableNow[] {
  if (devices.length > TRANSACTIONAL_MAX_DEVICES)
    throw new ValidationError(`to: matches more than ${TRANSACTIONAL_MAX_DEVICES} devices; send to an audience instead`);
  return devices;
}

export type TransactionalServiceDeps = Pick<ServiceDeps, 'db' | 'repos' | 'idempotency'> & {
  /** what sending a batch takes: the gateways, the delivery store, metrics, the clock */
  sending: BatchAttemptDeps;
  settings: { batchSize: number; timeoutMs: number; retry: RetryPolicy };
  /** bounds how long a send waits for its group's turn (none: as long as it takes) */
  admission?: Admission;
};

export class TransactionalService {
  private readonly creations: GroupRunner<Creation, Committed>;

  private readonly db: Db;
  private readonly notifications: NotificationsRepository;
  private readonly devices: DeliverableDevicesRepository;
  private readonly templates: TemplatesRepository;
  private readonly idempotency: IdempotencyKeys;
  private readonly sending: BatchAttemptDeps;
  private readonly settings: { batchSize: number; timeoutMs: number; retry: RetryPolicy };

  constructor(deps: TransactionalServiceDeps) {
    this.db = deps.db;
    this.notifications = deps.repos.notifications;
    this.devices = deps.repos.deliverableDevices;
    this.templates = deps.repos.templates;
    this.idempotency = deps.idempotency;
    this.sending = deps.sending;
    this.settings = deps.settings;
    this.creations = new GroupRunner(
      (items, release) => this.createGroup(items, release),
      { ...CREATION_GROUPS, admission: deps.admission },
      (item) => this.createAlone(item),
    );
  }

  /**
   * With an Idempotency-Key the key is claimed in the transaction that commits the notification and names it; its
   * answer is stored once the send is over. A retry meanwhile (or after a process died mid-send) answers 409
   * naming the notification, which the workers finish; a retry after the answer replays it. With a collapse_key,
   * the app's earlier transactional notification with that key and recipient (`transactionalKey`) is replaced.
   * Its audit row, made by `actor`, is written with it.
   */
  async send(
    appId: string,
    input: TransactionalInput,
    idempotency?: IdempotentRequest<TransactionalResult>,
    actor: Actor = CLI_ACTOR,
  ): Promise<TransactionalResult | Replay> {
    // a retry replays its first answer, even when the template it named is gone since
    const early = input.notification.template_id ? await this.idempotency.answered(this.db, appId, idempotency) : null;
    if (early) return early;
    const request: TransactionalRequest = {
      ...input,
      notification: await resolveTemplate(this.db, this.templates, appId, input.notification),
    };
    const now = this.sending.clock.now();
    const deadline = Date.now() + this.settings.timeoutMs; // the caller waits in real time
    const options = resolveDeliveryOptions(request.notification, now);
    const key = transactionalKey(request);
    let committed: Committed | Replay;
    // one with a collapse_key may replace the notification of an earlier one: alone, in a transaction (not grouped)
    if (!idempotency && key === null) committed = await this.creations.submit({ appId, request, options, now, actor });
    else {
      committed = await this.db.transaction().execute(async (trx) => {
        const replay = await this.idempotency.claim(trx, appId, idempotency);
        if (replay) return replay;
        const id = timeOrderedUuid();
        const earlier = key === null ? undefined : await this.notifications.claimTransactional(trx, appId, key, id);
        const [devices] = await this.devices.deliverableOfEach(trx, [sendTo(appId, request)], {
          limit: TRANSACTIONAL_MAX_DEVICES + 1,
          now,
        });
        const send = { appId, request, options, now, id, actor, devices: withinLimit(devices!) };
        const stored = earlier ? await this.replace(trx, earlier, send) : (await this.store(trx, [send]))[0]!;
        if (idempotency) await this.idempotency.pending(trx, appId, idempotency, stored.notification.id);
        return stored;
      });
    }
    if (committed instanceof Replay) return committed;
    const { notification, batches, tokens, notAllowed } = committed;

    // the first attempt goes to the devices as read in the transaction that stored the send, a moment ago
    const outcomes = await Promise.all(committedBatches({ notification, batches, tokens }).map((b) => this.sendUntil(b, deadline)));
    // a send of one batch is closed by recording its last attempt; one of several when all are recorded
    if (!outcomes.some((o) => o.closed)) await this.sending.store.completeIfFinished(notification.id, notification.generation);
    const result = {
      id: notification.id,
      success: outcomes.reduce((sum, o) => sum + o.succeeded, 0),
      uninstalled: outcomes.reduce((sum, o) => sum + o.uninstalled, 0),
      failures: outcomes.flatMap((o) => o.failed),
      notAllowed,
    };
    await this.idempotency.store(this.db, appId, idempotency, result);
    return result;
  }

  /**
   * Commits the sends that arrive together: their devices in one query, then the notifications with their batches
   * in one statement (atomic on its own). A send that matches too many devices is refused alone; if the statement
   * fails, the runner commits each again on its own (`createAlone`), so one the database refuses fails alone.
   */
  private async createGroup(group: Creation[], release: () => void = () => undefined): Promise<PromiseSettledResult<Committed>[]> {
    const found = await this.devices.deliverableOfEach(
      this.db,
      group.map((i) => sendTo(i.appId, i.request)),
      { limit: TRANSACTIONAL_MAX_DEVICES + 1, now: group[0]!.now },
    );
    const settled: PromiseSettledResult<Creation & { devices: DeliverableNow[] }>[] = group.map((item, k) => {
      try {
        return { status: 'fulfilled', value: { ...item, devices: withinLimit(found[k]!) } };
      } catch (reason) {
        return { status: 'rejected', reason };
      }
    });
    const sends = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    // a group whose every send was refused writes nothing: no empty transaction
    const stored = sends.length ? await writeThenRelease(this.db, release, (trx) => this.store(trx, sends)) : [];
    return settled.map((r): PromiseSettledResult<Committed> =>
      r.status === 'fulfilled' ? { status: 'fulfilled', value: stored.shift()! } : r,
    );
  }

  private async createAlone(item: Creation): Promise<Committed> {
    const [outcome] = await this.createGroup([item]);
    if (outcome!.status === 'rejected') throw outcome!.reason;
    return outcome!.value;
  }

  /** Stores the sends' notifications with their batches (cut now: their devices are known), in one statement. */
  private async store(db: Db, sends: (Creation & { devices: DeliverableNow[] })[]): Promise<Committed[]> {
    if (!sends.length) return [];
    const cut = sends.map((s) => {
      const id = s.id ?? timeOrderedUuid();
      const { sendable, notAllowed } = allowedOf(s.devices);
      return { id, send: s, notAllowed, batches: cutBatches(id, FIRST_GENERATION, sendable, 0, this.settings.batchSize) };
    });
    const inserted = await this.notifications.insertCut(
      db,
      cut.map(({ id, send: s, batches, notAllowed }) => ({
        id,
        appId: s.appId,
        audienceId: null,
        request: s.request as unknown as Record<string, unknown>,
        payload: s.request.notification.payload,
        localized: s.request.notification.localized,
        templateData: templateDataOf(s.request.notification),
        collapseKey: null,
        transactionalKey: transactionalKey(s.request),
        group: s.request.group,
        options: s.options,
        cut: { batches: batches.length, targeted: s.devices.length - notAllowed, notAllowed },
        actor: s.actor,
      })),
      this.sending.store.batches.batchesInsert(
        cut.map(({ id, batches }) => ({ notificationId: id, generation: FIRST_GENERATION, batches })),
      ),
    );
    return inserted.map((notification, k) => ({
      notification,
      batches: cut[k]!.batches,
      notAllowed: cut[k]!.notAllowed,
      tokens: new Map(cut[k]!.send.devices.map((d) => [d.id, d.token])),
    }));
  }

  /**
   * Stores a send with a collapse_key as the next generation of the earlier notification with that key and
   * recipient (`claimTransactional`): the same id, the new payload, its own batches; what the older generation had
   * still pending is superseded.
   */
  private async replace(
    trx: Transaction<Database>,
    earlier: Pick<Notification, 'id' | 'generation'>,
    s: Creation & { devices: DeliverableNow[] },
  ): Promise<Committed> {
    const generation = earlier.generation + 1;
    const { sendable, notAllowed } = allowedOf(s.devices);
    const batches = cutBatches(earlier.id, generation, sendable, 0, this.settings.batchSize);
    const notification = await this.notifications.replaceCut(
      trx,
      earlier.id,
      {
        request: s.request as unknown as Record<string, unknown>,
        payload: s.request.notification.payload,
        localized: s.request.notification.localized,
        templateData: templateDataOf(s.request.notification),
        group: s.request.group,
        options: s.options,
        cut: { batches: batches.length, targeted: sendable.length, notAllowed },
        actor: s.actor,
      },
      this.sending.store.batches.batchesInsert([{ notificationId: earlier.id, generation, batches }]),
    );
    return { notification, batches, notAllowed, tokens: new Map(sendable.map((d) => [d.id, d.token])) };
  }

  /**
   * Attempts one batch until nothing is left to retry, the attempts run out or the deadline comes: first to the
   * devices as committed, then to what the batch has pending, read again (a token invalidated meanwhile is not sent).
   */
  private async sendUntil(first: BatchToAttempt, deadline: number) {
    const total = { succeeded: 0, uninstalled: 0, failed: [] as TransactionalFailure[], closed: false };
    const fail = (deviceIds: string[], reason: string) => total.failed.push(...deviceIds.map((deviceId) => ({ deviceId, reason })));
    const end = await attemptBatch(this.sending, first, {
      via: 'transactional',
      maxAttempts: this.settings.retry.attempts,
      recorded: (summary, { input, final, closed }) => {
        total.closed = closed;
        total.succeeded += summary.succeeded.length;
        total.uninstalled += summary.invalidated.length;
        for (const f of summary.failed) fail([f.deviceId], failureReason(f.reason, input.batch.platform));
        fail(summary.expired, 'expired before it could be sent');
        fail(summary.capped ?? [], 'at a frequency cap');
        if (final) fail(summary.retry, `retries exhausted (last answer: ${summary.lastError})`); // recorded as retries_exhausted
      },
      retry: async (left, { input: { batch }, summary }) => {
        const delay = backoffDelay(this.settings.retry, batch.attempts + 1, left);
        if (Date.now() + delay < deadline) {
          await new Promise((resolve) => setTimeout(resolve, delay));
          return true;
        }
        const outcome = { succeeded: [], failed: summary.retry.map((deviceId) => ({ deviceId, reason: 'deadline_exceeded' })) };
        total.closed = await this.sending.store.record({
          batch: { ...batch, attempts: batch.attempts + 1 },
          outcome: { ...outcome, invalidated: [], retry: [], expired: [], lastError: 'deadline_exceeded' },
          finalAttempt: true,
        });
        fail(summary.retry, `deadline exceeded (last answer: ${summary.lastError})`);
        return false;
      },
      completes: false, // once for all its batches (send)
    });
    // a later send with the same collapse_key replaced this one (the older payload is not sent after it), or a cancel
    if (end.kind === 'stopped')
      fail(
        end.pending.map((p) => p.deviceId),
        STOPPED[end.reason],
      );
    return total;
  }
}

const STOPPED = { superseded: 'superseded by a later send with the same collapse_key', canceled: 'canceled' } as const;

const GATEWAY_OF: Record<Platform, string> = { ios: 'APNs', android: 'FCM', web: 'Web Push', huawei: 'Huawei Push Kit' };

/** A failed push's reason as the answer gives it: the gateway's code as the outcome table has it, else in words. */
function failureReason(reason: string, platform: Platform): string {
  if (reason === 'no_credentials') return `no credentials for ${GATEWAY_OF[platform]}`;
  if (reason === 'device_unavailable') return 'invalidated or erased: the device has no push token now';
  return reason;
}
