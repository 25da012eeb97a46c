import type { AuditRepository } from '../db/repositories/audit.js';
import type { WebhooksRepository } from '../db/repositories/webhooks.js';
import type { WebhookAttempt, WebhookEndpoint } from '../db/schema.js';
import type { Actor } from '../domain/audit.js';
import { NotFoundError, ValidationError } from '../domain/errors.js';
import type { SecretsKeyring } from '../domain/secrets.js';
import { newWebhookSecret, PING, webhookTargetProblem, type WebhookChange, type WebhookCreate } from '../domain/webhooks.js';
import type { WebhookAnswer, WebhookPoster } from '../delivery/webhooks.js';
import type { ServiceDeps } from './deps.js';

/** How long a replaced signing secret still signs. */
export const PREVIOUS_SECRET_MS = 86_400_000;
/** Attempts GET /v6/webhooks/:id/attempts shows at most. */
export const ATTEMPTS_SHOWN = 100;

export type WebhookServiceDeps = Pick<ServiceDeps, 'db' | 'readDb' | 'repos' | 'clock'> & {
  keyring: SecretsKeyring;
  /** sends the test ping (none: this process cannot send one) */
  poster: Pick<WebhookPoster, 'post'> | null;
  /** WEBHOOK_ALLOWED_ORIGINS */
  allowedOrigins: readonly string[];
  /** RETENTION_WEBHOOK_EVENTS_DAYS: how far back a replay reaches */
  retentionDays: number;
};

/** An endpoint with its plain secret: what a create or a rotation answers, once. */
export type EndpointWithSecret = WebhookEndpoint & { plain_secret: string };

/**
 * An app's webhook endpoints: `/v6/webhooks` and `pushd webhook`. Each change is audited in its transaction. Ids come
 * checked as UUIDs by the routes' params (`pathId`, src/http/schemas.ts) and the command's options (`uuid`).
 */
export class WebhookService {
  private readonly webhooks: WebhooksRepository;
  private readonly audit: AuditRepository;
  private readonly db: WebhookServiceDeps['db'];
  private readonly readDb: WebhookServiceDeps['readDb'];
  private readonly clock: WebhookServiceDeps['clock'];
  private readonly keyring: SecretsKeyring;
  private readonly poster: WebhookServiceDeps['poster'];
  private readonly allowedOrigins: readonly string[];
  private readonly retentionDays: number;

  constructor(deps: WebhookServiceDeps) {
    this.webhooks = deps.repos.webhooks;
    this.audit = deps.repos.audit;
    ({
      db: this.db,
      readDb: this.readDb,
      clock: this.clock,
      keyring: this.keyring,
      poster: this.poster,
      allowedOrigins: this.allowedOrigins,
      retentionDays: this.retentionDays,
    } = deps);
  }

  async create(appId: string, input: WebhookCreate, actor: Actor): Promise<EndpointWithSecret> {
    this.checkUrl(input.url);
    const plain = newWebhookSecret();
    return this.db.transaction().execute(async (trx) => {
      const endpoint = await this.webhooks.create(trx, appId, {
        url: input.url,
        events: input.events,
        description: input.description ?? '',
        enabled: input.enabled ?? true,
        secret: this.keyring.seal(plain, 'webhook_endpoints.secret'),
      });
      await this.audit.recordChange(trx, actor, appId, 'webhook.created', {
        endpoint_id: endpoint.id,
        url: endpoint.url,
        events: endpoint.events,
      });
      return { ...endpoint, plain_secret: plain };
    });
  }

  list(appId: string): Promise<WebhookEndpoint[]> {
    return this.webhooks.list(this.readDb, appId);
  }

  async get(appId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = await this.webhooks.get(this.db, appId, id);
    if (!endpoint) throw new NotFoundError('webhook');
    return endpoint;
  }

