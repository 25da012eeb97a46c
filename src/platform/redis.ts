import { Cluster, Redis, type RedisOptions } from 'ioredis';

/** Where REDIS_URL points: one Redis server, or (REDIS_CLUSTER) one node of a Redis Cluster. */
export interface RedisTarget {
  url: string;
  cluster: boolean;
}

/** Options of one client per setting that may differ between its users (queues, rate limits). */
export interface RedisClientOptions {
  /** Commands given while disconnected wait for the connection (true) or fail at once (false). */
  offlineQueue: boolean;
  /** Reconnections a command waits through before it fails; null: as many as it takes (BullMQ's blocking reads). */
  maxRetriesPerRequest: number | null;
}

/**
 * A client for the target. On a cluster the URL names one node: the client asks it for the others and sends
 * each command to the node that holds its key's slot, following MOVED and ASK as slots move.
 */
export function redisClient(target: RedisTarget, options: RedisClientOptions): Redis | Cluster {
  const { host, port, ...connection } = redisOptions(target.url);
  if (!target.cluster)
    return new Redis({
      host,
      port,
      ...connection,
      enableOfflineQueue: options.offlineQueue,
      maxRetriesPerRequest: options.maxRetriesPerRequest,
    });
  // every node of a cluster has database 0 only
  const { db: _db, ...nodeOptions } = connection;
  return new Cluster([{ host, port }], {
    enableOfflineQueue: options.offlineQueue,
    redisOptions: { ...nodeOptions, maxRetriesPerRequest: options.maxRetriesPerRequest },
  });
}

/** The connection settings in a redis:// or rediss:// URL. */
export function redisOptions(url: string): RedisOptions & { host: string; port: number } {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    db: u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0,
    tls: u.protocol === 'rediss:' ? {} : undefined,
  };
}
