import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { waitFor } from './gateways.js';

const run = promisify(execFile);

export interface RedisCluster {
  ports: number[];
  /** The node that holds this key's slot (a hash tag's, for `{name}`). */
  ownerOf(key: string): Promise<number>;
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of the test's own: `masters` redis-server processes on free ports (each also needs its
 * port + 10,000 for the cluster bus), nothing kept on disk, the 16,384 slots spread over them by redis-cli.
 */
export async function startRedisCluster(masters = 3): Promise<RedisCluster> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pushd-redis-cluster-'));
  const ports: number[] = [];
  while (ports.length < masters) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    if (!ports.includes(port) && (await free(port)) && (await free(port + 10_000))) ports.push(port);
  }
  const nodes: ChildProcess[] = ports.map((port) =>
    spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'].concat([
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
      ]),
      { stdio: 'ignore' },
    ),
  );
  const stop = async () => {
    await Promise.all(
      nodes.map((child) => {
        if (child.exitCode !== null || child.signalCode !== null) return undefined;
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        return exited;
      }),
    );
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) await waitFor(`redis-server on ${port}`, async () => !(await free(port)), 10_000);
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes']);
    await waitFor('every node to see the cluster as ok', async () => {
      const states = await Promise.all(ports.map((port) => withNode(port, (r) => r.cluster('INFO'))));
      return states.every((info) => String(info).includes('cluster_state:ok'));
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    ports,
    async ownerOf(key) {
      const slot = Number(await withNode(ports[0]!, (r) => r.cluster('KEYSLOT', key)));
      const ranges = await withNode(ports[0]!, (r) => r.cluster('SLOTS'));
      const owner = ranges.find(([from, to]) => slot >= from && slot <= to)?.[2];
      if (!owner) throw new Error(`no node holds slot ${slot}`);
      return owner[1];
    },
    stop,
  };
}

/** Runs one exchange on a plain (not cluster-aware) connection to a node. */
export async function withNode<T>(port: number, use: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await r.connect();
    return await use(r);
  } finally {
    r.disconnect();
  }
}

function free(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}
