/**
 * Webhooks benchmark, the reference in the same run: `--pairs` pairs of broadcasts, the first with the endpoint
 * disabled (the reference) and the second with it enabled, subscribed to "*", its receiver (HTTPS, in this process)
 * answering every request 50 ms late; alternated, so a machine whose speed drifts during the run moves both sides of
 * a pair alike, and the ratio taken is the pairs' median. Then the receiver down for a whole broadcast and up after
 * it; then the worker SIGKILLed while it sends the events (`--faults false` skips both). For each: pushes/s, every
 * push.delivered at the receiver (each event id once: duplicates counted), when the last event came; WAL bytes,
 * worker CPU and PostgreSQL CPU per push with the endpoint off and on (WAL and PostgreSQL CPU are the server's
 * whole: on a server others use too they count their work).
 *
 *   npm run bench -- webhooks [--devices 100000] [--pairs 3] [--receiver-ms 50] [--faults true] [--database bench_webhooks]
 */
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { arg, cpuMs, median, parentPid, printRows, serverCpuMs } from './lib/setup.js';
import { benchStack, startServices, waitFinished, type BenchStack, type Services } from './lib/stack.js';
import { serverTls } from '../test/mocks/tls.js';

const devices = Number(arg('devices', '100000'));
const receiverMs = Number(arg('receiver-ms', '50'));
const pairs = Number(arg('pairs', '3'));
const faults = arg('faults', 'true') !== 'false';
const PAYLOAD = { alert: 'bench' };
/**
 * Production's settings but the recovery timers, shortened as the faults benchmark has them, so a killed worker's
 * jobs and claimed events are taken over in seconds rather than minutes.
 */
const RECOVERY = { JOB_LOCK_MS: '5000', SWEEP_AFTER_SECONDS: '5', WEBHOOK_LEASE_MS: '20000' };
/** How long the events of a broadcast may take to arrive before the run counts the rest missing. */
const EVENTS_WAIT_MS = 300_000;

/**
 * The receiver: answers 204 `receiverMs` late, or (down) drops the connection unread; counts each push.delivered
 * event id per notification, and when the last came.
 */
