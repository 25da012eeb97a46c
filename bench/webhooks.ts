/**
 * Webhooks benchmark, the reference in the same run: a broadcast without any endpoint, then with an endpoint
 * subscribed to "*" whose receiver (HTTPS, in this process) answers every request 50 ms late; then with the receiver
 * down for the whole broadcast and up after it; then with the worker SIGKILLed while it sends the events. For each:
 * pushes/s and its ratio to the reference, every push.delivered at the receiver (each event id once: duplicates
 * counted), when the last event came; WAL bytes and worker CPU per push with the endpoint off and on.
 *
 *   npm run bench -- webhooks [--devices 100000] [--receiver-ms 50] [--database bench_webhooks]
 */
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { arg, cpuMs, printRows } from './lib/setup.js';
import { benchStack, startServices, waitFinished, type BenchStack, type Services } from './lib/stack.js';
import { serverTls } from '../test/mocks/tls.js';

const devices = Number(arg('devices', '100000'));
const receiverMs = Number(arg('receiver-ms', '50'));
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

interface Broadcast {
  id: string;
  pushesPerSecond: number;
  lastPush: number;
  walPerPush: number;
  cpuUs: number;
}

/** One broadcast to every device: pushes/s until the last reached the mocks, WAL bytes and worker CPU per push. */
async function broadcast(stack: BenchStack, services: Services, call: Call, during?: (id: string) => Promise<void>): Promise<Broadcast> {
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
  const cpu0 = cpu();
  const lsn = (await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn;
  const t0 = performance.now();
  const res = await call('POST', '/v6/notifications', { notification: { to: '*', payload: PAYLOAD } });
  const { id } = (await res.json()) as { id: string };
  const auth = `Basic ${Buffer.from(`:${stack.keys.write}`).toString('base64')}`;
  await Promise.all([during?.(id), Promise.race([all, waitFinished(base, auth, id)])]);
  await waitFinished(base, auth, id);
  // a killed worker's CPU is lost with it: the figure is of the run without a kill
  const used = cpu() - cpu0;
  apns.onAccept = fcm.onAccept = undefined;
  const wal = await sql<{ n: string }>`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${lsn}::pg_lsn)::bigint as n`.execute(db.db);
  return {
    id,
    pushesPerSecond: received.size / ((lastPush - t0) / 1000),
    lastPush,
    walPerPush: Number(wal.rows[0]!.n) / devices,
    cpuUs: (used * 1000) / devices,
  };
}

type Call = (method: string, path: string, body?: unknown) => Promise<Response>;

/** Waits until every push.delivered of a broadcast is at the receiver, or EVENTS_WAIT_MS passed. */
async function allEvents(receiver: Receiver, id: string): Promise<void> {
  const deadline = performance.now() + EVENTS_WAIT_MS;
  while (receiver.received(id) < devices && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
}

/** A table row of one broadcast with the endpoint on, set beside the reference without it. */
function row(name: string, b: Broadcast, off: Broadcast, receiver: Receiver, lastFrom: number): string[] {
  return [
    name,
    b.pushesPerSecond.toFixed(0),
    (b.pushesPerSecond / off.pushesPerSecond).toFixed(2),
    `${receiver.received(b.id)} of ${devices}`,
    String(receiver.duplicates(b.id)),
    `${((receiver.lastAt(b.id) - lastFrom) / 1000).toFixed(1)} s`,
  ];
}

async function main() {
  const stack = await benchStack(arg('database', 'bench_webhooks'), { queue: 'postgres', redisUrl: '' });
  await sql`
    insert into devices (app_id, platform, token)
    select ${stack.app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
    from generate_series(1, ${devices}) as i`.execute(stack.db.db);
  await sql`analyze devices`.execute(stack.db.db);
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

  // unmeasured: the worker's connections, credentials and compiled code warmed, as a long-running worker's are
  await broadcast(stack, services, call);
  const off = await broadcast(stack, services, call);
  const created = await call('POST', '/v6/webhooks', { url: `${receiver.origin}/hooks`, events: ['*'] });
  if (created.status !== 201) throw new Error(`webhook create: ${created.status} ${await created.text()}`);
  await new Promise((r) => setTimeout(r, 1000)); // the processes hear of the endpoint
  const on = await broadcast(stack, services, call);
  await allEvents(receiver, on.id);

  receiver.setDown(true);
  const down = await broadcast(stack, services, call);
  receiver.setDown(false);
  const upAt = performance.now();
  await allEvents(receiver, down.id);

  // SIGKILL once the receiver has a third of the events (or, should they all come at once, as soon as any did)
  let killedAfter = 0;
  const killed = await broadcast(stack, services, call, async (id) => {
    const deadline = performance.now() + EVENTS_WAIT_MS;
    while (receiver.received(id) < Math.max(1, devices / 3) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    killedAfter = receiver.received(id);
    services.killWorker(0);
  });
  await allEvents(receiver, killed.id);

  console.log(`\nwebhooks benchmark: ${devices} devices (half iOS, half Android), receiver answering ${receiverMs} ms late`);
  console.log(
    `recovery timers: ${Object.entries(RECOVERY)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}\n`,
  );
  printRows(
    ['broadcast', 'pushes/s', 'ratio', 'push.delivered received', 'duplicate ids', 'last event after'],
    [
      ['without an endpoint (reference)', off.pushesPerSecond.toFixed(0), '1.00', '—', '—', '—'],
      row('endpoint for "*", receiver up', on, off, receiver, on.lastPush),
      row('receiver down, up after the last push', down, off, receiver, upAt),
      row(`worker SIGKILLed after ${killedAfter} events`, killed, off, receiver, killed.lastPush),
    ],
  );
  console.log('\n("last event after": the last push, or the receiver coming up)\n');
  printRows(
    ['endpoint', 'WAL bytes per push', 'worker CPU per push'],
    [
      ['off', off.walPerPush.toFixed(0), `${off.cpuUs.toFixed(0)} µs`],
      ['on', on.walPerPush.toFixed(0), `${on.cpuUs.toFixed(0)} µs`],
    ],
  );
  receiver.close();
  await services.stop();
  await stack.close();
  const missing = [on, down, killed].some((b) => receiver.received(b.id) < devices);
  if (missing || receiver.duplicates(on.id) > 0) process.exit(1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
