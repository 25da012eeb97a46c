import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { accepts } from '../../src/db/embedded.js';
import { engineDir, freePort, untilPortAnswers, waitFor } from './engines.js';
import { PG_BIN } from './pg-replica.js';

const run = promisify(execFile);

export const PATRONI = '/usr/bin/patroni';
export const PATRONICTL = '/usr/bin/patronictl';
export const ETCD = '/usr/bin/etcd';
export const HAPROXY = '/usr/sbin/haproxy';

/** How Patroni's REST API describes a member (GET /cluster). */
export interface PatroniMember {
  name: string;
  role: 'leader' | 'replica' | 'sync_standby' | 'standby_leader';
  state: string;
  lag?: number | string;
}

export interface PatroniCluster {
  /** the read-write port of HAProxy (the member Patroni's `/primary` answers 200 on) as a URL, database `postgres` */
  primaryUrl: string;
  /** the read-only port of HAProxy (members answering 200 on `/replica`) */
  replicaUrl: string;
  /** `url` (a URL of a database in the cluster) through HAProxy's read-write or read-only port */
  through(url: string, port: 'rw' | 'ro'): string;
  /** the members' names, in start order */
  names: string[];
  members(): Promise<PatroniMember[]>;
  /** the leader's name, or undefined while there is none */
  leader(): Promise<string | undefined>;
  /** Waits until there is a leader and every other running member streams from it as its synchronous standby. */
  untilHealthy(timeoutMs?: number): Promise<string>;
  /** `patronictl switchover` from the leader to the other member; resolves once the new leader answers `/primary`. */
  switchover(): Promise<{ from: string; to: string }>;
  /** SIGKILL to the member's Patroni and its postmaster at once, as the loss of its machine does. */
  kill(name: string): Promise<void>;
  /** Starts a killed member again: Patroni makes it a replica of whoever leads now. */
  restart(name: string): Promise<void>;
  /** Changes the cluster's settings kept in etcd (`patronictl edit-config`), e.g. `{ synchronous_mode: true }`. */
  configure(dcs: Record<string, unknown>): Promise<void>;
  stop(): Promise<void>;
  /** Kills every process at once, for a process 'exit' handler (which cannot wait); leaves the files. */
  killNow(): void;
}

/**
 * The settings that decide how long a failover takes: the leader key lives `ttl` seconds unless renewed, each
 * member runs its loop every `loop_wait`, so a lost leader is replaced within about ttl + loop_wait. Patroni wants
 * loop_wait + 2 * retry_timeout <= ttl.
 */
export const FAILOVER_SETTINGS = { ttl: 10, loop_wait: 1, retry_timeout: 3, maximum_lag_on_failover: 1_048_576 };

/** Small and quick, as pg-replica.ts's: nothing here outlives the test. */
const PG_PARAMETERS = {
  fsync: 'off',
  shared_buffers: '16MB',
  max_connections: 100,
  wal_level: 'replica',
  hot_standby: 'on',
  max_wal_senders: 5,
  max_replication_slots: 5,
  wal_keep_size: '64MB',
};

interface Member {
  name: string;
  pgPort: number;
  apiPort: number;
  dataDir: string;
  config: string;
  log: string;
  proc?: ChildProcess;
}

const ids = async () => {
  const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
};

/** A process that runs until it is stopped, its output to `log`, as the postgres user when we are root. */
async function daemon(command: string, args: string[], log: string, env: Record<string, string> = {}): Promise<ChildProcess> {
  const fd = openSync(log, 'a');
  const asUser = process.getuid?.() === 0 ? await ids() : {};
  const child = spawn(command, args, { stdio: ['ignore', fd, fd], env: { ...process.env, ...env }, ...asUser });
  closeSync(fd);
  child.on('error', () => undefined);
  return child;
}

const killed = (child: ChildProcess | undefined, signal: NodeJS.Signals) => {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  return exited;
};

/**
 * One etcd, `nodes` PostgreSQL 15 servers each run by its Patroni (streaming replication, `synchronous_mode`), and
 * an HAProxy in front with a read-write port (the member whose REST API answers 200 on `/primary`) and a read-only
 * port (`/replica`), each closing the sessions of a member it marks down (`on-marked-down shutdown-sessions`), as
 * teams run them. Every port is free and every file in one temporary directory.
 */
