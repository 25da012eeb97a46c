/**
 * What the phases of the journeys benchmark (bench/journeys.ts) share: the stack on mock gateways, its devices, one
 * API and one worker process, and a caller of the API.
 */
import { sql } from 'kysely';
import type { ChildProcess } from 'node:child_process';
import { parentPid } from './setup.js';
import { benchStack, startServices, type BenchStack, type Services } from './stack.js';

export const PAYLOAD = { alert: 'bench', badge: 1 };
/** A history as entering a delay writes it, and the entry a send appends (src/domain/journey-history.ts). */
export const ENTERED_HISTORY = [
  { t: Date.now(), s: 'wait', k: 'entered' },
  { t: Date.now(), s: 'wait', k: 'waiting', u: Date.now() + 30 * 86_400_000 },
];
export const SENT_ENTRY = { t: Date.now(), s: 'wait', k: 'sent', n: '0195f1a2-7c4e-7d3b-9a61-2f0c8e4b5d17' };

export interface JourneysRun {
  stack: BenchStack;
  services: Services;
  worker: ChildProcess;
  /** the devices' ids, in order */
  ids: string[];
  /** the PostgreSQL server's postmaster (its processes' CPU) */
  postmaster: number;
  call: (method: string, path: string, body?: unknown) => Promise<{ journey: { id: string } }>;
}

/** The stack with `devices` devices (half iOS, half Android), its services split (an API, a worker polling each 200 ms). */
export async function startJourneysRun(opts: { database: string; queue: string; devices: number }): Promise<JourneysRun> {
  const stack = await benchStack(opts.database, { queue: opts.queue, redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
  const { db, keys, app } = stack;
  await sql`
    insert into devices (app_id, platform, token)
    select ${app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
    from generate_series(1, ${opts.devices}) as i`.execute(db.db);
  await sql`analyze devices`.execute(db.db);
  const ids = (await db.db.selectFrom('devices').select('id').orderBy('id').execute()).map((d) => d.id);
  const services = await startServices({ ...stack.env, JOURNEY_POLL_MS: '200' }, { mode: 'split', workers: 1 });
  const authorization = `Basic ${Buffer.from(`:${keys.write}`).toString('base64')}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${services.base}${path}`, {
      method,
      headers: { authorization, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ journey: { id: string } }>;
  };
  const postmaster = parentPid((await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db.db)).rows[0]!.pid);
  return { stack, services, worker: services.workers[0]!, ids, postmaster, call };
}

export const ratio = (a: number, b: number) => (b > 0 ? (a / b).toFixed(2) : '-');