  async update(appId: string, id: string, change: WebhookChange, actor: Actor): Promise<WebhookEndpoint> {
    if (change.url !== undefined) this.checkUrl(change.url);
    await this.get(appId, id);
    return this.db.transaction().execute(async (trx) => {
      const endpoint = await this.webhooks.update(trx, appId, id, change);
      if (!endpoint) throw new NotFoundError('webhook');
      await this.audit.recordChange(trx, actor, appId, 'webhook.updated', { endpoint_id: id, changed: Object.keys(change).sort() });
      return endpoint;
    });
  }

  async delete(appId: string, id: string, actor: Actor): Promise<void> {
    const endpoint = await this.get(appId, id);
    await this.db.transaction().execute(async (trx) => {
      if (!(await this.webhooks.delete(trx, appId, id))) throw new NotFoundError('webhook');
      await this.audit.recordChange(trx, actor, appId, 'webhook.deleted', { endpoint_id: id, url: endpoint.url });
    });
  }

  /** A new signing secret, shown once; the one it replaces still signs for PREVIOUS_SECRET_MS. */
  async rotateSecret(appId: string, id: string, actor: Actor): Promise<EndpointWithSecret> {
    await this.get(appId, id);
    const plain = newWebhookSecret();
    const keepUntil = new Date(this.clock.now().getTime() + PREVIOUS_SECRET_MS);
    return this.db.transaction().execute(async (trx) => {
      // the secret it replaces was sealed as the current one: sealed again under the previous one's name
      const before = await this.webhooks.get(trx, appId, id);
      if (!before) throw new NotFoundError('webhook');
      const endpoint = await this.webhooks.rotateSecret(trx, appId, id, {
        secret: this.keyring.seal(plain, 'webhook_endpoints.secret'),
        previous: this.keyring.seal(this.keyring.open(before.secret, 'webhook_endpoints.secret'), 'webhook_endpoints.previous_secret'),
        keepUntil,
      });
      if (!endpoint) throw new NotFoundError('webhook');
      await this.audit.recordChange(trx, actor, appId, 'webhook.secret_rotated', { endpoint_id: id });
      return { ...endpoint, plain_secret: plain };
    });
  }

  /** Sends one `ping` event to the endpoint now, whatever it subscribes to, and answers what came of it. */
  async test(appId: string, id: string): Promise<WebhookAnswer> {
    const endpoint = await this.get(appId, id);
    if (!this.poster) throw new ValidationError('webhook: this process does not send webhooks');
    const now = this.clock.now();
    const [sending] = await this.webhooks.sendingEndpoints(this.db, [endpoint.id]);
    return this.poster.post(sending!, [
      { id: `ping_${now.getTime()}_${endpoint.id}`, type: PING, app_id: appId, timestamp: now.toISOString(), data: { endpoint_id: id } },
    ]);
  }

  /** Makes the endpoint's events of [since, until) due again; answers how many. */
  async replay(appId: string, id: string, window: { since: Date; until: Date }, actor: Actor): Promise<number> {
    await this.get(appId, id);
    const { since, until } = window;
    if (since >= until) throw new ValidationError('until: must be after since');
    const oldest = this.clock.now().getTime() - this.retentionDays * 86_400_000;
    if (until.getTime() <= oldest) throw new ValidationError(`since: events are kept ${this.retentionDays} days`);
    return this.db.transaction().execute(async (trx) => {
      const events = await this.webhooks.replay(trx, id, since, until);
      const details = { endpoint_id: id, since: since.toISOString(), until: until.toISOString(), events };
      await this.audit.recordChange(trx, actor, appId, 'webhook.replayed', details);
      return events;
    });
  }

  async attempts(appId: string, id: string): Promise<WebhookAttempt[]> {
    await this.get(appId, id);
    return this.webhooks.attempts(this.readDb, id, ATTEMPTS_SHOWN);
  }

  private checkUrl(url: string): void {
    const problem = webhookTargetProblem(url, this.allowedOrigins);
    if (problem) throw new ValidationError(`url: ${problem}`);
  }
}