export async function startPatroniCluster(opts: { nodes?: number; synchronous?: boolean } = {}): Promise<PatroniCluster> {
  const { dir, remove } = await engineDir('pushd-patroni-');
  const scope = `pushd${path.basename(dir).replace(/[^a-z0-9]/gi, '')}`;
  const etcdPort = await freePort();
  const etcdPeer = await freePort();
  const rwPort = await freePort();
  const roPort = await freePort();
  const members: Member[] = [];
  for (let i = 0; i < (opts.nodes ?? 2); i++) {
    const name = `pg${i}`;
    members.push({
      name,
      pgPort: await freePort(),
      apiPort: await freePort(),
      dataDir: path.join(dir, name),
      config: path.join(dir, `${name}.yml`),
      log: path.join(dir, `${name}.log`),
    });
  }
  let etcd: ChildProcess | undefined;
  let haproxy: ChildProcess | undefined;
  const stop = async () => {
    await Promise.all(members.map((m) => killed(m.proc, 'SIGKILL')));
    // Patroni's postmasters outlive it when it is killed
    for (const m of members) killPid(postmasterPidNow(m));
    await killed(haproxy, 'SIGKILL');
    await killed(etcd, 'SIGKILL');
    await remove();
  };
  const api = async <T>(m: Member, what: string): Promise<T | undefined> => {
    try {
      // a caller busy with its own load (a benchmark's clients) reads the answer late: 5 s before it counts as none
      const res = await fetch(`http://127.0.0.1:${m.apiPort}/${what}`, { signal: AbortSignal.timeout(5000) });
      return (await res.json()) as T;
    } catch {
      return undefined;
    }
  };
  const membersNow = async () => {
    for (const m of members) {
      const cluster = await api<{ members?: PatroniMember[] }>(m, 'cluster');
      if (cluster?.members) return cluster.members;
    }
    return [];
  };
  const leader = async () => (await membersNow()).find((m) => m.role === 'leader' && m.state === 'running')?.name;
  const untilHealthy = (timeoutMs = 60_000) =>
    waitFor(
      'a Patroni leader with its synchronous standby streaming',
      async () => {
        const now = await membersNow();
        const lead = now.find((m) => m.role === 'leader' && m.state === 'running');
        const running = members.filter((m) => m.proc && m.proc.exitCode === null && m.proc.signalCode === null);
        const standbys = now.filter((m) => m.role === (opts.synchronous === false ? 'replica' : 'sync_standby'));
        const streaming = standbys.filter((m) => m.state === 'streaming' || m.state === 'running');
        return lead && streaming.length >= Math.min(1, running.length - 1) ? lead.name : undefined;
      },
      timeoutMs,
      200,
    );
  const startMember = async (m: Member) => {
    m.proc = await daemon(PATRONI, [m.config], m.log, { HOME: dir });
  };
  try {
    await mkdir(path.join(dir, 'etcd'), { mode: 0o700 });
    etcd = spawn(
      ETCD,
      [
        '--name',
        'etcd0',
        '--data-dir',
        path.join(dir, 'etcd'),
        '--listen-client-urls',
        `http://127.0.0.1:${etcdPort}`,
        '--advertise-client-urls',
        `http://127.0.0.1:${etcdPort}`,
        '--listen-peer-urls',
        `http://127.0.0.1:${etcdPeer}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${etcdPeer}`,
        '--initial-cluster',
        `etcd0=http://127.0.0.1:${etcdPeer}`,
        '--unsafe-no-fsync',
      ],
      { stdio: ['ignore', openSync(path.join(dir, 'etcd.log'), 'a'), openSync(path.join(dir, 'etcd.log'), 'a')] },
    );
    await untilPortAnswers(etcdPort, 'etcd');
    for (const m of members)
      await writeFile(m.config, JSON.stringify(patroniConfig({ scope, member: m, etcdPort, synchronous: opts.synchronous })), {
        mode: 0o644,
      });
    const haproxyConfig = path.join(dir, 'haproxy.cfg');
    await writeFile(haproxyConfig, haproxyConfigText({ members, rwPort, roPort }));
    haproxy = spawn(HAPROXY, ['-db', '-f', haproxyConfig], {
      stdio: ['ignore', openSync(path.join(dir, 'haproxy.log'), 'a'), openSync(path.join(dir, 'haproxy.log'), 'a')],
    });
    // the first member bootstraps the cluster; the others then copy it (pg_basebackup) rather than race for it
    await startMember(members[0]!);
    await waitFor('the first Patroni member to lead', async () => (await leader()) === members[0]!.name, 30_000, 200);
    for (const m of members.slice(1)) await startMember(m);
    await untilHealthy();
    await untilPortAnswers(rwPort, 'haproxy');
    await waitFor('HAProxy to see the primary', () => accepts(`postgres://postgres@127.0.0.1:${rwPort}/postgres`), 15_000, 200);
  } catch (err) {
    const logs = await Promise.all(members.map((m) => readFile(m.log, 'utf8').catch(() => '')));
    await stop();
    throw new Error(`${(err as Error).message}\n${logs.map((l) => l.slice(-3000)).join('\n----\n')}`);
  }
  const at = (port: number, url: string) => {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    return u.toString();
  };
  const byName = (name: string) => members.find((m) => m.name === name)!;
  return {
    primaryUrl: at(rwPort, 'postgres://postgres@127.0.0.1/postgres'),
    replicaUrl: at(roPort, 'postgres://postgres@127.0.0.1/postgres'),
    through: (url, port) => at(port === 'rw' ? rwPort : roPort, url),
    names: members.map((m) => m.name),
    members: membersNow,
    leader,
    untilHealthy,
    async switchover() {
      const from = await untilHealthy(180_000);
      const to = (await membersNow()).find((m) => m.role === 'sync_standby' || m.role === 'replica')!.name;
      await run(PATRONICTL, ['-c', byName(from).config, 'switchover', '--leader', from, '--candidate', to, '--force'], {
        env: { ...process.env, HOME: dir },
      });
      await waitFor(`${to} to answer /primary`, async () => (await fetchStatus(byName(to).apiPort, 'primary')) === 200, 60_000, 100);
      return { from, to };
    },
    async kill(name) {
      const m = byName(name);
      const postmaster = postmasterPidNow(m);
      await killed(m.proc, 'SIGKILL');
      killPid(postmaster);
    },
    async restart(name) {
      const m = byName(name);
      // a second Patroni for a running member would escape stop(), which kills the last one started
      if (m.proc && m.proc.exitCode === null && m.proc.signalCode === null) throw new Error(`${name} is running`);
      await startMember(m);
    },
    async configure(dcs) {
      // any running member's REST API writes the settings to etcd
      for (const m of members.filter((m) => m.proc?.exitCode === null && m.proc.signalCode === null)) {
        const res = await fetch(`http://127.0.0.1:${m.apiPort}/config`, {
          method: 'PATCH',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(dcs),
        }).catch(() => undefined);
        if (res?.ok) return;
      }
      throw new Error(`no Patroni member took the settings ${JSON.stringify(dcs)}`);
    },
    stop,
    killNow() {
      for (const child of [...members.map((m) => m.proc), haproxy, etcd]) if (child?.exitCode === null) child.kill('SIGKILL');
      for (const m of members) killPid(postmasterPidNow(m));
    },
  };
}

