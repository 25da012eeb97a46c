import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';
import { CLI_ACTOR } from '../../src/domain/audit.js';
import { keyIdOf, sealedKeyId } from '../../src/domain/secrets.js';
import { SecretsService } from '../../src/services/secrets.js';
import { WebhookService } from '../../src/services/webhooks.js';
import { JourneyService } from '../../src/services/journeys.js';
import { createRepositories, serviceDeps } from '../../src/services/deps.js';
import { systemClock } from '../../src/platform/clock.js';

/** A rotation of the secrets key reseals the webhook endpoints' and journeys' signing secrets with the apps' credentials. */
const h = useHarness();

describe('webhook secrets at rest', () => {
  it("are resealed under the new key by a rotation, both the current and the replaced one, and a journey's; all still open", async () => {
    const { app } = await h.createApp('com.example.webhook-secrets');
    const db = h.db.db;
    const webhooks = new WebhookService({
      db,
      readDb: db,
      repos: createRepositories(),
      clock: systemClock,
      keyring: h.secrets,
      poster: null,
      allowedOrigins: [],
      retentionDays: 7,
    });
    const created = await webhooks.create(app.id, { url: 'https://hooks.example.com/in', events: ['*'] }, CLI_ACTOR);
    const rotated = await webhooks.rotateSecret(app.id, created.id, CLI_ACTOR);
    const journeys = new JourneyService({ ...serviceDeps(db, systemClock), minCycleMs: 3_600_000, keyring: h.secrets });
    const journey = await journeys.create(app.id, {
      name: 'Hook',
      trigger: { api: true },
      re_entry: 'never',
      exit_on: [],
      state: 'active',
      steps: [{ id: 'crm', type: 'webhook', url: 'https://hooks.example.com/journey' }],
    });
    expect(journey.webhookSecret).toMatch(/^whsec_/);
    const newKey = randomBytes(32);
    const result = await new SecretsService({ db: db, keyring: h.secrets, keyFrom: 'test', repos: createRepositories() }).rotate(newKey);
    expect(result.resealed).toBeGreaterThanOrEqual(3);
    const row = await db.selectFrom('webhook_endpoints').select(['secret', 'previous_secret']).executeTakeFirstOrThrow();
    expect(sealedKeyId(row.secret)).toBe(keyIdOf(newKey));
    expect(sealedKeyId(row.previous_secret!)).toBe(keyIdOf(newKey));
    const after = h.secrets.rotatedTo(newKey);
    expect(after.open(row.secret, 'webhook_endpoints.secret')).toBe(rotated.plain_secret);
    expect(after.open(row.previous_secret!, 'webhook_endpoints.previous_secret')).toBe(created.plain_secret);
    const stored = await db.selectFrom('journeys').select('webhook_secret').where('id', '=', journey.journey.id).executeTakeFirstOrThrow();
    expect(sealedKeyId(stored.webhook_secret!)).toBe(keyIdOf(newKey));
    expect(after.open(stored.webhook_secret!, 'journeys.webhook_secret')).toBe(journey.webhookSecret);
  });
});
