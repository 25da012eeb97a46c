import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import type { Database, IdempotencyKey } from '../schema.js';
import { IDEMPOTENCY_KEY_TTL_HOURS } from '../../domain/idempotency.js';

const expired = sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_KEY_TTL_HOURS})`;

/** Idempotency keys of apps: the request each is bound to and the answer it gave first. */
export class IdempotencyRepository {
  /**
   * Claims the key for this request: inserts it, or takes over an expired one, and answers undefined. When a live
   * key exists, answers it instead, locked until the transaction ends. A concurrent claim of the same key waits
   * on the unique index until the first transaction ends, then sees its row (or claims the key if it rolled back).
   */
  async claim(trx: Transaction<Database>, appId: string, key: string, requestHash: Buffer): Promise<IdempotencyKey | undefined> {
    const claimed = await trx
      .insertInto('idempotency_keys')
      .values({ app_id: appId, key, request_hash: requestHash })
      .onConflict((oc) =>
        oc
          .columns(['app_id', 'key'])
          .doUpdateSet({ request_hash: requestHash, status: null, body: null, resource_id: null, created_at: sql<Date>`now()` })
          // ON CONFLICT DO UPDATE locks the existing row even when this is false, so it cannot vanish before the select
          .where('idempotency_keys.created_at', '<', expired),
      )
      .returning('key')
      .executeTakeFirst();
    if (claimed) return undefined;
    return trx.selectFrom('idempotency_keys').selectAll().where('app_id', '=', appId).where('key', '=', key).executeTakeFirstOrThrow();
  }

  /** Names what the first request created, before it has an answer to store. */
  async setResource(trx: Transaction<Database>, appId: string, key: string, resourceId: string): Promise<void> {
    await trx.updateTable('idempotency_keys').set({ resource_id: resourceId }).where('app_id', '=', appId).where('key', '=', key).execute();
  }

  async saveAnswer(db: Db, appId: string, key: string, answer: { status: number; body: unknown }): Promise<void> {
    await db
      .updateTable('idempotency_keys')
      .set({ status: answer.status, body: JSON.stringify(answer.body) })
      .where('app_id', '=', appId)
      .where('key', '=', key)
      .execute();
  }

  /** Deletes up to `limit` expired keys, oldest first; answers how many. */
  async purgeExpired(db: Db, limit: number): Promise<number> {
    const r = await db
      .deleteFrom('idempotency_keys')
      .where(({ eb, refTuple, selectFrom }) =>
        eb(
          refTuple('app_id', 'key'),
          'in',
          selectFrom('idempotency_keys')
            .select(['app_id', 'key'])
            .where('created_at', '<', expired)
            .orderBy('created_at')
            .limit(limit)
            // a key a request holds (replaying or taking it over) is left for the next sweep rather than waited for
            .forUpdate()
            .skipLocked()
            .$asTuple('app_id', 'key'),
        ),
      )
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}
