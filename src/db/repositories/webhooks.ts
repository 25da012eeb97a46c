import { sql, type RawBuilder, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, WebhookAttempt, WebhookEndpoint } from '../schema.js';
import type { Sealed } from '../../domain/secrets.js';
import { BATCH_EVENT_TYPES, type StoredWebhookEvent, type WebhookEventType } from '../../domain/webhooks.js';

/** What an endpoint's row may be changed to through the API. */
export interface EndpointChange {
  url?: string | undefined;
  events?: string[] | undefined;
  description?: string | undefined;
  enabled?: boolean | undefined;
}

/** A claimed event with what its sending needs of its endpoint. */
export interface ClaimedEvent extends StoredWebhookEvent {
  endpoint_id: string;
  attempts: number;
  /** created_at to the microsecond (a Date keeps milliseconds): with the id, the row's key */
  at: string;
}

/** An endpoint as the sender reads it: where, what it takes and the secrets that sign now. */
export type SendingEndpoint = Pick<WebhookEndpoint, 'id' | 'app_id' | 'url' | 'events' | 'secret' | 'enabled' | 'failing_since'> & {
  /** the replaced secret while it still signs, else null */
  previous_secret: Sealed | null;
};

/** A request's result, as GET /v6/webhooks/:id/attempts shows it. */
export type NewAttempt = Omit<WebhookAttempt, 'id' | 'at'>;

/** What `claim` returns of an event's key, to mark it sent or release it. */
export type EventKey = Pick<ClaimedEvent, 'id' | 'created_at' | 'at'>;

/** Types an endpoint subscribed to any of receives a recorded batch's row. */
const BATCH_SUBSCRIPTIONS = ['*', ...BATCH_EVENT_TYPES];

/** Attempts one insert writes at most: six parameters each. */
const ATTEMPTS_AT_ONCE = 5000;

