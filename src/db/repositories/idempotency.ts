import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, IdempotencyKey } from '../schema.js';
import { IDEMPOTENCY_KEY_TTL_HOURS } from '../../domain/idempotency.js';

const expired = sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_KEY_TTL_HOURS})`;

/** Idempotency keys of apps: the request each is bound to and the answer it gave first. */
export class IdempotencyRepository {
  /**
   * Claims the key for this request: inserts it (a key whose row expired is taken by a new row; the old one goes
   * with its day's partition), and answers undefined. When a live key exists, answers it instead, locked until the
   * transaction ends. The table is partitioned by day (migration 034), so (app_id, key) has no unique index: a
   * transaction-scoped advisory lock on the app and key serialises the claims of one key instead, and a concurrent
   * claim waits there until the first transaction ends, then sees its row (or claims the key if it rolled back).
   */
  async claim(trx: Transaction<Database>, appId: string, key: string, requestHash: Buffer): Promise<IdempotencyKey | undefined> {
    await sql`select pg_advisory_xact_lock(hashtextextended(${appId}::text || ' ' || ${key}::text, ${CLAIM_LOCK_SEED}))`.execute(trx);
    // a new key (the usual case) in one more statement; a live one is then read, locked
    const { rows } = await sql`
      insert into idempotency_keys (app_id, key, request_hash)
      select ${appId}::uuid, ${key}::text, ${requestHash}::bytea
      where not exists (select 1 from idempotency_keys where app_id = ${appId}::uuid and key = ${key}::text and created_at >= ${expired})
      returning key`.execute(trx);
    if (rows.length) return undefined;
    return trx
      .selectFrom('idempotency_keys')
      .selectAll()
      .where('app_id', '=', appId)
      .where('key', '=', key)
      .where('created_at', '>=', expired)
      .forUpdate()
      .executeTakeFirstOrThrow();
  }

  /** The key as its first request left it, without claiming it (undefined: no live key). */
  async find(db: Db, appId: string, key: string): Promise<Pick<IdempotencyKey, 'request_hash' | 'status' | 'body'> | undefined> {
    return db
      .selectFrom('idempotency_keys')
      .select(['request_hash', 'status', 'body'])
      .where('app_id', '=', appId)
      .where('key', '=', key)
      .where('created_at', '>=', expired)
      .executeTakeFirst();
  }

  /** Names what the first request created, before it has an answer to store. */
  async setResource(trx: Transaction<Database>, appId: string, key: string, resourceId: string): Promise<void> {
    await trx
      .updateTable('idempotency_keys')
      .set({ resource_id: resourceId })
      .where('app_id', '=', appId)
      .where('key', '=', key)
      .where('created_at', '>=', expired)
      .execute();
  }

  async saveAnswer(db: Db, appId: string, key: string, answer: { status: number; body: unknown }): Promise<void> {
    await db
      .updateTable('idempotency_keys')
      .set({ status: answer.status, body: JSON.stringify(answer.body) })
      .where('app_id', '=', appId)
      .where('key', '=', key)
      .where('created_at', '>=', expired)
      .execute();
  }
}

/** Seeds the hash of a claim's advisory lock ("pdik"), so its keys are not those of the other advisory locks. */
const CLAIM_LOCK_SEED = 0x7064696b;
