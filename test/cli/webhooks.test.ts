import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useHarness } from '../helpers/harness.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { TLS_CA_PATH } from '../mocks/tls.js';
import { oneDocument, runCli } from './run-cli.js';

/** `pushd webhook create|list|test|delete`: an app's endpoints from the command line, the ping verified by the receiver. */
const h = useHarness();
let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(async () => rx?.close());
const cli = async (...args: string[]) =>
  oneDocument(
    await runCli(args, { DATABASE_URL: h.databaseUrl, WEBHOOK_ALLOWED_ORIGINS: rx.origin, NODE_EXTRA_CA_CERTS: TLS_CA_PATH }),
  ) as Record<string, unknown>;

describe('pushd webhook', () => {
  it('creates an endpoint (its secret printed once), lists it, pings it signed, and deletes it', async () => {
    const app = ((await cli('app', 'create', '--bundle-id', 'com.example.webhook-cli')).app as { id: string }).id;
    const created = (await cli('webhook', 'create', '--app', app, '--url', rx.url, '--events', 'push.failed,device.unregistered'))
      .webhook as { id: string; secret: string; events: string[] };
    expect(created.secret).toMatch(/^whsec_/);
    expect(created.events).toEqual(['push.failed', 'device.unregistered']);
    const listed = (await cli('webhook', 'list', '--app', app)).webhooks as Record<string, unknown>[];
    expect(listed).toEqual([expect.objectContaining({ id: created.id, enabled: true })]);
    expect(listed[0]).not.toHaveProperty('secret');
    rx.verifyWith(created.secret);
    expect(await cli('webhook', 'test', '--app', app, '--id', created.id)).toMatchObject({ status: 204, error: null });
    expect(rx.requests[0]!.verifiedWith).toEqual([created.secret]);
    expect(rx.requests[0]!.events[0]!.type).toBe('ping');
    await cli('webhook', 'delete', '--app', app, '--id', created.id);
    expect((await cli('webhook', 'list', '--app', app)).webhooks).toEqual([]);
  }, 240_000);

  it('refuses an unsafe URL and an unknown event type, naming the field', async () => {
    const app = ((await cli('app', 'create', '--bundle-id', 'com.example.webhook-cli2')).app as { id: string }).id;
    const refused = await runCli(['webhook', 'create', '--app', app, '--url', 'https://10.0.0.1/', '--events', '*'], {
      DATABASE_URL: h.databaseUrl,
    });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('url: must not be a loopback');
    const unknown = await runCli(['webhook', 'create', '--app', app, '--url', rx.url, '--events', 'push.lost'], {
      DATABASE_URL: h.databaseUrl,
      WEBHOOK_ALLOWED_ORIGINS: rx.origin,
    });
    expect(unknown.stderr).toContain('events.0: must be "*" or one of');
  }, 120_000);
});
