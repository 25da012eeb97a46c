import type { AuditRepository } from '../db/repositories/audit.js';
import { CREDENTIAL_FIELD, credentialProven, normalizeApnsToken } from '../domain/device-credential.js';
import type { Actor } from '../domain/audit.js';
import type { Db } from '../db/database.js';
import type { AppsRepository } from '../db/repositories/apps.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { DeviceLiveActivities, LiveActivitiesRepository } from '../db/repositories/live-activities.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import type { LiveActivityChannel, Notification } from '../db/schema.js';
import { CredentialsError, parseApnsCredentials, type ApnsCredentials } from '../domain/credentials.js';
import type { SecretsKeyring } from '../domain/secrets.js';
import {
  ConflictError,
  DomainError,
  ErasedError,
  IdentityNotProvenError,
  NotFoundError,
  UnprocessableError,
  ValidationError,
} from '../domain/errors.js';
import {
  checkLiveActivity,
  liveActivityPayload,
  MAX_ACTIVITIES_PER_DEVICE,
  MAX_START_TYPES_PER_DEVICE,
  type LiveActivityRequest,
} from '../domain/live-activity.js';
import { expiryOf } from '../domain/delivery-options.js';
import { APNS_MAX_PAYLOAD_BYTES, jsonBytes, toLiveActivityRequest, type ApnsRequest, type PushOptions } from '../domain/push-mapping.js';
import type { Clock } from '../platform/clock.js';
import type { Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { Replay, type IdempotencyKeys, type IdempotentRequest } from './idempotency.js';
import type { NotificationService } from './notifications.js';
import type { Caller } from './devices.js';
import { identitiesKept, proofsIn, refuseUnprovenChanges, unprovenClaims } from '../domain/identity.js';

/** What the service needs of APNs' channel API (src/gateways/apns-channels.ts implements it). */
export interface ChannelApi {
  create(app: ChannelApp, development: boolean, messageStoragePolicy: number): Promise<string>;
  delete(app: ChannelApp, development: boolean, channelId: string): Promise<void>;
  /** the push's outcome as the gateways' outcome table sorts it (`ok`, else a kind with its reason) */
  broadcast(
    app: ChannelApp,
    development: boolean,
    channelId: string,
    payload: Record<string, unknown>,
    options: PushOptions,
  ): Promise<{ kind: 'ok' } | { kind: 'invalid_token' | 'retry' | 'failed'; reason: string }>;
}
export interface ChannelApp {
  credentials: ApnsCredentials;
  bundleId: string;
}

/** An answer of APNs' channel API that is not a success (ChannelApiError of the gateway). */
interface ChannelFailure {
  status: number;
  reason: string;
}
const isChannelFailure = (err: unknown): err is ChannelFailure =>
  err instanceof Error &&
  typeof (err as unknown as ChannelFailure).status === 'number' &&
  typeof (err as unknown as ChannelFailure).reason === 'string';

/** APNs refused or could not be reached: the caller sees Apple's reason, with 502 (not its request's fault) or 4xx. */
class ChannelApiProblem extends DomainError {
  constructor(f: ChannelFailure) {
    super(`channel: APNs answered ${f.status} ${f.reason}`, f.status === 404 ? 404 : f.status >= 500 || f.status === 403 ? 502 : 422);
  }
}

/** The create answer's state, as notifications answer it: accepted. */
const accepted = (n: Notification): Notification => ({ ...n, state: n.state === 'sending' ? 'scheduled' : n.state });

/**
 * iOS Live Activities: the tokens devices register (an activity's update token, an activity type's push-to-start
 * token), the pushes that start, update and end activities (notifications of their own kind, through the
 * notification pipeline), and broadcast channels (one push to APNs for every subscriber).
 */
export class LiveActivityService {
  constructor(
    private readonly deps: {
      db: Db;
      liveActivities: LiveActivitiesRepository;
      devices: DevicesRepository;
      notifications: NotificationsRepository;
      apps: AppsRepository;
      audit: AuditRepository;
      /** opens the app's APNs credentials, which its channels are managed with */
      secrets: SecretsKeyring;
      notificationService: NotificationService;
      idempotency: IdempotencyKeys;
      clock: Clock;
      channels: ChannelApi | null;
    },
  ) {}

  // ---- the registry ----

  /** Registers or replaces an activity's update token on an iOS device of the app. */
  async putToken(appId: string, deviceId: string, activityId: string, body: ActivityTokenBody, caller: Caller): Promise<void> {
    await this.onIosDevice(appId, deviceId, { caller, proofs: body }, async (trx) => {
      const t = { appId, deviceId, activityId, activityType: body.activity_type, token: normalizeApnsToken(body.token) };
      if (!(await this.deps.liveActivities.putToken(trx, t, MAX_ACTIVITIES_PER_DEVICE)))
        throw new UnprocessableError(`activity_id: the device holds ${MAX_ACTIVITIES_PER_DEVICE} activities already; end or delete one`);
    });
  }

  /** Registers or replaces the push-to-start token of an activity type on an iOS device of the app. */
  async putStartToken(appId: string, deviceId: string, activityType: string, body: StartTokenBody, caller: Caller): Promise<void> {
    await this.onIosDevice(appId, deviceId, { caller, proofs: body }, async (trx) => {
      const t = { appId, deviceId, activityType, token: normalizeApnsToken(body.token) };
      if (!(await this.deps.liveActivities.putStartToken(trx, t, MAX_START_TYPES_PER_DEVICE)))
        throw new UnprocessableError(`activity_type: the device holds ${MAX_START_TYPES_PER_DEVICE} push-to-start tokens already`);
    });
  }

  async deleteToken(appId: string, deviceId: string, activityId: string, proven: Proven): Promise<void> {
    await this.liveDevice(appId, deviceId, proven);
    if (!(await this.deps.liveActivities.deleteToken(this.deps.db, deviceId, activityId))) throw new NotFoundError('live activity');
  }

  async deleteStartToken(appId: string, deviceId: string, activityType: string, proven: Proven): Promise<void> {
    await this.liveDevice(appId, deviceId, proven);
    if (!(await this.deps.liveActivities.deleteStartToken(this.deps.db, deviceId, activityType))) throw new NotFoundError('start token');
  }

  /** The device's tokens, for its record (the device was read in the caller's app). */
  ofDevice(deviceId: string): Promise<DeviceLiveActivities> {
    return this.deps.liveActivities.ofDevice(this.deps.db, deviceId);
  }

  /** The device row-locked in the caller's app, live and iOS, for `write` in the same transaction. */
  private async onIosDevice(
    appId: string,
    deviceId: string,
    proven: Proven,
    write: (trx: Transaction<Database>) => Promise<void>,
  ): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      const device = await this.deps.devices.lock(trx, appId, deviceId, 'update');
      if (!device) throw new NotFoundError('device');
      if (device.erased_at) throw new ErasedError();
      refuseUnproven(device, proven);
      if (device.platform !== 'ios')
        throw new UnprocessableError(`device: Live Activities are iOS only; this device is ${device.platform}`);
      await write(trx);
    });
  }

  private async liveDevice(appId: string, deviceId: string, proven: Proven): Promise<void> {
    const device = await this.deps.devices.findForApp(this.deps.db, appId, deviceId);
    if (!device) throw new NotFoundError('device');
    if (device.erased_at) throw new ErasedError();
    refuseUnproven(device, proven);
  }

  // ---- pushes ----

  /**
   * Stores a Live Activity push as a notification of its kind and hands it to the pipeline, as a notification is
   * (a few devices cut at once, more fanned out, a send time waited for); a channel broadcast is sent at once, one
   * request for every subscriber.
   */
  async create(appId: string, r: LiveActivityRequest, idempotency?: IdempotentRequest<Notification>): Promise<Notification | Replay> {
    const now = this.deps.clock.now();
    const { ref, payload, fields, options } = this.checked(r, now);
    const service = this.deps.notificationService;
    const channel = ref.channel === null ? null : await this.channelOf(appId, ref.channel);
    const created = await this.deps.db.transaction().execute(async (trx) => {
      const replay = await this.deps.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      const liveActivity = { ref, request: r as Record<string, unknown> };
      const stored = channel
        ? {
            notification: await this.deps.notifications.insertOrCollapse(trx, {
              appId,
              audienceId: null,
              request: r as Record<string, unknown>,
              payload,
              collapseKey: null,
              options,
              // one request to APNs: a batch of nothing, its one push counted when it is answered
              cut: { batches: 0, targeted: 1 },
              liveActivity: ref,
            }),
            batchIds: [],
          }
        : await service.insertLiveActivity(trx, appId, fields, {
            audience: await service.resolveAudience(trx, appId, fields.to),
            now,
            options,
            liveActivity,
          });
      await this.deps.idempotency.store(trx, appId, idempotency, accepted(stored.notification));
      return stored;
    });
    if (created instanceof Replay) return created;
    if (channel) return this.broadcast(appId, created.notification, channel);
    await service.release(created);
    return accepted(created.notification);
  }

  /** The checks of a create, and what it stores: the APNs payload, its notification fields and delivery options. */
  private checked(r: LiveActivityRequest, now: Date) {
    const ref = checkLiveActivity(r);
    const payload = liveActivityPayload(r, now);
    const bytes = jsonBytes(payload);
    if (bytes > APNS_MAX_PAYLOAD_BYTES)
      throw new ValidationError(`live_activity: the APNs payload would be ${bytes} bytes, more than ${APNS_MAX_PAYLOAD_BYTES}`);
    const fields = {
      to: r.to ?? ('*' as const),
      payload,
      ...(r.send_at !== undefined && { send_at: r.send_at }),
      ...(r.expires_at !== undefined && { expires_at: r.expires_at }),
      ...(r.ttl !== undefined && { ttl: r.ttl }),
      ...(r.priority !== undefined && { priority: r.priority }),
    };
    const options = this.deps.notificationService.checkedOptions(fields, now, 'live_activity');
    return { ref, payload, fields, options };
  }

  /** The APNs request a push would be if created now, checked as a create is, neither stored nor sent. */
  preview(r: LiveActivityRequest): ApnsRequest {
    const now = this.deps.clock.now();
    const { payload, options } = this.checked(r, now);
    return toLiveActivityRequest(payload, { expiresAt: expiryOf(options, now), priority: options.priority });
  }

  async get(appId: string, id: string): Promise<Notification> {
    const n = await this.deps.notifications.findForApp(this.deps.db, appId, id);
    if (!n || !n.live_activity) throw new NotFoundError('live activity');
    return (await this.deps.notifications.withCounters(this.deps.db, [n]))[0]!;
  }

  /** Cancels one that is waiting or sending (batches in flight finish and are counted); a finished one: 409. */
  async cancel(appId: string, id: string): Promise<Notification> {
    await this.get(appId, id);
    const canceled = await this.deps.notifications.cancel(this.deps.db, appId, id);
    if (canceled) return canceled;
    throw new ConflictError(`live activity: it is ${(await this.get(appId, id)).state} and can no longer be canceled`);
  }

  /** Sends a stored broadcast and records its one outcome. */
  private async broadcast(appId: string, n: Notification, channel: { row: LiveActivityChannel; app: ChannelApp }): Promise<Notification> {
    const outcome = await this.api().broadcast(channel.app, channel.row.development, channel.row.channel_id, n.payload, {
      expiresAt: n.expires_at,
      priority: n.priority,
    });
    const failure = outcome.kind === 'ok' ? null : outcome.reason;
    return (await this.deps.notifications.finishBroadcast(this.deps.db, appId, n.id, failure)) ?? n;
  }

  // ---- channels ----

  async createChannel(
    appId: string,
    body: { message_storage_policy: number; development: boolean },
    actor: Actor,
  ): Promise<LiveActivityChannel> {
    const app = await this.channelApp(appId);
    const channelId = await this.callApns(() => this.api().create(app, body.development, body.message_storage_policy));
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await this.deps.liveActivities.insertChannel(trx, {
        appId,
        channelId,
        development: body.development,
        messageStoragePolicy: body.message_storage_policy,
      });
      await this.deps.audit.recordChange(trx, actor, appId, 'live_activity_channel.created', { channel_id: channelId });
      return row;
    });
  }

  listChannels(appId: string): Promise<LiveActivityChannel[]> {
    return this.deps.liveActivities.listChannels(this.deps.db, appId);
  }

  /** Deletes the channel at APNs, then forgets it (one APNs no longer knows is forgotten too). */
  async deleteChannel(appId: string, channelId: string, actor: Actor): Promise<void> {
    const { row, app } = await this.channelOf(appId, channelId);
    try {
      await this.api().delete(app, row.development, row.channel_id);
    } catch (err) {
      if (!(isChannelFailure(err) && err.status === 404)) throw isChannelFailure(err) ? new ChannelApiProblem(err) : err;
    }
    await this.deps.db.transaction().execute(async (trx) => {
      if (await this.deps.liveActivities.deleteChannel(trx, appId, channelId))
        await this.deps.audit.recordChange(trx, actor, appId, 'live_activity_channel.deleted', { channel_id: channelId });
    });
  }

  private async channelOf(appId: string, channelId: string): Promise<{ row: LiveActivityChannel; app: ChannelApp }> {
    const row = await this.deps.liveActivities.findChannel(this.deps.db, appId, channelId);
    if (!row) throw new NotFoundError('channel');
    return { row, app: await this.channelApp(appId) };
  }

  private async channelApp(appId: string): Promise<ChannelApp> {
    const app = await this.deps.apps.findById(this.deps.db, appId);
    if (!app?.apns_credentials) throw new UnprocessableError('channel: the app has no APNs credentials');
    try {
      const credentials = parseApnsCredentials(this.deps.secrets.openJson(app.apns_credentials, 'apns_credentials'));
      return { credentials, bundleId: credentials.topic ?? app.bundle_id };
    } catch (err) {
      if (err instanceof CredentialsError) throw new UnprocessableError(`channel: the app's APNs credentials are unusable: ${err.message}`);
      throw err;
    }
  }

  private async callApns<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw isChannelFailure(err) ? new ChannelApiProblem(err) : err;
    }
  }

  private api(): ChannelApi {
    if (!this.deps.channels) throw new UnprocessableError('channel: this process cannot reach APNs');
    return this.deps.channels;
  }
}

