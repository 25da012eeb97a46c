import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Lifecycle, startPushd, type Server } from '../../src/app/start.js';
import { createLogger } from '../../src/platform/logger.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { runCli } from '../cli/run-cli.js';
import { basic, createHarness, redisUrl, type Harness } from '../helpers/harness.js';
import { waitFor } from '../engines/engines.js';
import { Redis } from 'ioredis';

/**
 * Rate limits on both bucket stores (in-process without REDIS_URL, Redis with it), with small limits so that
 * a test can run a bucket dry: keys 0.2/s with bursts of 3, the sdk key 0.2/s with bursts of 2 per client
 * address. A token every 5 s keeps the counts exact on a slow, busy machine.
 */
const LIMITS = { RATE_LIMIT_PER_SECOND: '0.2', RATE_LIMIT_BURST: '3', RATE_LIMIT_SDK_PER_SECOND: '0.2', RATE_LIMIT_SDK_BURST: '2' };

type Keys = Awaited<ReturnType<Harness['createApp']>>['keys'];

const readKey = (server: Server, key: string) => server.inject({ method: 'GET', url: '/v6/key', headers: { authorization: basic(key) } });
const registerDevice = (server: Server, key: string, remoteAddress: string) =>
  server.inject({
    method: 'POST',
    url: '/v6/devices',
    remoteAddress,
    headers: { authorization: basic(key), 'content-type': 'application/json' },
    payload: { device: { platform: 'ios', token: `rate-${Math.random().toString(36).slice(2)}` } },
  });

async function statuses(n: number, send: () => Promise<{ statusCode: number }>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await send()).statusCode);
  return out;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const stores = [
  { name: 'in-process buckets', queue: 'postgres' as const, available: true },
  { name: 'Redis buckets', queue: 'redis' as const, available: redisUrl() !== null },
];