async function startReceiver() {
  const seen = new Map<string, Map<string, number>>();
  const lastAt = new Map<string, number>();
  let down = false;
  const server = createServer(serverTls(), (req, res) => {
    if (down) return void req.socket.destroy();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      for (const e of JSON.parse(Buffer.concat(chunks).toString()) as { id: string; type: string; data: { notification_id: string } }[]) {
        if (e.type !== 'push.delivered') continue;
        const ids = seen.get(e.data.notification_id) ?? new Map<string, number>();
        seen.set(e.data.notification_id, ids.set(e.id, (ids.get(e.id) ?? 0) + 1));
        lastAt.set(e.data.notification_id, performance.now());
      }
      setTimeout(() => res.writeHead(204).end(), receiverMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `https://localhost:${port}`,
    /** distinct push.delivered ids of a notification received */
    received: (id: string) => seen.get(id)?.size ?? 0,
    duplicates: (id: string) => [...(seen.get(id)?.values() ?? [])].reduce((sum, n) => sum + n - 1, 0),
    lastAt: (id: string) => lastAt.get(id) ?? NaN,
    setDown: (value: boolean) => void (down = value),
    close: () => server.close(),
  };
}
type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** WAL bytes, worker CPU and PostgreSQL CPU (µs) per push. */
interface Usage {
  walPerPush: number;
  cpuUs: number;
  pgUs: number;
}

interface Broadcast {
  id: string;
  pushesPerSecond: number;
  lastPush: number;
  walPerPush: number;
  /** worker CPU per push, µs */
  cpuUs: number;
  /** PostgreSQL CPU (every backend) per push, µs */
  pgUs: number;
  /** worker and PostgreSQL CPU per push from the request until now (after its events came: theirs counted too) */
  sinceStart: () => Promise<Usage>;
}

/** What a broadcast measures with: the stack, its processes, the API and the PostgreSQL server's main process. */
interface Run {
  stack: BenchStack;
  services: Services;
  call: Call;
  postmaster: number;
}

/**
 * One broadcast to every device: pushes/s until the last reached the mocks; WAL bytes, worker CPU and PostgreSQL CPU
 * per push, from the request until the notification finished (the events sent after its last push not counted).
 */
async function broadcast(run: Run, during?: (id: string) => Promise<void>): Promise<Broadcast> {
  const { stack, services, call, postmaster } = run;
  const { db, apns, fcm } = stack;
  const { base, workers } = services;
  let lastPush = 0;
  const received = new Set<string>();
  const all = new Promise<void>((resolve) => {
    apns.onAccept = fcm.onAccept = (token: string) => {
      received.add(token);
      lastPush = performance.now();
      if (received.size === devices) resolve();
    };
  });
  const cpu = () => workers.reduce((s, w) => s + cpuMs(w.pid!), 0);
  const [cpu0, pg0] = [cpu(), serverCpuMs(postmaster)];
  const lsn = (await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn;
  const t0 = performance.now();
  const res = await call('POST', '/v6/notifications', { notification: { to: '*', payload: PAYLOAD } });
  const { id } = (await res.json()) as { id: string };
  const auth = `Basic ${Buffer.from(`:${stack.keys.write}`).toString('base64')}`;
  await Promise.all([during?.(id), Promise.race([all, waitFinished(base, auth, id)])]);
  await waitFinished(base, auth, id);
  // a killed worker's CPU is lost with it: the figure is of the runs without a kill
  const [used, pgUsed] = [cpu() - cpu0, serverCpuMs(postmaster) - pg0];
  apns.onAccept = fcm.onAccept = undefined;
  const walSince = async () =>
    Number((await sql<{ n: string }>`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${lsn}::pg_lsn)::bigint as n`.execute(db.db)).rows[0]!.n);
  const wal = await walSince();
  return {
    id,
    pushesPerSecond: received.size / ((lastPush - t0) / 1000),
    lastPush,
    walPerPush: wal / devices,
    cpuUs: (used * 1000) / devices,
    pgUs: (pgUsed * 1000) / devices,
    sinceStart: async () => ({
      walPerPush: (await walSince()) / devices,
      cpuUs: ((cpu() - cpu0) * 1000) / devices,
      pgUs: ((serverCpuMs(postmaster) - pg0) * 1000) / devices,
    }),
  };
}

type Call = (method: string, path: string, body?: unknown) => Promise<Response>;

/** Waits until every push.delivered of a broadcast is at the receiver, or EVENTS_WAIT_MS passed. */
async function allEvents(receiver: Receiver, id: string): Promise<void> {
  const deadline = performance.now() + EVENTS_WAIT_MS;
  while (receiver.received(id) < devices && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
}

/** What the receiver got of a broadcast: events, duplicates, and when the last came after `lastFrom`. */
function events(b: Broadcast, receiver: Receiver, lastFrom: number): string[] {
  return [
    `${receiver.received(b.id)} of ${devices}`,
    String(receiver.duplicates(b.id)),
    `${((receiver.lastAt(b.id) - lastFrom) / 1000).toFixed(1)} s`,
  ];
}

/** Enables or disables the endpoint, and waits for the processes to hear of it. */
async function setEnabled(call: Call, endpointId: string, enabled: boolean): Promise<void> {
  const res = await call('PATCH', `/v6/webhooks/${endpointId}`, { enabled });
  if (res.status !== 200) throw new Error(`webhook update: ${res.status} ${await res.text()}`);
  await new Promise((r) => setTimeout(r, 1000));
}

/** A pair of broadcasts, the endpoint off then on, and the CPU per push of the on's until its last event came. */
interface Pair {
  off: Broadcast;
  on: Broadcast;
  onUntilEvents: Usage;
}

/** `pairs` pairs of broadcasts, each on's events all received before the next pair. */
async function measurePairs(run: Run, receiver: Receiver, endpointId: string): Promise<Pair[]> {
  const measured: Pair[] = [];
  for (let i = 0; i < pairs; i++) {
    const off = await broadcast(run);
    await setEnabled(run.call, endpointId, true);
    const on = await broadcast(run);
    await allEvents(receiver, on.id);
    measured.push({ off, on, onUntilEvents: await on.sinceStart() });
    await setEnabled(run.call, endpointId, false);
  }
  return measured;
}

/** The receiver down for a whole broadcast and up after it; then the worker SIGKILLed once a third of the events came. */
async function measureFaults(run: Run, receiver: Receiver): Promise<{ rows: string[][]; ids: string[] }> {
  receiver.setDown(true);
  const down = await broadcast(run);
  receiver.setDown(false);
  const upAt = performance.now();
  await allEvents(receiver, down.id);

  // (or, should they all come at once, as soon as any did)
  let killedAfter = 0;
  const killed = await broadcast(run, async (id) => {
    const deadline = performance.now() + EVENTS_WAIT_MS;
    while (receiver.received(id) < Math.max(1, devices / 3) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    killedAfter = receiver.received(id);
    run.services.killWorker(0);
  });
  await allEvents(receiver, killed.id);
  const rows = [
    ['receiver down, up after the last push', down.pushesPerSecond.toFixed(0), ...events(down, receiver, upAt)],
    [`worker SIGKILLed after ${killedAfter} events`, killed.pushesPerSecond.toFixed(0), ...events(killed, receiver, killed.lastPush)],
  ];
  return { rows, ids: [down.id, killed.id] };
}

function report(measured: Pair[], receiver: Receiver, faultRows: string[][]): void {
  console.log(`\nwebhooks benchmark: ${devices} devices (half iOS, half Android), receiver answering ${receiverMs} ms late`);
  console.log(
    `recovery timers: ${Object.entries(RECOVERY)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}\n`,
  );
  const us = (n: number) => `${n.toFixed(1)} µs`;
  printRows(
    ['pair', 'off pushes/s', 'on pushes/s', 'ratio', 'push.delivered received', 'duplicate ids', 'last event after'],
    measured.map(({ off, on }, i) => [
      String(i + 1),
      off.pushesPerSecond.toFixed(0),
      on.pushesPerSecond.toFixed(0),
      (on.pushesPerSecond / off.pushesPerSecond).toFixed(2),
      ...events(on, receiver, on.lastPush),
    ]),
  );
  const ratio = median(measured.map(({ off, on }) => on.pushesPerSecond / off.pushesPerSecond));
  console.log(`\nmedian ratio (endpoint on / off, pair by pair): ${ratio.toFixed(2)}\n`);
  const m = (f: (p: Pair) => number) => median(measured.map(f));
  printRows(
    ['endpoint (median of the pairs)', 'WAL bytes per push', 'worker CPU per push', 'PostgreSQL CPU per push'],
    [
      ['off', m((p) => p.off.walPerPush).toFixed(0), us(m((p) => p.off.cpuUs)), us(m((p) => p.off.pgUs))],
      ['on, until the last push', m((p) => p.on.walPerPush).toFixed(0), us(m((p) => p.on.cpuUs)), us(m((p) => p.on.pgUs))],
      [
        'on, until the last event',
        m((p) => p.onUntilEvents.walPerPush).toFixed(0),
        us(m((p) => p.onUntilEvents.cpuUs)),
        us(m((p) => p.onUntilEvents.pgUs)),
      ],
    ],
  );
  if (faultRows.length) {
    console.log('');
    printRows(['endpoint on', 'pushes/s', 'push.delivered received', 'duplicate ids', 'last event after'], faultRows);
    console.log('\n("last event after": the last push, or the receiver coming up)');
  }
}

async function main() {
  const stack = await benchStack(arg('database', 'bench_webhooks'), { queue: 'postgres', redisUrl: '' });
  await sql`
    insert into devices (app_id, platform, token)
    select ${stack.app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
    from generate_series(1, ${devices}) as i`.execute(stack.db.db);
  await sql`analyze devices`.execute(stack.db.db);
  const postmaster = parentPid((await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(stack.db.db)).rows[0]!.pid);
  const receiver = await startReceiver();
  const env = { ...stack.env, ...RECOVERY, WEBHOOK_ALLOWED_ORIGINS: receiver.origin };
  const services = await startServices(env, { mode: 'split', workers: 1 });
  const auth = `Basic ${Buffer.from(`:${stack.keys.write}`).toString('base64')}`;
  const call: Call = (method, path, body) =>
    fetch(`${services.base}${path}`, {
      method,
      headers: { authorization: auth, 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const run = { stack, services, call, postmaster };

  // unmeasured: the worker's connections, credentials and compiled code warmed, as a long-running worker's are
  await broadcast(run);
  const created = await call('POST', '/v6/webhooks', { url: `${receiver.origin}/hooks`, events: ['*'], enabled: false });
  if (created.status !== 201) throw new Error(`webhook create: ${created.status} ${await created.text()}`);
  const endpointId = ((await created.json()) as { webhook: { id: string } }).webhook.id;
  const measured = await measurePairs(run, receiver, endpointId);
  let faulted: { rows: string[][]; ids: string[] } = { rows: [], ids: [] };
  if (faults) {
    await setEnabled(call, endpointId, true);
    faulted = await measureFaults(run, receiver);
  }
  report(measured, receiver, faulted.rows);
  receiver.close();
  await services.stop();
  await stack.close();
  // duplicates are allowed after a kill (at least once), nowhere else
  const clean = measured.map(({ on }) => on.id);
  const missing = [...clean, ...faulted.ids].some((id) => receiver.received(id) < devices);
  if (missing || clean.some((id) => receiver.duplicates(id) > 0)) process.exit(1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