type ActivityTokenBody = { activity_type: string; token: string } & IdentityProofs;
type StartTokenBody = { token: string } & IdentityProofs;
type IdentityProofs = { user_id_auth_hash?: string; user_email_auth_hash?: string; credential?: string };
/** Who asks, and the proofs it sent: the device's credential or those of the device's user. */
type Proven = { caller: Caller; proofs: IdentityProofs };

/**
 * An sdk caller changes the Live Activities of a device whose client holds its credential only with it, and, while
 * the app verifies identities, those of a device bound to a user only with that user's proof or the credential, as
 * it changes the device's own token: else any phone holding the device's id could take a start meant for the user,
 * or silence their activities.
 */
function refuseUnproven(
  device: { user_id: string | null; user_email: string | null; credential_hash: Buffer | null; credential_held: boolean },
  { caller, proofs }: Proven,
): void {
  if (caller.role !== 'sdk') return;
  if (credentialProven(device.credential_hash, proofs.credential, CREDENTIAL_FIELD)) return;
  // a bound device's user proof stands for its credential, as for its token
  if (caller.identity && (device.user_id !== null || device.user_email !== null)) {
    refuseUnprovenChanges(unprovenClaims(identitiesKept(device, {}), proofsIn(proofs), caller.identity), undefined, '');
    return;
  }
  if (device.credential_held)
    throw new IdentityNotProvenError(`${CREDENTIAL_FIELD}: is required to change this device's Live Activities with the sdk key`);
}
