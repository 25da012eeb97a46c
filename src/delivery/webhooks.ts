import { randomUUID } from 'node:crypto';
import type { Db } from '../db/database.js';
import type { AuditRepository } from '../db/repositories/audit.js';
import type { ClaimedEvent, EventKey, NewAttempt, SendingEndpoint, WebhooksRepository } from '../db/repositories/webhooks.js';
import { SYSTEM_ACTOR } from '../domain/audit.js';
import type { SecretsKeyring } from '../domain/secrets.js';
import { parseRetryAfter, retryDelayMs, serializedEvents, signatureHeader, type WebhookEvent } from '../domain/webhooks.js';
import type { WebhookAnswer } from '../gateways/webhook-client.js';

export type { WebhookAnswer };
import type { Logger } from '../platform/logger.js';
import { Semaphore } from '../platform/semaphore.js';

/** How long an event is retried, and an endpoint may fail in a row before it is disabled. */
export const WEBHOOK_RETRY_MS = 3 * 86_400_000;
/** How often the sender gives up on events past WEBHOOK_RETRY_MS and disables endpoints failing as long. */
const EXPIRY_EVERY_MS = 60_000;
/** Events given up in one statement at most. */
const GIVE_UP_AT_ONCE = 10_000;

/** What sends a request: the gateways' client (WebhookClient). */
export interface WebhookTransport {
  post(url: string, headers: Record<string, string>, body: string | Buffer): Promise<WebhookAnswer>;
}

export interface WebhookPosterDeps {
  db: Db;
  webhooks: WebhooksRepository;
  transport: WebhookTransport;
  keyring: SecretsKeyring;
}

/** Signs and sends one request of events to an endpoint, and records the attempt. */
export class WebhookPoster {
  constructor(private readonly deps: WebhookPosterDeps) {}

  async post(endpoint: SendingEndpoint, events: WebhookEvent[]): Promise<WebhookAnswer> {
    const sent = await this.send(
      endpoint,
      this.secrets(endpoint),
      events.map((e) => JSON.stringify(e)),
    );
    await this.deps.webhooks.recordAttempts(this.deps.db, [sent.attempt]);
    return sent.answer;
  }

  /** The secrets that sign for the endpoint now, opened. */
  secrets(endpoint: SendingEndpoint): string[] {
    const { keyring } = this.deps;
    const secrets = [keyring.open(endpoint.secret, 'webhook_endpoints.secret')];
    if (endpoint.previous_secret) secrets.push(keyring.open(endpoint.previous_secret, 'webhook_endpoints.previous_secret'));
    return secrets;
  }

  /** Posts events already serialized as one request; answers what came of it and its attempt, for the caller to record. */
  async send(
    endpoint: SendingEndpoint,
    secrets: readonly string[],
    events: string[],
  ): Promise<{ answer: WebhookAnswer; attempt: NewAttempt }> {
    // the body encoded once: signed and written as these bytes
    const body = Buffer.from(`[${events.join(',')}]`);
    const answer = await this.signed(endpoint.url, secrets, `msg_${randomUUID()}`, body);
    const { status, latencyMs: latency_ms, error, snippet } = answer;
    return { answer, attempt: { endpoint_id: endpoint.id, events: events.length, status, latency_ms, error, snippet } };
  }

  /** Signs `body` under `secrets` as the Standard Webhooks request `id` and posts it (a journey's webhook step too). */
  async signed(url: string, secrets: readonly string[], id: string, body: string | Buffer): Promise<WebhookAnswer> {
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(secrets, id, timestamp, body),
    };
    return this.deps.transport.post(url, headers, body);
  }
}

export interface WebhookSenderDeps extends WebhookPosterDeps {
  log: Logger;
  /** where an endpoint the sender disables gets its audit row */
  audit: AuditRepository;
  /** events a request carries at most (WEBHOOK_BATCH_SIZE) */
  batchSize: number;
  /** requests in flight at once (WEBHOOK_CONCURRENCY) */
  concurrency: number;
  pollMs: number;
  /** a claim's lease (WEBHOOK_LEASE_MS): events not done by then (their sender died) are taken again */
  leaseMs: number;
  /** whether this process's deliveries are running now: the sender then keeps to a quarter of its concurrency */
  busy?: () => boolean;
}

