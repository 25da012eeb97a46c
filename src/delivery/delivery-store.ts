import type { PushTarget } from '../gateways/types.js';
import type { AppPushCredentials } from '../gateways/pool.js';
import type { Sealed, SecretColumn, SecretsKeyring } from '../domain/secrets.js';
import type { Db } from '../db/database.js';
import type { AttemptInput, AttemptRecord, BatchesRepository, LargeBatch } from '../db/repositories/batches.js';
import type { NotificationsRepository } from '../db/repositories/notifications.js';
import { DIRECT_AUDIENCE_MAX_DEVICES } from '../domain/audience-spec.js';
import { GroupRunner } from '../platform/group-runner.js';
import { retryWhileUnavailable } from '../platform/unavailable.js';
import { localeVariant, localizedPayload, type Localized } from '../domain/localized.js';
import type { FrequencyCap } from '../domain/frequency-caps.js';
import type { FollowedCache } from '../db/app-changes.js';
import { TemplateRenderer } from './render.js';
import type { DeliveryRepositories } from './repositories.js';

/**
 * Statements of the delivery path at once per kind (a worker's concurrent jobs, or concurrent transactional sends):
 * one, so that what comes while it runs goes in the next, and a busy server runs fewer, larger statements.
 */
const GROUPS_IN_FLIGHT = 1;
const GROUP_MAX = 100;
/**
 * How long the results of pushes already sent wait for a database that cannot serve (a failover replaces a lost
 * primary within Patroni's ttl): a batch whose results were not recorded is sent again.
 */
const RECORD_WAITS_MS = 30_000;

export interface DeliveryStoreDeps {
  db: Db;
  repos: Pick<DeliveryRepositories, 'apps' | 'batches' | 'devices' | 'frequencyCaps' | 'notifications' | 'templateVariables' | 'webhooks'>;
  /** opens the apps' sealed push credentials (`SECRET_COLUMNS`) */
  secrets: SecretsKeyring;
  /**
   * the apps' push credentials as opened, kept while their changes are followed, so that each batch of an app gets
   * the same object until it changes (what the gateways key their connections and threads by; none: read each batch)
   */
  credentials?: FollowedCache<string, AppPushCredentials> | null;
  /** the apps' caps as kept while their changes are followed (none: read for every batch of a capped notification) */
  caps?: FollowedCache<string, FrequencyCap[] | null> | null;
  /** the apps with a webhook endpoint for batches' outcomes, kept the same way (none: read for every record) */
  eventApps?: FollowedCache<'batch', string[]> | null;
}

/**
 * The reads and writes of delivery attempts, each shared by the attempts that run at the same time: what a
 * worker's concurrent jobs load, record and close goes to PostgreSQL as one statement per kind, so a stream of
 * one-device notifications costs a few statements per group instead of three per push.
 */
export class DeliveryStore {
  private readonly loads: GroupRunner<string, AttemptInput | undefined>;
  private readonly firstLoads: GroupRunner<string, AttemptInput | LargeBatch | undefined>;
  private readonly records: GroupRunner<AttemptRecord, boolean>;
  private readonly completions: GroupRunner<{ id: string; generation: number; seq?: number }, boolean>;
  private readonly credentialReads: GroupRunner<string, AppPushCredentials | null>;

  readonly db: Db;
  readonly batches: BatchesRepository;
  readonly notifications: NotificationsRepository;
  private readonly repos: DeliveryStoreDeps['repos'];
  private readonly caps: FollowedCache<string, FrequencyCap[] | null> | null;
  private readonly eventApps: FollowedCache<'batch', string[]> | null;
  private readonly credentials: FollowedCache<string, AppPushCredentials> | null;
  private readonly secrets: SecretsKeyring;
  /** the templates of the notifications this process sends, parsed once each */
  readonly templates: TemplateRenderer;

  constructor(deps: DeliveryStoreDeps) {
    const { db, repos } = deps;
    const { batches, notifications } = repos;
    this.db = db;
    this.repos = repos;
    this.batches = batches;
    this.notifications = notifications;
    this.caps = deps.caps ?? null;
    this.eventApps = deps.eventApps ?? null;
    this.credentials = deps.credentials ?? null;
    this.secrets = deps.secrets;
    this.templates = new TemplateRenderer(db, repos.templateVariables);
    const limits = { maxInFlight: GROUPS_IN_FLIGHT, maxGroup: GROUP_MAX };
    this.loads = new GroupRunner(async (ids) => {
      const found = await batches.loadAttempts(db, ids);
      return ids.map((id) => ({ status: 'fulfilled', value: found.get(id) }));
    }, limits);
    this.firstLoads = new GroupRunner(async (ids) => {
      const found = await batches.loadAttempts(db, ids, DIRECT_AUDIENCE_MAX_DEVICES);
      return ids.map((id) => ({ status: 'fulfilled', value: found.get(id) }));
    }, limits);
    this.records = new GroupRunner(
      async (attempts) => {
        const closed = await batches.recordAttempts(db, attempts, await this.withEvents());
        return attempts.map((a) => ({ status: 'fulfilled', value: closed.has(a.batch.notification_id) }));
      },
      limits,
      // recorded alone, one attempt the database refuses fails only itself: an attempt not recorded is sent again
      async (a) => (await batches.recordAttempts(db, [a], await this.withEvents())).size > 0,
    );
    this.completions = new GroupRunner(async (list) => {
      const closed = new Set(await notifications.completeIfFinished(db, list));
      return list.map((n) => ({ status: 'fulfilled', value: closed.has(n.id) }));
    }, limits);
    this.credentialReads = new GroupRunner((ids) => this.readCredentials(ids), limits);
  }