/** Webhook endpoints, their outbox (migration 056) and the attempts to send it. */
export class WebhooksRepository {
  async create(
    db: Db,
    appId: string,
    e: { url: string; events: string[]; description: string; enabled: boolean; secret: Sealed },
  ): Promise<WebhookEndpoint> {
    return db
      .insertInto('webhook_endpoints')
      .values({ app_id: appId, ...e })
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async list(db: Db, appId: string): Promise<WebhookEndpoint[]> {
    return db.selectFrom('webhook_endpoints').selectAll().where('app_id', '=', appId).orderBy('created_at').orderBy('id').execute();
  }

  async get(db: Db, appId: string, id: string): Promise<WebhookEndpoint | undefined> {
    return db.selectFrom('webhook_endpoints').selectAll().where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
  }

  /** Changes an endpoint; enabling it again clears why pushd disabled it and its failures. */
  async update(db: Db, appId: string, id: string, change: EndpointChange): Promise<WebhookEndpoint | undefined> {
    const enabling =
      change.enabled === true ? { disabled_reason: null, failures: 0, failing_since: null, next_attempt_at: sql<Date>`now()` } : {};
    return db
      .updateTable('webhook_endpoints')
      .set({ ...change, ...enabling, updated_at: sql<Date>`now()` })
      .where('app_id', '=', appId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  async delete(db: Db, appId: string, id: string): Promise<boolean> {
    const r = await db.deleteFrom('webhook_endpoints').where('app_id', '=', appId).where('id', '=', id).executeTakeFirst();
    return r.numDeletedRows > 0n;
  }

  /** Replaces the signing secret; the one it replaces (sealed again as `previous`) signs beside it until `keepUntil`. */
  async rotateSecret(
    db: Db,
    appId: string,
    id: string,
    r: { secret: Sealed; previous: Sealed; keepUntil: Date },
  ): Promise<WebhookEndpoint | undefined> {
    return db
      .updateTable('webhook_endpoints')
      .set({ previous_secret: r.previous, previous_secret_until: r.keepUntil, secret: r.secret, updated_at: sql<Date>`now()` })
      .where('app_id', '=', appId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  /** The apps with an enabled endpoint that takes a batch's events: only their batches write a row. */
  async appsWithBatchEvents(db: Db): Promise<string[]> {
    const rows = await db
      .selectFrom('webhook_endpoints')
      .select('app_id')
      .distinct()
      .where('enabled', '=', true)
      .where(sql<boolean>`events && ${BATCH_SUBSCRIPTIONS}::text[]`)
      .execute();
    return rows.map((r) => r.app_id);
  }

  /**
   * Records an event for each of the app's enabled endpoints subscribed to its type (none: nothing written); in the
   * caller's transaction, so it commits with the fact it reports.
   */
  async record(db: Db, appId: string, type: WebhookEventType, data: Record<string, unknown>): Promise<void> {
    await sql`
      insert into webhook_events (endpoint_id, app_id, type, data)
      select e.id, e.app_id, ${type}, ${JSON.stringify(data)}::jsonb
      from webhook_endpoints e
      where e.app_id = ${appId}::uuid and e.enabled and (e.events && array['*', ${type}]::text[])`.execute(db);
  }

  /** Records an event for one endpoint whatever it subscribes to (a ping); answers its id. */
  async recordFor(db: Db, endpoint: Pick<WebhookEndpoint, 'id' | 'app_id'>, type: string, data: Record<string, unknown>): Promise<string> {
    const row = await db
      .insertInto('webhook_events')
      .values({ endpoint_id: endpoint.id, app_id: endpoint.app_id, type, data: JSON.stringify(data) })
      .returning('id')
      .executeTakeFirstOrThrow();
    return row.id;
  }

  /**
   * Takes up to `limit` due events of endpoints that are enabled and not resting, and moves them `leaseMs` ahead:
   * SKIP LOCKED, so several senders take different ones, and one whose sender died is due again when its lease ends.
   */
  async claim(db: Db, limit: number, leaseMs: number): Promise<ClaimedEvent[]> {
    const { rows } = await sql<ClaimedEvent>`
      with due as (
        select o.id, o.created_at
        from webhook_events o
        join webhook_endpoints e on e.id = o.endpoint_id
        where o.state = 'pending' and o.due_at <= now() and e.enabled and e.next_attempt_at <= now()
        order by o.due_at
        limit ${limit}::int
        for update of o skip locked)
      update webhook_events o
      set due_at = now() + make_interval(secs => ${leaseMs / 1000}::float8), attempts = o.attempts + 1
      from due
      where o.id = due.id and o.created_at = due.created_at
      returning o.id, o.created_at, o.created_at::text as at, o.endpoint_id, o.app_id, o.type, o.data, o.attempts`.execute(db);
    return rows;
  }

  /** The endpoints of claimed events, with the secrets that sign now. */
  async sendingEndpoints(db: Db, ids: string[]): Promise<SendingEndpoint[]> {
    if (!ids.length) return [];
    return db
      .selectFrom('webhook_endpoints')
      .select(['id', 'app_id', 'url', 'events', 'secret', 'enabled', 'failing_since'])
      .select(sql<Sealed | null>`case when previous_secret_until > now() then previous_secret end`.as('previous_secret'))
      .where('id', 'in', ids)
      .execute();
  }

  /** Marks events sent. */
  async markSent(db: Db, keys: EventKey[]): Promise<void> {
    if (keys.length) await this.setKeys(db, keys, sql`state = 'sent'`);
  }

  /** Gives claimed events back, due at `dueAt` (their endpoint's next attempt). */
  async release(db: Db, keys: EventKey[], dueAt: Date): Promise<void> {
    if (keys.length) await this.setKeys(db, keys, sql`due_at = ${dueAt}::timestamptz`);
  }

  private async setKeys(db: Db, keys: EventKey[], set: RawBuilder<unknown>): Promise<void> {
    const ms = keys.map((k) => k.created_at.getTime());
    // the time bounds (a millisecond wider than the Dates) let PostgreSQL read only the events' days' partitions
    await sql`
      update webhook_events o set ${set}
      from unnest(${keys.map((k) => k.id)}::uuid[], ${keys.map((k) => k.at)}::timestamptz[]) as k(id, created_at)
      where o.id = k.id and o.created_at = k.created_at
        and o.created_at >= ${new Date(Math.min(...ms) - 1)}::timestamptz
        and o.created_at <= ${new Date(Math.max(...ms) + 1)}::timestamptz`.execute(db);
  }

  /** An answer came: the endpoint's failures end. */
  async endpointSucceeded(db: Db, id: string): Promise<void> {
    await db
      .updateTable('webhook_endpoints')
      .set({ failures: 0, failing_since: null, next_attempt_at: sql<Date>`now()` })
      .where('id', '=', id)
      .where('failures', '>', 0)
      .execute();
  }

  /**
   * A request failed: the endpoint rests for `delayFor` (given its failures in a row with this one, and the ms since the
   * first of them). Answers the failures in a row and since when, as now stored.
   */
  async endpointFailed(
    db: Db,
    id: string,
    delayFor: (failures: number, failingMs: number) => number,
  ): Promise<{ failures: number; failing_since: Date; next_attempt_at: Date } | undefined> {
    const current = await db
      .selectFrom('webhook_endpoints')
      .select('failures')
      .select(sql<number>`coalesce(extract(epoch from now() - failing_since) * 1000, 0)::float8`.as('failing_ms'))
      .where('id', '=', id)
      .executeTakeFirst();
    if (!current) return undefined;
    const failures = current.failures + 1;
    return db
      .updateTable('webhook_endpoints')
      .set({
        failures: sql<number>`failures + 1`,
        failing_since: sql<Date>`coalesce(failing_since, now())`,
        next_attempt_at: sql<Date>`now() + make_interval(secs => ${delayFor(failures, current.failing_ms) / 1000}::float8)`,
      })
      .where('id', '=', id)
      .returning(['failures', 'failing_since', 'next_attempt_at'])
      .executeTakeFirst() as Promise<{ failures: number; failing_since: Date; next_attempt_at: Date } | undefined>;
  }

  /** Disables an endpoint pushd will not send to any more; false when it was not enabled. */
  async disable(trx: Transaction<Database>, id: string, reason: string): Promise<Pick<WebhookEndpoint, 'app_id' | 'url'> | undefined> {
    return trx
      .updateTable('webhook_endpoints')
      .set({ enabled: false, disabled_reason: reason, updated_at: sql<Date>`now()` })
      .where('id', '=', id)
      .where('enabled', '=', true)
      .returning(['app_id', 'url'])
      .executeTakeFirst();
  }

  /** Endpoints failing since before `before`, still enabled. */
  async failingSince(db: Db, before: Date): Promise<string[]> {
    const rows = await db
      .selectFrom('webhook_endpoints')
      .select('id')
      .where('enabled', '=', true)
      .where('failing_since', '<', before)
      .execute();
    return rows.map((r) => r.id);
  }

  /** Marks failed the events still pending that were recorded before `before`; answers how many. */
  async giveUp(db: Db, before: Date, limit: number): Promise<number> {
    const r = await sql`
      update webhook_events o set state = 'failed'
      from (select id, created_at from webhook_events
            where state = 'pending' and created_at < ${before}::timestamptz
            limit ${limit}::int
            for update skip locked) old
      where o.id = old.id and o.created_at = old.created_at`.execute(db);
    return Number(r.numAffectedRows ?? 0);
  }

  /** Makes an endpoint's events of [since, until) due again, sent or not; answers how many. */
  async replay(db: Db, endpointId: string, since: Date, until: Date): Promise<number> {
    const r = await db
      .updateTable('webhook_events')
      .set({ state: 'pending', due_at: sql<Date>`now()` })
      .where('endpoint_id', '=', endpointId)
      .where('created_at', '>=', since)
      .where('created_at', '<', until)
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  /** Records attempts, a round's in few statements (ATTEMPTS_AT_ONCE rows each, within the bind parameters' limit). */
  async recordAttempts(db: Db, attempts: NewAttempt[]): Promise<void> {
    for (let i = 0; i < attempts.length; i += ATTEMPTS_AT_ONCE) {
      await db
        .insertInto('webhook_attempts')
        .values(attempts.slice(i, i + ATTEMPTS_AT_ONCE))
        .execute();
    }
  }

  /** An endpoint's latest attempts, newest first. */
  async attempts(db: Db, endpointId: string, limit: number): Promise<WebhookAttempt[]> {
    return db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('endpoint_id', '=', endpointId)
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
  }

  /** Every endpoint's secrets as stored, locked (`forUpdate`) for a transaction that reseals them. */
  async storedSecrets(
    db: Db,
    opts: { forUpdate: boolean },
  ): Promise<Pick<WebhookEndpoint, 'id' | 'app_id' | 'secret' | 'previous_secret'>[]> {
    const query = db.selectFrom('webhook_endpoints').select(['id', 'app_id', 'secret', 'previous_secret']).orderBy('id');
    return opts.forUpdate ? query.forUpdate().execute() : query.execute();
  }

  async resealSecrets(db: Db, id: string, sealed: { secret: Sealed; previous_secret: Sealed | null }): Promise<void> {
    await db.updateTable('webhook_endpoints').set(sealed).where('id', '=', id).execute();
  }
}

/**
 * The CTE that records a statement's batches' outcomes (`outcomes`: batch id and its BatchOutcomes as JSON) for the
 * endpoints subscribed to them, inside BatchesRepository.recordAttempts after its `input` and `recorded` CTEs: only
 * an attempt that was recorded writes its row, in the same statement.
 */
export function batchEventsCte(outcomes: { batchId: string; json: string }[], notificationIds: string[]): RawBuilder<unknown> {
  return sql`, webhook_batches as (
    insert into webhook_events (endpoint_id, app_id, type, data)
    select e.id, n.app_id, 'batch', w.data::jsonb
    from unnest(${outcomes.map((o) => o.batchId)}::text[], ${outcomes.map((o) => o.json)}::text[]) as w(id, data)
    join input i on i.id = w.id
    join recorded r on r.id = w.id
    join notifications n on n.id = i.notification_id and n.id = any(${notificationIds}::uuid[])
    join webhook_endpoints e on e.app_id = n.app_id and e.enabled and e.events && ${BATCH_SUBSCRIPTIONS}::text[])`;
}

/**
 * The CTE that records the webhook events of entrants that left a journey (`left`: a CTE of the statement naming
 * each one's app_id, journey_id, version, device_id and entrant_key), of `type`, for the endpoints subscribed to it:
 * in the statement that moves them, once a statement (a row trigger's call cost 65 µs an entrant, about 86 s to
 * archive a journey of a million). The shape of `journey.entered`'s (migration 067).
 */
export function journeyLeftEventsCte(left: string, type: 'journey.converted' | 'journey.exited'): RawBuilder<unknown> {
  return sql`, ${sql.raw(`${left}_webhook_events`)} as (
    insert into webhook_events (endpoint_id, app_id, type, data)
    select e.id, e.app_id, ${type}::text,
           jsonb_build_object('journey_id', l.journey_id, 'version', l.version, 'device_id', l.device_id, 'entrant', l.entrant_key)
    from ${sql.table(left)} l
    join webhook_endpoints e on e.app_id = l.app_id and e.enabled and e.events && array['*', ${type}::text])`;
}