describe.each(stores)('$name', ({ queue, available }) => {
  let h: Harness;
  let keys: Keys;
  beforeAll(async () => {
    if (!available) return;
    h = await createHarness({ queue, env: LIMITS });
    keys = (await h.createApp()).keys;
  });
  afterAll(async () => h?.close());

  it.skipIf(!available)('uses the store the configuration asks for, from the first request a started server answers', async () => {
    expect(Boolean(h.config.REDIS_URL)).toBe(queue === 'redis');
    if (queue !== 'redis') return;
    const redis = new Redis(h.config.REDIS_URL!);
    try {
      const { keys: own } = await h.createApp();
      const before = await redis.keys(`${h.config.QUEUE_PREFIX}:ratelimit:*`);
      expect((await readKey(h.server, own.write)).statusCode).toBe(200);
      expect((await redis.keys(`${h.config.QUEUE_PREFIX}:ratelimit:*`)).length).toBe(before.length + 1);
    } finally {
      redis.disconnect();
    }
  });

  it.skipIf(!available)('lets a burst through, then answers 429 {"error"} with Retry-After in seconds', async () => {
    const { keys: own } = await h.createApp();
    expect(await statuses(3, () => readKey(h.server, own.write))).toEqual([200, 200, 200]);
    const refused = await readKey(h.server, own.write);
    expect(refused.statusCode).toBe(429);
    // the next token comes 5 s after the bucket's first request: 4 if a busy machine took a second over these
    const retryAfter = refused.headers['retry-after'];
    expect(['5', '4']).toContain(retryAfter);
    expect(refused.json()).toEqual({
      error: `rate limit exceeded: 0.2 requests per second with bursts of 3; retry after ${retryAfter} s`,
    });
    // another key of the same app has a bucket of its own
    expect((await readKey(h.server, own.read)).statusCode).toBe(200);
  });

  it.skipIf(!available)('refills at the sustained rate: a key of 1/s with bursts of 1 has a token again after a second', async () => {
    const { keys: own } = await h.createApp();
    await new AppService({ db: h.db.db, secrets: h.secrets, repos: createRepositories() }).setKeyRateLimit(own.write, {
      perSecond: 1,
      burst: 1,
    });
    expect(await statuses(2, () => readKey(h.server, own.write))).toEqual([200, 429]);
    await sleep(1100);
    expect(await statuses(2, () => readKey(h.server, own.write))).toEqual([200, 429]);
  });

  it.skipIf(!available)('refuses before the body is read: a bad body over the limit is a 429, not a 400', async () => {
    const { keys: own } = await h.createApp();
    await statuses(3, () => readKey(h.server, own.write));
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(own.write), 'content-type': 'application/json' },
      payload: '{"notification": ',
    });
    expect(res.statusCode).toBe(429);
  });

  it.skipIf(!available)('limits the sdk key per client address (IPv6 by its /64)', async () => {
    const sdk = keys.sdk;
    expect(await statuses(3, () => registerDevice(h.server, sdk, '198.51.100.7'))).toEqual([201, 201, 429]);
    const refused = await registerDevice(h.server, sdk, '198.51.100.7');
    const retryAfter = refused.headers['retry-after'];
    expect(['5', '4']).toContain(retryAfter); // 4 if a busy machine took a second since the bucket's first request
    expect(refused.json()).toEqual({
      error: `rate limit exceeded: 0.2 requests per second with bursts of 2 per client address; retry after ${retryAfter} s`,
    });
    // another phone, same key: its own bucket
    expect((await registerDevice(h.server, sdk, '198.51.100.8')).statusCode).toBe(201);
    // two addresses of one IPv6 /64 share a bucket; another /64 does not
    expect(await statuses(2, () => registerDevice(h.server, sdk, '2001:db8:1:2::1'))).toEqual([201, 201]);
    expect((await registerDevice(h.server, sdk, '2001:db8:1:2:ffff::9')).statusCode).toBe(429);
    expect((await registerDevice(h.server, sdk, '2001:db8:1:3::1')).statusCode).toBe(201);
  });

  it.skipIf(!available)('does not limit routes without a key', async () => {
    expect(await statuses(10, () => h.server.inject({ method: 'GET', url: '/health' }))).toEqual(Array(10).fill(200));
  });

  it.skipIf(!available)(
    "a key's own limit set with the CLI applies once the server hears it, and clear-limit restores the default",
    async () => {
      const { keys: own } = await h.createApp();
      // the key on standard input, as a secret is given to the CLI
      const cli = (...args: string[]) => runCli([...args, '--key-file', '-'], { DATABASE_URL: h.databaseUrl }, `${own.write}\n`);
      // 0.01/s: no token comes back while a loaded machine runs the six requests
      const set = await cli('key', 'set-limit', '--per-second', '0.01', '--burst', '5');
      expect(set.stderr).toBe('');
      expect(set.code).toBe(0);
      expect(JSON.parse(set.stdout)).toEqual({ rate_limit: { per_second: 0.01, burst: 5 } });
      expect(await statuses(6, () => readKey(h.server, own.write))).toEqual([200, 200, 200, 200, 200, 429]);
      const refused = await readKey(h.server, own.write);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(90); // the next token is up to 100 s away
      expect(refused.json().error).toMatch(/^rate limit exceeded: 0.01 requests per second with bursts of 5;/);

      // 0 per second: no limit for this key, once the server has heard the change (the key is in its cache now)
      expect((await cli('key', 'set-limit', '--per-second', '0', '--burst', '1')).code).toBe(0);
      await waitFor('the server to hear the new limit', async () => (await readKey(h.server, own.write)).statusCode === 200, 5_000, 20);
      expect(await statuses(8, () => readKey(h.server, own.write))).toEqual(Array(8).fill(200));

      const cleared = await cli('key', 'clear-limit');
      expect(JSON.parse(cleared.stdout)).toEqual({ rate_limit: null });
      // back to the default bucket (0.2/s, bursts of 3), which the requests above drew on under the limits before
      await waitFor('a 429 under the default again', async () => (await readKey(h.server, own.write)).statusCode === 429, 5_000, 20);
    },
  );

  it.skipIf(!available)('refuses bad set-limit arguments and unknown keys', async () => {
    const cli = (...args: string[]) => runCli(args, { DATABASE_URL: h.databaseUrl }, `${keys.write}\n`);
    const bad = await cli('key', 'set-limit', '--key-file', '-', '--per-second=-1', '--burst', '5');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/per-second must be a number >= 0/);
    const noBurst = await cli('key', 'set-limit', '--key-file', '-', '--per-second', '3');
    expect(noBurst.code).toBe(2);
    expect(noBurst.stderr).toMatch(/--burst is required/);
    const badBurst = await cli('key', 'set-limit', '--key-file', '-', '--per-second', '3', '--burst', '1.5');
    expect(badBurst.code).not.toBe(0);
    expect(badBurst.stderr).toMatch(/burst must be an integer >= 1/);
    const unknown = await runCli(
      ['key', 'set-limit', '--key-file', '-', '--per-second', '3', '--burst', '5'],
      { DATABASE_URL: h.databaseUrl },
      'no-such-key\n',
    );
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/active key not found/);
  });

  describe('two API instances on one database', () => {
    let second: Server;
    const lifecycle = new Lifecycle();
    beforeAll(async () => {
      if (!available) return;
      // the same configuration as the harness's server: same database, same Redis and prefix when Redis is on
      const pushd = await startPushd(h.config, createLogger('silent'), lifecycle);
      second = pushd.api!.server;
      await second.ready();
    });
    afterAll(async () => lifecycle.close(createLogger('silent')));

    it.skipIf(!available)(
      queue === 'redis' ? 'share one bucket per key through Redis' : 'each keep their own buckets without Redis',
      async () => {
        const { keys: own } = await h.createApp();
        // the burst of 3 split across both instances
        expect(await statuses(2, () => readKey(h.server, own.write))).toEqual([200, 200]);
        expect((await readKey(second, own.write)).statusCode).toBe(200);
        // with Redis the bucket is empty for both; without it the second instance has 2 of its own 3 left
        const next = [(await readKey(second, own.write)).statusCode, (await readKey(h.server, own.write)).statusCode];
        expect(next).toEqual(queue === 'redis' ? [429, 429] : [200, 200]);
      },
    );
  });
});