function patroniConfig(opts: { scope: string; member: Member; etcdPort: number; synchronous?: boolean }) {
  const { member: m } = opts;
  return {
    scope: opts.scope,
    name: m.name,
    log: { level: 'WARNING' },
    restapi: { listen: `127.0.0.1:${m.apiPort}`, connect_address: `127.0.0.1:${m.apiPort}` },
    etcd3: { hosts: `127.0.0.1:${opts.etcdPort}` },
    bootstrap: {
      dcs: {
        ...FAILOVER_SETTINGS,
        synchronous_mode: opts.synchronous !== false,
        postgresql: { use_pg_rewind: false, use_slots: true, parameters: PG_PARAMETERS },
      },
      initdb: [{ encoding: 'UTF8' }, { auth: 'trust' }, 'no-sync'],
    },
    postgresql: {
      listen: `127.0.0.1:${m.pgPort}`,
      connect_address: `127.0.0.1:${m.pgPort}`,
      data_dir: m.dataDir,
      bin_dir: PG_BIN,
      pgpass: path.join(path.dirname(m.dataDir), `${m.name}.pgpass`),
      authentication: { superuser: { username: 'postgres' }, replication: { username: 'postgres' } },
      parameters: { unix_socket_directories: path.dirname(m.dataDir) },
      pg_hba: ['local all all trust', 'host replication all 127.0.0.1/32 trust', 'host all all 127.0.0.1/32 trust'],
      basebackup: ['checkpoint=fast', 'no-sync'],
      // a lost primary started again after its replica was promoted cannot follow it without pg_rewind: copied afresh
      remove_data_directory_on_diverged_timelines: true,
    },
    tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
  };
}

/**
 * Each backend is checked against its member's Patroni REST API; a member that fails twice is marked down and its
 * sessions are closed at once (`on-marked-down shutdown-sessions`), so nobody keeps talking to a demoted or dead
 * primary. A connection to a member refused is tried once more (`retries 1`), not three times a second apart.
 */
function haproxyConfigText(opts: { members: Member[]; rwPort: number; roPort: number }): string {
  const servers = opts.members.map((m) => `    server ${m.name} 127.0.0.1:${m.pgPort} check port ${m.apiPort}`).join('\n');
  const backend = (name: string, port: number, check: string) =>
    [
      `listen ${name}`,
      `    bind 127.0.0.1:${port}`,
      `    option httpchk GET /${check}`,
      '    http-check expect status 200',
      // checked every second, every 250 ms while a member is changing state or down: a new primary takes traffic
      // within a quarter of a second of its promotion, a lost one is given up within half a second of its first failure
      '    default-server inter 1s fastinter 250ms downinter 250ms fall 2 rise 1 on-marked-down shutdown-sessions',
      servers,
    ].join('\n');
  return [
    'global',
    '    maxconn 2000',
    'defaults',
    '    mode tcp',
    '    timeout connect 2s',
    '    retries 1',
    // a database session may sit idle in a pool for long: only a dead server ends it
    '    timeout client 30m',
    '    timeout server 30m',
    backend('primary', opts.rwPort, 'primary'),
    backend('replicas', opts.roPort, 'replica'),
    '',
  ].join('\n');
}

function postmasterPidNow(m: Member): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(m.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function killPid(pid: number | undefined): void {
  try {
    if (pid) process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

async function fetchStatus(port: number, what: string): Promise<number | undefined> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/${what}`, { signal: AbortSignal.timeout(2000) })).status;
  } catch {
    return undefined;
  }
}
