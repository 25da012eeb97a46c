/**
 * Webhooks benchmark: a broadcast without any endpoint, then the same with an endpoint subscribed to "*" whose
 * receiver (HTTPS, in this process) answers every request 50 ms late; pushes/s of both and their ratio, every
 * push.delivered at the receiver (each event id once: duplicates counted), the last event's lag behind the last push,
 * WAL bytes and worker CPU per push with the endpoint off and on.
 *
 *   npm run bench -- webhooks [--devices 100000] [--receiver-ms 50] [--database bench_webhooks]
 */
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { arg, cpuMs, printTable } from './lib/setup.js';
import { benchStack, startServices, waitFinished } from './lib/stack.js';
import { serverTls } from '../test/mocks/tls.js';

const devices = Number(arg('devices', '100000'));
const receiverMs = Number(arg('receiver-ms', '50'));
const PAYLOAD = { alert: 'bench' };

/** The receiver: answers 204 `receiverMs` late; counts each push.delivered event id and when the last came. */
async function startReceiver() {
  const seen = new Map<string, number>();
  let lastAt = 0;
  const server = createServer(serverTls(), (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      for (const e of JSON.parse(Buffer.concat(chunks).toString()) as { id: string; type: string }[])
        if (e.type === 'push.delivered') seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
      lastAt = performance.now();
      setTimeout(() => res.writeHead(204).end(), receiverMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { origin: `https://localhost:${port}`, seen, lastAt: () => lastAt, close: () => server.close() };
}

async function main() {
  const stack = await benchStack(arg('database', 'bench_webhooks'), { queue: 'postgres', redisUrl: '' });
  const { db, apns, fcm, keys, app } = stack;
  await sql`
    insert into devices (app_id, platform, token)
    select ${app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
    from generate_series(1, ${devices}) as i`.execute(db.db);
  await sql`analyze devices`.execute(db.db);
  const receiver = await startReceiver();
  const services = await startServices({ ...stack.env, WEBHOOK_ALLOWED_ORIGINS: receiver.origin }, { mode: 'split', workers: 1 });
  const { base, workers } = services;
  const auth = `Basic ${Buffer.from(`:${keys.write}`).toString('base64')}`;
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: auth, 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const wal = async () => (await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn;
  const walBytes = async (from: string) =>
    Number(
      (await sql<{ n: string }>`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${from}::pg_lsn)::bigint as n`.execute(db.db)).rows[0]!.n,
    );

  const broadcast = async () => {
    let lastPush = 0;
    const received = new Set<string>();
    const all = new Promise<void>((resolve) => {
      apns.onAccept = fcm.onAccept = (token: string) => {
        received.add(token);
        lastPush = performance.now();
        if (received.size === devices) resolve();
      };
    });
    const cpu0 = workers.reduce((s, w) => s + cpuMs(w.pid!), 0);
    const lsn = await wal();
    const t0 = performance.now();
    const res = await call('POST', '/v6/notifications', { notification: { to: '*', payload: PAYLOAD } });
    const { id } = (await res.json()) as { id: string };
    await Promise.race([all, waitFinished(base, auth, id)]);
    const seconds = (lastPush - t0) / 1000;
    await waitFinished(base, auth, id);
    const cpu = workers.reduce((s, w) => s + cpuMs(w.pid!), 0) - cpu0;
    apns.onAccept = fcm.onAccept = undefined;
    return {
      id,
      pushesPerSecond: received.size / seconds,
      lastPush,
      walPerPush: (await walBytes(lsn)) / devices,
      cpuUs: (cpu * 1000) / devices,
    };
  };

  const off = await broadcast();
  const created = await call('POST', '/v6/webhooks', { url: `${receiver.origin}/hooks`, events: ['*'] });
  if (created.status !== 201) throw new Error(`webhook create: ${created.status} ${await created.text()}`);
  await new Promise((r) => setTimeout(r, 1000)); // the processes hear of the endpoint
  const on = await broadcast();
  const deadline = performance.now() + 300_000;
  while (receiver.seen.size < devices && performance.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  const duplicates = [...receiver.seen.values()].filter((n) => n > 1).length;

  console.log(`\nwebhooks benchmark: ${devices} devices (half iOS, half Android), receiver answering ${receiverMs} ms late\n`);
  printTable([
    ['pushes/s without an endpoint', off.pushesPerSecond.toFixed(0)],
    ['pushes/s with an endpoint for "*"', on.pushesPerSecond.toFixed(0)],
    ['ratio (with / without)', (on.pushesPerSecond / off.pushesPerSecond).toFixed(2)],
    ['push.delivered events received', `${receiver.seen.size} of ${devices}`],
    ['duplicate event ids', String(duplicates)],
    ['last event after the last push', `${((receiver.lastAt() - on.lastPush) / 1000).toFixed(1)} s`],
    ['WAL bytes per push, without / with', `${off.walPerPush.toFixed(0)} / ${on.walPerPush.toFixed(0)}`],
    ['worker CPU per push, without / with', `${off.cpuUs.toFixed(0)} / ${on.cpuUs.toFixed(0)} µs`],
  ]);
  receiver.close();
  await services.stop();
  await stack.close();
  if (receiver.seen.size < devices || duplicates > 0) process.exit(1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
