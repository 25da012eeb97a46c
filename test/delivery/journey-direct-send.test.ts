import { Writable } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways } from '../helpers/gateways.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { call } from '../http/device-support.js';

/**
 * A journey's send step is sent by the process that moved its entrants, to the tokens read when its batch was cut: a
 * batch of a few devices at once, a larger one in the journeys' own turns. No delivery job carries it unless it waited
 * for a turn past JOURNEY_TURN_WAIT_MS. The attempt log line names who made each attempt (`job`).
 */
const SEND = { trigger: { api: true }, steps: [{ id: 'hello', type: 'send', notification: { payload: { alert: 'Hello' } } }] };

/** Workers and mock gateways, with `env`; the server's log lines (at debug) kept in `lines`. */
function loggedHarness(env: Record<string, string>) {
  const t = { lines: [] as Record<string, unknown>[], h: undefined as unknown as Harness, gw: undefined as unknown as Gateways };
  beforeAll(async () => {
    t.gw = await startGateways();
    const logTo = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) t.lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    t.h = await createHarness({ workers: true, env: { ...t.gw.env, JOURNEY_POLL_MS: '50', LOG_LEVEL: 'debug', ...env }, logTo });
  });
  afterAll(async () => {
    await t.h?.close();
    await t.gw?.close();
  });
  return t;
}

/** The app's journey (SEND) and, once `sent` pushes were recorded for its notifications, each attempt's `[job, sent]`. */
async function sendStep(t: ReturnType<typeof loggedHarness>, app: Awaited<ReturnType<Harness['createApp']>>, name: string) {
  await setCredentials(t.h, app.app.id, t.gw);
  const j = (await call(t.h, 'POST', '/v6/journeys', app.keys.write, { journey: { name, ...SEND } })).json().journey;
  const attempts = async (sent: number) => {
    const listed = (await call(t.h, 'GET', '/v6/notifications', app.keys.read)).json().notifications as { id: string }[];
    const ids = new Set(listed.map((n) => n.id));
    const recorded = () => t.lines.filter((l) => l.msg === 'batch attempt recorded' && ids.has(l.notificationId as string));
    await waitFor('the attempts recorded', async () => recorded().reduce((n, l) => n + (l.sent as number), 0) === sent, 10_000);
    // a while longer: a delivery job, or a second send, would have come by now
    await new Promise((r) => setTimeout(r, 500));
    return recorded().map((l) => [l.job, l.sent]);
  };
  return { id: j.id as string, attempts };
}

describe('journeys: a batch is sent by the process that moved it', () => {
  const t = loggedHarness({});

  it('pushes each entrant once, each attempt made directly, none by a delivery job', async () => {
    const app = await t.h.createApp();
    const j = await sendStep(t, app, 'Sent here');
    const devices: Awaited<ReturnType<typeof registerDevice>>[] = [];
    for (const platform of ['ios', 'android', 'ios'] as const) devices.push(await registerDevice(t.h, app.keys.sdk, { platform }));
    for (const d of devices)
      expect((await call(t.h, 'POST', `/v6/journeys/${j.id}/entries`, app.keys.write, { device_id: d.id })).statusCode).toBe(202);

    const pushesTo = (token: string) => [...t.gw.apns.pushes, ...t.gw.fcm.pushes].filter((p) => p.token === token).length;
    await waitFor('every entrant pushed', async () => devices.every((d) => pushesTo(d.token) >= 1), 20_000);
    const attempts = await j.attempts(3);
    expect(devices.map((d) => pushesTo(d.token))).toEqual([1, 1, 1]);
    expect(attempts.length).toBeGreaterThan(0);
    expect(attempts.map(([job]) => job)).toEqual(attempts.map(() => 'direct'));
  });
});

describe("journeys: a batch that finds the journeys' turns held goes to the queue", () => {
  // one turn, and batches of 150: more devices than a direct audience has, so each takes a turn
  const t = loggedHarness({ DELIVERY_CONCURRENCY: '1', JOURNEY_BATCH_SIZE: '150' });

  it('sends the first batch directly and the later ones through delivery jobs, each device once', async () => {
    const app = await t.h.createApp();
    const j = await sendStep(t, app, 'Two batches');
    // as many as the API's per-address rate limit would take seconds to register
    const { rows: devices } = await sql<{ token: string }>`
      insert into devices (app_id, platform, token)
      select ${app.app.id}::uuid, 'ios', encode(sha256(int4send(i)), 'hex') from generate_series(1, 450) as i
      returning token`.execute(t.h.db.db);
    // the first push of the first batch is answered 2.5 s late: its batch holds the one turn that long
    t.gw.apns.faults.next(1, { type: 'delay', ms: 2500 });
    await sql`
      insert into journey_entrants (journey_id, version, app_id, entrant_key, device_id, step_id, phase, due_at, entered_at)
      select ${j.id}::uuid, 1, ${app.app.id}::uuid, 'd:' || d.id, d.id, 'hello', 'arrived', now(), now()
      from devices d where d.app_id = ${app.app.id}::uuid`.execute(t.h.db.db);

    const pushesTo = (token: string) => t.gw.apns.pushes.filter((p) => p.token === token).length;
    await waitFor('every entrant pushed', async () => devices.every((d) => pushesTo(d.token) >= 1), 30_000);
    const attempts = await j.attempts(450);
    expect(devices.filter((d) => pushesTo(d.token) !== 1)).toEqual([]);
    // the first batch sent directly; the 300 after it went through delivery jobs where they found the one turn held.
    // The engine's two runners take them at once, and SKIP LOCKED may interleave their rows, but each gets its whole
    // 150 (the other can hold no more than 150): both stay larger than a direct audience (100), so each takes a turn.
    // With only 150 after the first, a part of 100 or fewer each would go at once, without a turn.
    const direct = attempts.filter(([job]) => job === 'direct');
    expect(direct).toContainEqual(['direct', 150]);
    expect(attempts.some(([job]) => job === 'delivery')).toBe(true);
    expect(attempts.reduce((n, [, sent]) => n + (sent as number), 0)).toBe(450);
  });
});
