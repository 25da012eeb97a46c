import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { waitFor } from './engines.js';

const run = promisify(execFile);

export interface RedisCluster {
  ports: number[];
  /** the redis-server process of each port, in the same order */
  pids: number[];
  /** The node that holds this key's slot (a hash tag's, for `{name}`): its master. */
  ownerOf(key: string): Promise<number>;
  /** Kills the node on this port (SIGKILL), as a crash does: its replica, if it has one, takes over. */
  kill(port: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of the test's own: `masters` redis-server processes on free ports (each also needs its
 * port + 10,000 for the cluster bus), nothing kept on disk, the 16,384 slots spread over them by redis-cli; with
 * `replicas`, that many more per master, which take over within seconds of its death (a node timeout of 2 s).
 */
export async function startRedisCluster(masters = 3, replicas = 0): Promise<RedisCluster> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pushd-redis-cluster-'));
  const ports: number[] = [];
  while (ports.length < masters * (1 + replicas)) {
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
        ...(replicas ? ['--cluster-node-timeout', '2000'] : []),
      ]),
      { stdio: 'ignore' },
    ),
  );
  const kill = (child: ChildProcess) => {
    if (child.exitCode !== null || child.signalCode !== null) return undefined;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    return exited;
  };
  const stop = async () => {
    await Promise.all(nodes.map(kill));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) await waitFor(`redis-server on ${port}`, async () => !(await free(port)), 10_000);
    await run('redis-cli', [
      '--cluster',
      'create',
      ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
    await waitFor('every node to see the cluster as ok', async () => {
      const states = await Promise.all(ports.map((port) => withNode(port, (r) => r.cluster('INFO'))));
      return states.every((info) => String(info).includes('cluster_state:ok'));
    });
    // a replica takes over only what it has: each starts with a full copy of its master's
    await waitFor('every replica to have synced', async () => {
      const links = await Promise.all(ports.map((port) => withNode(port, (r) => r.info('replication'))));
      return links.every((info) => info.includes('role:master') || info.includes('master_link_status:up'));
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    ports,
    pids: nodes.map((n) => n.pid!),
    async ownerOf(key) {
      const live = ports.find((_, i) => nodes[i]!.exitCode === null && nodes[i]!.signalCode === null)!;
      const slot = Number(await withNode(live, (r) => r.cluster('KEYSLOT', key)));
      const ranges = await withNode(live, (r) => r.cluster('SLOTS'));
      const owner = ranges.find(([from, to]) => slot >= from && slot <= to)?.[2];
      if (!owner) throw new Error(`no node holds slot ${slot}`);
      return owner[1];
    },
    async kill(port) {
      await kill(nodes[ports.indexOf(port)]!);
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
