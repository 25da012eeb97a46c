/**
 * The unicast benchmark's floor (bench/unicast.ts): its clients against bench/lib/floor-server.ts, the least a durable
 * 201 costs on this stack.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { LoadClients } from './load-clients.js';
import { benchDatabase, cpuMs, freePort, parentPid, percentile, PRODUCTION_NODE_ARGS, serverCpuMs, waitReady } from './setup.js';
import type { UnicastOptions } from './unicast-options.js';
import { summarised } from './unicast-run.js';

export interface Floor {
  postPerSec: number;
  p50: number;
  p99: number;
  refused: number;
  serverCpu: number;
  databaseCpu: number;
  /** the clients' process, or this one when they run on its thread */
  clientsCpu: number;
}

/**
 * The same clients against the floor server (bench/lib/floor-server.ts): the least a durable 201 costs on this
 * machine with this stack, for the POST figures to be read against.
 */
export async function measureFloor({ notifications: K, warmup: WARMUP, clients, view }: UnicastOptions): Promise<Floor> {
  const database = await benchDatabase('bench_floor');
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const postmaster = parentPid((await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid);
  const port = await freePort();
  const server = spawn(process.execPath, [...PRODUCTION_NODE_ARGS, '--import', 'tsx', 'bench/lib/floor-server.ts'], {
    env: { ...process.env, DATABASE_URL: database.url, PORT: String(port) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitReady(`${base}/ready`);
    const authorization = `Basic ${Buffer.from(':floor').toString('base64')}`;
    const load = new LoadClients({ base, authorization, clients, agent: view.httpClient, where: view.clientsIn });
    const posts = (n: number) =>
      Array.from({ length: n }, () => ({
        path: '/v6/notifications',
        body: {
          notification: { to: [{ name: 'device_id', criteria: [randomUUID()] }], payload: { alert: 'Your order has shipped', badge: 1 } },
        },
      }));
    await load.post(posts(WARMUP));
    const clientsCpuMs = () => cpuMs(load.pid ?? process.pid);
    const before = { server: cpuMs(server.pid!), database: serverCpuMs(postmaster), clients: clientsCpuMs() };
    const answers = await load.post(posts(K));
    const seconds = (answers.endedAt - answers.startedAt) / 1000;
    const { latencies, refused } = summarised(answers, 201);
    const clientsCpu = (clientsCpuMs() - before.clients) / K;
    await load.close();
    return {
      postPerSec: K / seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      refused,
      serverCpu: (cpuMs(server.pid!) - before.server) / K,
      databaseCpu: (serverCpuMs(postmaster) - before.database) / K,
      clientsCpu,
    };
  } finally {
    server.kill('SIGKILL');
    await client.end();
    await database.close();
  }
}
