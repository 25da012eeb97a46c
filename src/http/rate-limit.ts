import { isIPv6 } from 'node:net';
import fp from 'fastify-plugin';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import { MemoryTokenBuckets, RedisTokenBuckets, type BucketLimit } from '../platform/token-bucket.js';

/**
 * Rate limits: a token bucket per API key, and for the sdk key (which ships inside every copy of the app) one
 * per key and client address. A key's own limit (pushd key set-limit) replaces its role's default. Buckets live
 * in Redis when REDIS_URL is set, so every API process draws on the same ones, else in this process.
 *
 * The check runs in preParsing: after the route's authentication (onRequest), which tells whose bucket it is,
 * and before the body is read. Routes without a key (health, metrics) are not limited.
 */
/** How long a starting server waits for the shared buckets before it counts in its own. */
const READY_TIMEOUT_MS = 5000;

export const rateLimit = fp<{ config: Config; log: Logger }>(
  async (app, { config, log }) => {
    const defaults = {
      key: { perSecond: config.RATE_LIMIT_PER_SECOND, burst: config.RATE_LIMIT_BURST },
      sdk: { perSecond: config.RATE_LIMIT_SDK_PER_SECOND, burst: config.RATE_LIMIT_SDK_BURST },
    };
    const buckets = config.REDIS_URL
      ? new RedisTokenBuckets({ url: config.REDIS_URL, cluster: config.REDIS_CLUSTER }, config.QUEUE_PREFIX, log, {
          spread: config.QUEUE_PARTITIONS > 1,
        })
      : new MemoryTokenBuckets();
    app.addHook('onClose', () => buckets.close());
    await buckets.ready(READY_TIMEOUT_MS);

    app.addHook('preParsing', async (request, reply) => {
      const principal = request.principal as typeof request.principal | undefined;
      if (!principal) return;
      const perAddress = principal.role === 'sdk';
      const limit: BucketLimit = principal.rateLimit ?? (perAddress ? defaults.sdk : defaults.key);
      if (limit.perSecond === 0) return;
      const bucket = perAddress ? `${principal.keyId}@${addressBucket(request.ip)}` : principal.keyId;
      const { allowed, retryAfterMs } = await buckets.take(bucket, limit);
      if (allowed) return;
      const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
      reply
        .code(429)
        .header('retry-after', String(seconds))
        .send({
          error:
            `rate limit exceeded: ${limit.perSecond} requests per second with bursts of ${limit.burst}` +
            `${perAddress ? ' per client address' : ''}; retry after ${seconds} s`,
        });
    });
  },
  { name: 'rate-limit' },
);

/**
 * The address a client's bucket is keyed by: an IPv4 address as it is (also when IPv4-mapped), an IPv6 address
 * by its /64, since one client usually holds a whole /64 and could otherwise take a fresh address per request.
 */
export function addressBucket(ip: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped) return mapped[1]!;
  const address = ip.split('%')[0]!;
  if (!isIPv6(address)) return ip;
  const [head = '', tail] = address.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail ? tail.split(':') : [];
  const tailWidth = tailGroups.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  const zeros = tail === undefined ? [] : Array<string>(Math.max(0, 8 - headGroups.length - tailWidth)).fill('0');
  const groups = [...headGroups, ...zeros, ...tailGroups];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