  /**
   * The app's push credentials as stored, opened (null: an unknown app), read for every batch so a change applies to
   * the next one: from the kept ones while the app's changes are followed, else in one statement with the reads of
   * the batches that ask meanwhile (each still sees what was stored when it asked).
   */
  async credentialsOf(appId: string): Promise<AppPushCredentials | null> {
    const read = async () => (await this.credentialReads.submit(appId)) ?? undefined;
    return (this.credentials ? await this.credentials.get(appId, read) : await read()) ?? null;
  }

  private async readCredentials(ids: string[]): Promise<PromiseSettledResult<AppPushCredentials | null>[]> {
    const found = await this.repos.apps.pushCredentialsOf(this.db, [...new Set(ids)]);
    const open = (sealed: Sealed | null, column: SecretColumn) => sealed && this.secrets.openJson(sealed, column);
    return ids.map((id) => {
      const app = found.get(id);
      try {
        const value = app
          ? {
              id: app.id,
              bundleId: app.bundle_id,
              apnsCredentials: open(app.apns_credentials, 'apns_credentials'),
              fcmCredentials: open(app.fcm_credentials, 'fcm_credentials'),
              webPushCredentials: open(app.web_push_credentials, 'web_push_credentials'),
              hmsCredentials: open(app.hms_credentials, 'hms_credentials'),
            }
          : null;
        return { status: 'fulfilled', value };
      } catch (err) {
        // a value this process cannot open (sealed under a key it was not given): no send, never one with garbage
        return { status: 'rejected', reason: err };
      }
    });
  }

  /**
   * Web devices' targets with the subscription keys their endpoint has now; a device whose endpoint changed or
   * went since its token was read gets no keys (it is not sent to).
   */
  async withWebPushKeys(targets: PushTarget[]): Promise<PushTarget[]> {
    const found = await this.repos.devices.webPushKeysOf(
      this.db,
      targets.map((t) => t.deviceId),
    );
    return targets.map((t) => {
      const now = found.get(t.deviceId);
      return now && now.token === t.token ? { ...t, keys: { p256dh: now.p256dh, auth: now.auth } } : t;
    });
  }

  /**
   * The targets grouped by the content each receives, its language's (`localeVariant`) or the payload: one gateway
   * send per group, so a batch in many languages is cut at the moment it is sent and not before.
   */
  async byLanguage(
    targets: PushTarget[],
    payload: Record<string, unknown>,
    localized: Localized,
  ): Promise<{ payload: Record<string, unknown>; targets: PushTarget[] }[]> {
    const locales = await this.repos.devices.localesOf(
      this.db,
      targets.map((t) => t.deviceId),
    );
    const groups = new Map<string | null, PushTarget[]>();
    for (const t of targets) {
      const variant = localeVariant(localized, locales.get(t.deviceId));
      const list = groups.get(variant);
      if (list) list.push(t);
      else groups.set(variant, [t]);
    }
    return [...groups].map(([variant, list]) => ({
      payload: variant === null ? payload : localizedPayload(payload, localized[variant]),
      targets: list,
    }));
  }

  /** Whether any app has a webhook endpoint for batches' outcomes: without one, recording writes no event. */
  private async withEvents(): Promise<boolean> {
    const read = () => this.repos.webhooks.appsWithBatchEvents(this.db);
    const apps = this.eventApps ? await this.eventApps.get('batch', read) : await read();
    return (apps?.length ?? 0) > 0;
  }

  /** The app's frequency caps (null: none); from the cache, so a send of an app without caps reads nothing. */
  async capsOf(appId: string): Promise<FrequencyCap[] | null> {
    const read = (id: string) => this.repos.apps.frequencyCapsOf(this.db, id);
    return this.caps ? ((await this.caps.get(appId, read)) ?? null) : read(appId);
  }

  /** Takes a slot of the caps for each device that has one left; answers those devices. */
  takeCapSlots(caps: FrequencyCap[], deviceIds: string[], now: Date): Promise<Set<string>> {
    return this.repos.frequencyCaps.takeCapSlots(this.db, caps, deviceIds, now);
  }

  /** The batch, its notification and its still-pending devices; undefined for an unknown batch. */
  load(batchId: string): Promise<AttemptInput | undefined> {
    return this.loads.submit(batchId);
  }

  /**
   * `load`, but a batch of more devices than an audience cut at creation has comes back as its size only: a large
   * batch waits for its turn to send (`deliveryProcessor`) and is read then, so reading its devices before was
   * a second read of thousands of tokens.
   */
  loadUnlessLarge(batchId: string): Promise<AttemptInput | LargeBatch | undefined> {
    return this.firstLoads.submit(batchId);
  }

  /**
   * Records an attempt; whether that closed its notification (one of a single batch, now finished). Retried through
   * a failover: the statement records an attempt only while the batch is still at that attempt, so a repeat of one
   * that committed unanswered records nothing twice.
   */
  record(attempt: AttemptRecord): Promise<boolean> {
    return retryWhileUnavailable(() => this.records.submit(attempt), RECORD_WAITS_MS);
  }

  /**
   * Closes the notification if nothing of it is left to send; whether it did. `seq`: of the batch that just
   * finished, where the look for a pending one starts (`NotificationsRepository.completeIfFinished`).
   */
  completeIfFinished(id: string, generation: number, seq?: number): Promise<boolean> {
    return this.completions.submit({ id, generation, seq });
  }
}