/** One request of a round: an endpoint, its events, and the rows they came from. */
interface Chunk {
  endpoint: SendingEndpoint;
  /** the endpoint's signing secrets, opened once a round */
  secrets: readonly string[];
  /** each event as its JSON */
  events: string[];
  /** the row each event came from, by the event's index */
  eventRows: ClaimedEvent[];
  rows: Set<ClaimedEvent>;
}

/**
 * Sends the outbox from the processes that run workers, apart from delivery: its own poll, concurrency and timeout,
 * so a slow, failing or absent receiver holds back its own events only. Events are claimed with SKIP LOCKED (several
 * workers share them, each sent once in the normal case) and marked sent once their receiver answered 2xx; a crash
 * leaves them to be claimed again when their lease ends (at least once). A failed request rests its endpoint on a
 * backoff (retryDelayMs, Retry-After honoured); a 410 disables it, and so do 3 days of failures.
 */
export function startWebhookSender(deps: WebhookSenderDeps) {
  const poster = new WebhookPoster(deps);
  const semaphore = new Gate(deps.concurrency, deps.busy);
  let stopped = false;
  let lastExpiry = 0;
  let round: Promise<void> | null = null;
  let timer: NodeJS.Timeout | undefined;

  const loop = async () => {
    try {
      if (Date.now() - lastExpiry > EXPIRY_EVERY_MS) {
        lastExpiry = Date.now();
        await expire(deps);
      }
      // a full claim means more are due: claim again at once
      while (!stopped && (await sendRound(deps, poster, semaphore)) === deps.batchSize);
    } catch (err) {
      deps.log.warn({ err }, 'webhook round failed; will try again');
    }
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      round = loop().finally(() => {
        round = null;
        schedule();
      });
    }, deps.pollMs);
    timer.unref();
  };
  schedule();
  return {
    /** Stops claiming and waits for the round under way. */
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await round;
    },
  };
}

/** Claims due events, sends them in requests of up to batchSize, and records what came of each; answers how many it claimed. */
async function sendRound(deps: WebhookSenderDeps, poster: WebhookPoster, semaphore: Gate): Promise<number> {
  const claimed = await deps.webhooks.claim(deps.db, deps.batchSize, deps.leaseMs);
  if (!claimed.length) return 0;
  // a round starts no row past half its lease, so what it sends is marked before another may take it
  const deadline = Date.now() + deps.leaseMs / 2;
  const endpoints = new Map(
    (await deps.webhooks.sendingEndpoints(deps.db, [...new Set(claimed.map((c) => c.endpoint_id))])).map((e) => [e.id, e]),
  );
  const chunks = chunksOf(claimed, endpoints, deps.batchSize, (e) => poster.secrets(e));
  const attempts: NewAttempt[] = [];
  const failed = new Map<string, WebhookAnswer>();
  const notSent = new Set<ClaimedEvent>();
  const later = new Set<ClaimedEvent>();
  const started = new Set<ClaimedEvent>();
  await Promise.all(
    chunks.map((chunk) =>
      semaphore.run(async () => {
        // an endpoint that failed in this round: the rest waits for the next
        if (failed.has(chunk.endpoint.id)) {
          for (const r of chunk.rows) notSent.add(r);
          return;
        }
        // past its time a round starts no row, but finishes the rows whose first events went out (one given back
        // whole would send those again): the request carries their events alone
        const late = Date.now() > deadline;
        const rows = late ? [...chunk.rows].filter((r) => started.has(r)) : [...chunk.rows];
        if (late) for (const r of chunk.rows) if (!started.has(r)) later.add(r);
        if (!rows.length) return;
        for (const r of rows) started.add(r);
        const events = late ? chunk.events.filter((_, i) => started.has(chunk.eventRows[i]!)) : chunk.events;
        const { answer, attempt } = await poster.send(chunk.endpoint, chunk.secrets, events);
        attempts.push(attempt);
        if (answer.status === null || answer.status < 200 || answer.status >= 300) {
          failed.set(chunk.endpoint.id, answer);
          for (const r of rows) notSent.add(r);
        }
      }),
    ),
  );
  const sent = claimed.filter((c) => !notSent.has(c) && !later.has(c));
  await deps.webhooks.markSent(deps.db, sent);
  await deps.webhooks.release(
    deps.db,
    [...later].filter((r) => !notSent.has(r)),
    new Date(),
  );
  // the round's requests in one statement, once its events are marked: a crash before loses them with the marks
  await deps.webhooks.recordAttempts(deps.db, attempts);
  for (const endpoint of new Set(chunks.map((c) => c.endpoint))) {
    const answer = failed.get(endpoint.id);
    const rows = [...notSent].filter((r) => r.endpoint_id === endpoint.id);
    if (answer) await endpointFailed(deps, endpoint, answer, rows);
    else await deps.webhooks.endpointSucceeded(deps.db, endpoint.id);
  }
  return claimed.length;
}

