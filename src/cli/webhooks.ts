import type { DatabaseRuntime } from '../app/runtime.js';
import { createWebhookPoster } from '../app/start.js';
import { CLI_ACTOR } from '../domain/audit.js';
import { WEBHOOK_EVENT_TYPES, webhookCreateSchema, type WebhookCreate } from '../domain/webhooks.js';
import { ValidationError } from '../domain/errors.js';
import { loadConfig } from '../platform/config.js';
import { systemClock } from '../platform/clock.js';
import { WebhookService } from '../services/webhooks.js';
import { createRepositories } from '../services/deps.js';
import { given, uuid, type Command } from './command.js';

/** The service on the command line's database, with a client of its own to send a test ping. */
async function withService<T>(rt: DatabaseRuntime, work: (s: WebhookService) => Promise<T>): Promise<T> {
  const config = loadConfig(process.env);
  const db = rt.handle.db;
  const repos = createRepositories();
  const made = createWebhookPoster(config, { db, repos, keyring: rt.secrets.keyring });
  try {
    return await work(
      new WebhookService({
        db,
        readDb: db,
        repos,
        clock: systemClock,
        keyring: rt.secrets.keyring,
        poster: made.poster,
        allowedOrigins: config.WEBHOOK_ALLOWED_ORIGINS,
        retentionDays: config.RETENTION_WEBHOOK_EVENTS_DAYS,
      }),
    );
  } finally {
    made.close();
  }
}

/** An endpoint as the command line prints it: the API's fields, the secret only when just made. */
function shown(e: Awaited<ReturnType<WebhookService['get']>> & { plain_secret?: string }) {
  const { id, url, events, description, enabled, disabled_reason } = e;
  return { id, url, events, description, enabled, disabled_reason, ...(e.plain_secret ? { secret: e.plain_secret } : {}) };
}

const app = { value: 'ID', help: "the app's id", required: true, check: uuid };
const endpoint = { value: 'ID', help: "the endpoint's id", required: true, check: uuid };

/** webhook create|list|delete|test: an app's webhook endpoints (docs/api/webhooks.md). */
export const webhookCommands: Record<string, Command> = {
  'webhook create': {
    summary: 'Creates a webhook endpoint; prints its signing secret, this once.',
    options: {
      app,
      url: { value: 'URL', help: 'the https URL the events are POSTed to', required: true },
      events: { value: 'LIST', help: `comma list of event types, or * for all (${WEBHOOK_EVENT_TYPES.join(', ')})`, required: true },
      description: { value: 'TEXT', help: 'what it is for' },
    },
    run: async (a, rt) => {
      const parsed = webhookCreateSchema.safeParse({
        url: a.url,
        events: given(a, 'events')
          .split(',')
          .map((s) => s.trim()),
        ...(a.description !== undefined && { description: a.description }),
      });
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new ValidationError(`${issue.path.join('.') || 'webhook'}: ${issue.message}`);
      }
      const input: WebhookCreate = parsed.data;
      return { webhook: shown(await withService(rt, (s) => s.create(given(a, 'app'), input, CLI_ACTOR))) };
    },
  },
  'webhook list': {
    summary: "Lists an app's webhook endpoints.",
    options: { app },
    run: async (a, rt) => ({ webhooks: (await withService(rt, (s) => s.list(given(a, 'app')))).map(shown) }),
  },
  'webhook delete': {
    summary: 'Deletes a webhook endpoint.',
    options: { app, id: endpoint },
    run: async (a, rt) => {
      await withService(rt, (s) => s.delete(given(a, 'app'), given(a, 'id'), CLI_ACTOR));
      return { deleted: a.id };
    },
  },
  'webhook test': {
    summary: 'Sends one ping event to a webhook endpoint now and prints what its receiver answered.',
    options: { app, id: endpoint },
    run: async (a, rt) => {
      const answer = await withService(rt, (s) => s.test(given(a, 'app'), given(a, 'id')));
      return { status: answer.status, latency_ms: answer.latencyMs, error: answer.error, snippet: answer.snippet };
    },
  },
};
