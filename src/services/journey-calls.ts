import type { Transaction } from 'kysely';
import type { DueEntrant } from '../db/repositories/journey-entrants.js';
import type { JourneysRepository } from '../db/repositories/journeys.js';
import type { Database } from '../db/schema.js';
import { ConflictError } from '../domain/errors.js';
import { parseJourneyDuration, WEBHOOK_STEP_ATTEMPTS, type DigestStep, type WebhookStep } from '../domain/journey.js';
import { historyEntry, type HistoryEntry } from '../domain/journey-history.js';
import { digestBaseline, lastDigest, webhookAttempt, webhookRetryable } from '../domain/journey-run.js';
import type { SecretsKeyring } from '../domain/secrets.js';
import type { TemplateData } from '../domain/template-data.js';
import { parseRetryAfter, retryDelayMs } from '../domain/webhooks.js';
import type { WebhookAnswer } from '../delivery/webhooks.js';
import { Semaphore } from '../platform/semaphore.js';

/** What a journey's webhook steps send with: the signer and client, the secrets key, and requests at once. */
export interface JourneyWebhooks {
  poster: { signed(url: string, secrets: readonly string[], id: string, body: string): Promise<WebhookAnswer> };
  keyring: SecretsKeyring;
  /** requests one batch has in flight at once (WEBHOOK_CONCURRENCY) */
  concurrency: number;
}

/** What became of an entrant at a step that calls out or counts: on to a step, or waiting there until `until`. */
export type StepOutcome = { entrant: DueEntrant; history: HistoryEntry[] } & ({ to: string } | { until: Date });

/** The journey and step a call is made for. */
export interface CallSite {
  journeyId: string;
  version: number;
  step: WebhookStep;
  /** where on_success and on_failure lead */
  onSuccess: string;
  onFailure: string;
}

/**
 * A webhook step for a batch of entrants: one signed request each with its context, made while their rows are locked
 * (a worker killed before the commit leaves them to be called again, with the same request id). A 2xx leads on by
 * on_success; no answer, a 408, 429 or 5xx is tried again after a backoff (the entrant waits at the step) until the
 * step's attempts are spent; anything else, and the last failure, lead on by on_failure.
 */
export async function callWebhooks(
  trx: Transaction<Database>,
  parts: { journeys: JourneysRepository; webhooks: JourneyWebhooks | null },
  site: CallSite,
  due: DueEntrant[],
  now: Date,
): Promise<StepOutcome[]> {
  const { step } = site;
  const sealed = await parts.journeys.webhookSecret(trx, site.journeyId);
  if (!parts.webhooks || !sealed) throw new ConflictError(`journey.steps.${step.id}: no webhook can be sent (no signing secret)`);
  const { poster, keyring, concurrency } = parts.webhooks;
  const secret = keyring.open(sealed, 'journeys.webhook_secret');
  const semaphore = new Semaphore(concurrency);
  const attempts = step.max_attempts ?? WEBHOOK_STEP_ATTEMPTS;
  return Promise.all(
    due.map((e) =>
      semaphore.run(async (): Promise<StepOutcome> => {
        const { attempt, arrivalSeq } = webhookAttempt(e.history, step.id, e.seq);
        const body = JSON.stringify(webhookContext(site, e, attempt, now));
        const answer = await poster.signed(step.url, [secret], `jrn_${e.id}_${step.id}_${arrivalSeq}`, body);
        const said = { a: attempt, ...(answer.status !== null ? { st: answer.status } : { err: answer.error ?? 'no answer' }) };
        if (answer.status !== null && answer.status >= 200 && answer.status < 300)
          return { entrant: e, to: site.onSuccess, history: [historyEntry(now, step.id, 'webhook', { ...said, to: site.onSuccess })] };
        if (webhookRetryable(answer.status) && attempt < attempts) {
          const until = new Date(now.getTime() + retryDelayMs(attempt, Infinity, parseRetryAfter(answer.retryAfter, now)));
          return { entrant: e, until, history: [historyEntry(now, step.id, 'webhook', { ...said, q: arrivalSeq, u: until.getTime() })] };
        }
        return { entrant: e, to: site.onFailure, history: [historyEntry(now, step.id, 'webhook', { ...said, to: site.onFailure })] };
      }),
    ),
  );
}

/** What a webhook step posts about an entrant: the journey and step, who, the event that moved it last, its last digest. */
function webhookContext(site: CallSite, e: DueEntrant, attempt: number, now: Date) {
  const key = e.entrant_key.slice(2);
  const digest = lastDigest(e.history);
  return {
    type: 'journey.webhook',
    timestamp: now.toISOString(),
    journey: { id: site.journeyId, version: site.version, step: site.step.id },
    entrant: e.entrant_key.startsWith('u:') ? { user_id: key } : { device_id: key },
    device_id: e.device_id,
    entered_at: e.entered_at.toISOString(),
    event: e.event,
    ...(digest && { digest }),
    attempt,
  };
}

/**
 * A digest step: arriving, each entrant's running count of the step's events (counted as the journey workers apply
 * them, a user's event once) is noted and it waits for the window; once the window is over it goes on with how many
 * more it counted meanwhile.
 */
export function runDigest(run: { step: DigestStep; next: string; waited: boolean }, due: DueEntrant[], now: Date): StepOutcome[] {
  const { step } = run;
  if (!run.waited) {
    const until = new Date(now.getTime() + parseJourneyDuration(step.window)!);
    return due.map((e) => ({
      entrant: e,
      until,
      history: [historyEntry(now, step.id, 'waiting', { u: until.getTime(), e: step.event, b: e.digest_count })],
    }));
  }
  return due.map((e) => {
    const x = Math.max(0, e.digest_count - digestBaseline(e.history, step.id));
    return { entrant: e, to: run.next, history: [historyEntry(now, step.id, 'digest', { e: step.event, x, to: run.next })] };
  });
}

/** The send's data with each entrant's last digest as `data.digest` ({event, count}), by its user id or device id. */
export function withDigests(data: TemplateData | null, due: DueEntrant[]): TemplateData | null {
  const by: Required<NonNullable<TemplateData['data_by']>> = { user_id: {}, device_id: {} };
  let any = false;
  for (const e of due) {
    const digest = lastDigest(e.history);
    if (!digest) continue;
    any = true;
    const [kind, id] = e.entrant_key.startsWith('u:')
      ? (['user_id', e.entrant_key.slice(2)] as const)
      : (['device_id', e.device_id] as const);
    by[kind][id] = { ...(Object.hasOwn(data?.data_by?.[kind] ?? {}, id) ? data!.data_by![kind]![id] : {}), digest };
  }
  if (!any) return data;
  return {
    ...data,
    data_by: { user_id: { ...data?.data_by?.user_id, ...by.user_id }, device_id: { ...data?.data_by?.device_id, ...by.device_id } },
  };
}