/** The claimed events as requests: each endpoint's events in chunks of `size`; a row whose endpoint is gone is done. */
function chunksOf(
  claimed: ClaimedEvent[],
  endpoints: Map<string, SendingEndpoint>,
  size: number,
  secretsOf: (endpoint: SendingEndpoint) => string[],
): Chunk[] {
  const chunks: Chunk[] = [];
  const open = new Map<string, Chunk>();
  const secrets = new Map<string, string[]>();
  for (const row of claimed) {
    const endpoint = endpoints.get(row.endpoint_id);
    if (!endpoint) continue;
    if (!secrets.has(endpoint.id)) secrets.set(endpoint.id, secretsOf(endpoint));
    for (const event of serializedEvents(row, endpoint.events)) {
      let chunk = open.get(endpoint.id);
      if (!chunk || chunk.events.length >= size) {
        chunk = { endpoint, secrets: secrets.get(endpoint.id)!, events: [], eventRows: [], rows: new Set() };
        open.set(endpoint.id, chunk);
        chunks.push(chunk);
      }
      chunk.events.push(event);
      chunk.eventRows.push(row);
      chunk.rows.add(row);
    }
  }
  return chunks;
}

/**
 * The sender's permits: `concurrency` requests at once, and a quarter of them while `busy` says deliveries run, so on
 * a machine short of cores a broadcast's pushes go first and its events follow (the rest sent once it ends).
 */
class Gate {
  private readonly all: Semaphore;
  private readonly quiet: Semaphore;

  constructor(
    concurrency: number,
    private readonly busy: (() => boolean) | undefined,
  ) {
    this.all = new Semaphore(concurrency);
    this.quiet = new Semaphore(Math.max(1, Math.floor(concurrency / 4)));
  }

  run<T>(work: () => Promise<T>): Promise<T> {
    return this.all.run(() => (this.busy?.() ? this.quiet.run(work) : work()));
  }
}

/** A failed request: a 410 disables the endpoint; anything else rests it and gives its events back for then. */
async function endpointFailed(deps: WebhookSenderDeps, endpoint: SendingEndpoint, answer: WebhookAnswer, rows: EventKey[]): Promise<void> {
  if (answer.status === 410) {
    await disable(deps, endpoint.id, 'the receiver answered 410 Gone');
    await deps.webhooks.release(deps.db, rows, new Date());
    return;
  }
  const retryAfter = parseRetryAfter(answer.retryAfter, new Date());
  const state = await deps.webhooks.endpointFailed(deps.db, endpoint.id, (failures, failingMs) =>
    retryDelayMs(failures, failingMs, retryAfter),
  );
  await deps.webhooks.release(deps.db, rows, state?.next_attempt_at ?? new Date());
  deps.log.info(
    { endpointId: endpoint.id, status: answer.status, error: answer.error, failures: state?.failures },
    'webhook request failed',
  );
}

/** Disables an endpoint with its audit row (pushd's own), once. */
async function disable(deps: WebhookSenderDeps, endpointId: string, reason: string): Promise<void> {
  await deps.db.transaction().execute(async (trx) => {
    const was = await deps.webhooks.disable(trx, endpointId, reason);
    if (!was) return;
    await deps.audit.recordChange(trx, SYSTEM_ACTOR, was.app_id, 'webhook.disabled', { endpoint_id: endpointId, url: was.url, reason });
    deps.log.warn({ endpointId, url: was.url, reason }, 'webhook endpoint disabled');
  });
}

/** Gives up on events retried for WEBHOOK_RETRY_MS, and disables the endpoints that failed as long. */
async function expire(deps: WebhookSenderDeps): Promise<void> {
  const before = new Date(Date.now() - WEBHOOK_RETRY_MS);
  const gaveUp = await deps.webhooks.giveUp(deps.db, before, GIVE_UP_AT_ONCE);
  if (gaveUp) deps.log.warn({ events: gaveUp }, 'webhook events failed: retried for 3 days');
  for (const id of await deps.webhooks.failingSince(deps.db, before)) await disable(deps, id, 'the receiver failed for 3 days');
}
