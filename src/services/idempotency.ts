import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { IdempotencyRepository } from '../db/repositories/idempotency.js';
import type { Database } from '../db/schema.js';
import { ConflictError, UnprocessableError } from '../domain/errors.js';

/** An HTTP answer as the first request with a key sent it. */
export interface Answer {
  status: number;
  body: unknown;
}

/**
 * A create sent with an Idempotency-Key: the key, the fingerprint of the request it is bound to, and how the
 * result is answered, so that the service stores exactly the answer the caller sends.
 */
export interface IdempotentRequest<T> {
  key: string;
  fingerprint: Buffer;
  answer(result: T): Answer;
}

/** The answer of the first request with this key: the service created nothing, and the caller sends it again. */
export class Replay {
  constructor(readonly answer: Answer) {}
}

/**
 * Claims and records idempotency keys inside a service's own transaction, so the key commits with what the
 * request creates or not at all; a request that fails records nothing and its key stays free for a retry.
 */
export class IdempotencyKeys {
  constructor(private readonly keys: IdempotencyRepository) {}

  /**
   * The first statement of a create's transaction: null when this request owns the key (or sent none) and goes
   * on; the first answer when the key was used before with the same request. A concurrent request with the key
   * waits here until the first one's transaction ends.
   */
  async claim<T>(trx: Transaction<Database>, appId: string, idempotency: IdempotentRequest<T> | undefined): Promise<Replay | null> {
    if (!idempotency) return null;
    const first = await this.keys.claim(trx, appId, idempotency.key, idempotency.fingerprint);
    if (!first) return null;
    if (!first.request_hash.equals(idempotency.fingerprint)) {
      throw new UnprocessableError('Idempotency-Key: was used with another request (method, path or body) in the last 24 hours');
    }
    if (first.status === null) {
      throw new ConflictError(
        `Idempotency-Key: the first request with this key has not answered yet (it created ${first.resource_id}); retry later`,
      );
    }
    return new Replay({ status: first.status, body: first.body });
  }

  /**
   * The first answer of a retry, read before the create checks anything that may have changed since (a stored
   * template deleted): null when there is none yet, and the create goes on to claim the key as usual.
   */
  async answered<T>(db: Db, appId: string, idempotency: IdempotentRequest<T> | undefined): Promise<Replay | null> {
    if (!idempotency) return null;
    const first = await this.keys.find(db, appId, idempotency.key);
    if (!first || first.status === null) return null;
    if (!first.request_hash.equals(idempotency.fingerprint)) {
      throw new UnprocessableError('Idempotency-Key: was used with another request (method, path or body) in the last 24 hours');
    }
    return new Replay({ status: first.status, body: first.body });
  }

  /** Stores the answer of `result`; inside the create's transaction, or after it for a request that answers later. */
  async store<T>(db: Db, appId: string, idempotency: IdempotentRequest<T> | undefined, result: T): Promise<void> {
    if (idempotency) await this.keys.saveAnswer(db, appId, idempotency.key, idempotency.answer(result));
  }

  /** For a request that answers after its transaction: what it created, named to a retry meanwhile. */
  async pending<T>(trx: Transaction<Database>, appId: string, idempotency: IdempotentRequest<T> | undefined, id: string): Promise<void> {
    if (idempotency) await this.keys.setResource(trx, appId, idempotency.key, id);
  }
}
