import dns from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookClient } from '../../src/gateways/webhook-client.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/** The client's guard on the address it connects to, against a real HTTPS receiver on loopback. */
describe('webhook client', () => {
  let rx: Receiver;
  beforeAll(async () => {
    rx = await startReceiver();
  });
  afterAll(async () => rx?.close());

  /** A resolver that answers loopback for every name: a DNS rebinding of a public name to this host. */
  const rebinding = ((_host: string, options: unknown, callback: (...a: unknown[]) => void) => {
    const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all;
    if (all) callback(null, [{ address: '127.0.0.1', family: 4 }]);
    else callback(null, '127.0.0.1', 4);
  }) as unknown as typeof dns.lookup;

  it('refuses a name that resolves to a forbidden address, without connecting', async () => {
    const client = new WebhookClient({ allowedOrigins: [], timeoutMs: 2000, maxSockets: 2, resolve: rebinding });
    const port = new URL(rx.origin).port;
    const answer = await client.post(`https://hooks.example.com:${port}/hooks`, {}, '[]');
    client.close();
    expect(answer.status).toBeNull();
    expect(answer.error).toContain('resolves to a loopback, private, link-local or reserved address');
    expect(rx.requests.length + rx.failures.length).toBe(0);
  });

  it('refuses loopback by name unless its origin is allowed', async () => {
    const guarded = new WebhookClient({ allowedOrigins: [], timeoutMs: 2000, maxSockets: 2 });
    expect((await guarded.post(rx.url, {}, '[]')).error).toContain('refused');
    guarded.close();
    const allowed = new WebhookClient({ allowedOrigins: [rx.origin], timeoutMs: 2000, maxSockets: 2 });
    expect((await allowed.post(rx.url, {}, '[]')).status).toBe(204);
    allowed.close();
  });

  it('does not follow redirects, reads a bounded answer and cuts a receiver that never answers', async () => {
    const client = new WebhookClient({ allowedOrigins: [rx.origin], timeoutMs: 300, maxSockets: 2 });
    rx.answerNext({ status: 302, headers: { location: 'https://169.254.169.254/' } });
    const redirected = await client.post(rx.url, {}, '[]');
    expect(redirected.status).toBe(302);
    rx.answerNext({ status: 204, delayMs: 5000 });
    const slow = await client.post(rx.url, {}, '[]');
    expect(slow.status).toBeNull();
    expect(slow.error).toContain('no answer within 300 ms');
    expect(slow.latencyMs).toBeLessThan(2000);
    client.close();
  });
});
