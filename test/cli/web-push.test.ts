import { createECDH, type ECDH } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { basic, useHarness, type Harness } from '../helpers/harness.js';
import { runCli, type CliResult } from './run-cli.js';

/** VAPID keys: set with the CLI (another process), read by a web page with the sdk key. */

const h = useHarness();
let cli: (...args: string[]) => Promise<CliResult>;
let app: Awaited<ReturnType<Harness['createApp']>>;

beforeAll(async () => {
  cli = (...args) => runCli(args, { DATABASE_URL: h.databaseUrl });
  app = await h.createApp();
});

const publicKey = (key: string) =>
  h.server.inject({ method: 'GET', url: '/v6/web-push/vapid-public-key', headers: { authorization: basic(key) } });

/** The key as the route answers it, once the change the CLI made has reached this process. */
async function servedKey(expected: string): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const res = await publicKey(app.keys.sdk);
    if (res.statusCode === 200 && res.json().public_key === expected) return expected;
    await new Promise((r) => setTimeout(r, 50));
  }
  return (await publicKey(app.keys.sdk)).body;
}

describe('pushd app set-web-push', () => {
  it('answers 404 {error} before the app has a key pair', async () => {
    const res = await publicKey(app.keys.sdk);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: expect.stringContaining('web push key') });
  });

  it('generates a P-256 pair; the sdk key reads its public half; the private half is stored, never printed', async () => {
    const r = await cli('app', 'set-web-push', '--app', app.app.id, '--subject', 'mailto:ops@example.com');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(Object.keys(out.web_push).sort()).toEqual(['public_key', 'subject']);
    const key = Buffer.from(out.web_push.public_key, 'base64url');
    expect(key).toHaveLength(65);
    expect(key[0]).toBe(4);
    expect(await servedKey(out.web_push.public_key)).toBe(out.web_push.public_key);
    const row = await h.db.db.selectFrom('apps').select('web_push_credentials').where('id', '=', app.app.id).executeTakeFirstOrThrow();
    const stored = h.secrets.openJson(row.web_push_credentials!, 'web_push_credentials') as {
      private_key: string;
      public_key: string;
      subject: string;
    };
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(Buffer.from(stored.private_key, 'base64url'));
    expect(ecdh.getPublicKey().toString('base64url')).toBe(out.web_push.public_key);
    expect(stored.subject).toBe('mailto:ops@example.com');
  });

  /** A P-256 private key as VAPID keys carry it: 32 bytes (ECDH drops its leading zero bytes, 1 key in 256). */
  const privateKeyOf = (ecdh: ECDH) => {
    const key = ecdh.getPrivateKey();
    return Buffer.concat([Buffer.alloc(32 - key.length), key]).toString('base64url');
  };

  it('takes a given pair, and refuses halves of different pairs or a bad subject (exit 2, nothing stored)', async () => {
    const pair = createECDH('prime256v1');
    pair.generateKeys();
    const other = createECDH('prime256v1');
    other.generateKeys();
    const pub = pair.getPublicKey().toString('base64url');
    const mismatched = await cli(
      'app',
      'set-web-push',
      '--app',
      app.app.id,
      '--subject',
      'mailto:ops@example.com',
      '--public-key',
      other.getPublicKey().toString('base64url'),
      '--private-key',
      privateKeyOf(pair),
    );
    expect(mismatched.code).toBe(2);
    expect(mismatched.stderr).toMatch(/public_key is not the public half of private_key/);
    const badSubject = await cli('app', 'set-web-push', '--app', app.app.id, '--subject', 'ops@example.com');
    expect(badSubject.code).toBe(2);
    const given = await cli(
      'app',
      'set-web-push',
      '--app',
      app.app.id,
      '--subject',
      'https://example.com/contact',
      '--public-key',
      pub,
      '--private-key',
      privateKeyOf(pair),
    );
    expect(given.code, given.stderr).toBe(0);
    expect(await servedKey(pub)).toBe(pub);
  });

  it('the read key alone may not read it (the route is for the app and its backend)', async () => {
    expect((await publicKey(app.keys.read)).statusCode).toBe(403);
    expect((await publicKey(app.keys.write)).statusCode).toBe(200);
  });
});
