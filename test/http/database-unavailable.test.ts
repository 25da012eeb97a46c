import { execFileSync } from 'node:child_process';
import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/domain/errors.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { freePort } from '../engines/engines.js';

/** The error a pg client gets from `work` (a real one, from a real server or socket). */
async function errorOf(work: () => Promise<unknown>): Promise<unknown> {
  try {
    await work();
  } catch (err) {
    return err;
  }
  throw new Error('expected an error');
}

describe('isDatabaseUnavailable, on errors real servers give', () => {
  let admin: pg.Client;
  beforeAll(async () => {
    admin = new pg.Client({ connectionString: inject('adminDatabaseUrl') });
    await admin.connect();
  });
  afterAll(async () => admin?.end());

  const client = async () => {
    const c = new pg.Client({ connectionString: inject('adminDatabaseUrl') });
    c.on('error', () => undefined);
    await c.connect();
    return c;
  };

  it('is true for a connection refused, a proxy that closes at once, a terminated session and a write on a read-only server', async () => {
    const port = await freePort();
    const refused = await errorOf(() => new pg.Client({ host: '127.0.0.1', port, user: 'postgres' }).connect());
    expect((refused as { code?: string }).code ?? (refused as AggregateError).errors?.[0]?.code).toBe('ECONNREFUSED');

    // HAProxy with no primary up accepts the connection and closes it
    const closer = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => closer.listen(0, '127.0.0.1', resolve));
    const closed = await errorOf(() =>
      new pg.Client({ host: '127.0.0.1', port: (closer.address() as net.AddressInfo).port, user: 'postgres' }).connect(),
    );
    closer.close();

    const victim = await client();
    const pid = (await victim.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    const sleeping = errorOf(() => victim.query('select pg_sleep(10)'));
    await new Promise((r) => setTimeout(r, 100));
    await admin.query('select pg_terminate_backend($1)', [pid]);
    const terminated = await sleeping;
    expect((terminated as { code?: string }).code).toBe('57P01');

    const readOnly = await client();
    const demoted = await errorOf(() => readOnly.query('begin read only; create temporary table t (x int)'));
    await readOnly.end();
    expect((demoted as { code?: string }).code).toBe('25006');

    for (const err of [refused, closed, terminated, demoted]) expect(isDatabaseUnavailable(err)).toBe(true);
    // as a library wraps one
    expect(isDatabaseUnavailable(new Error('query failed', { cause: terminated }))).toBe(true);
  });

  it('is true for a connection the process has no file descriptor left for (EMFILE)', () => {
    // a process allowed 40 open files connects to the database until it cannot: the error as pg gives it
    const script =
      "import pg from 'pg'; const url = process.argv[1]; const held = [];" +
      'try { for (;;) { const c = new pg.Client({ connectionString: url }); await c.connect(); held.push(c); } }' +
      'catch (e) { console.log(JSON.stringify({ code: e.code, syscall: e.syscall, message: e.message })); process.exit(0); }';
    const out = execFileSync(
      'bash',
      ['-c', 'ulimit -n 40 && exec "$0" --input-type=module -e "$1" "$2"', process.execPath, script, inject('adminDatabaseUrl')],
      {
        encoding: 'utf8',
      },
    );
    const fields = JSON.parse(out) as { code: string; syscall: string; message: string };
    expect(fields.code).toBe('EMFILE');
    expect(isDatabaseUnavailable(Object.assign(new Error(fields.message), fields))).toBe(true);
  });

  it('is false for a statement the server refuses and for errors of our own', async () => {
    const c = await client();
    const syntax = await errorOf(() => c.query('selec 1'));
    const unique = await errorOf(() => c.query('create temporary table u (x int primary key); insert into u values (1), (1)'));
    const cast = await errorOf(() => c.query("select 'x'::uuid"));
    await c.end();
    for (const err of [syntax, unique, cast, new Error('boom'), new TypeError('x is undefined'), null, 'Connection terminated'])
      expect(isDatabaseUnavailable(err)).toBe(false);
  });
});

/**
 * A write that reaches a primary just demoted (a switchover: the server is read-only, 25006) is answered 503 with
 * Retry-After, as a connection lost is, never 500; reads go on; once the server takes writes the same request is
 * created. Made real by turning the harness's database read-only and ending its sessions.
 */
describe('a database that cannot take writes, over HTTP', () => {
  let h: Harness;
  let admin: pg.Client;
  let key: string;
  let name: string;
  beforeAll(async () => {
    h = await createHarness();
    key = (await h.createApp()).keys.write;
    name = new URL(h.databaseUrl).pathname.slice(1);
    admin = new pg.Client({ connectionString: h.databaseUrl.replace(`/${name}`, '/postgres') });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    await h?.close();
  });

  /** ALTER DATABASE … SET default_transaction_read_only, applied to new sessions: the harness's are ended. */
  const readOnly = async (on: boolean) => {
    await admin.query(`alter database ${name} ${on ? 'set default_transaction_read_only = on' : 'reset default_transaction_read_only'}`);
    await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);
    await new Promise((r) => setTimeout(r, 200));
  };
  const post = (alert: string) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(key), 'content-type': 'application/json', 'idempotency-key': alert },
      payload: { notification: { to: [{ name: 'user_id', criteria: ['u1'] }], payload: { alert } } },
    });

  it('answers 503 with Retry-After of 1 to 3 s, reads still 200, and 201 once writes are taken again', async () => {
    await readOnly(true);
    try {
      for (const attempt of ['first', 'second']) {
        const refused = await post('demoted');
        expect(refused.statusCode, attempt).toBe(503);
        expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(3);
        expect(refused.json()).toEqual({ error: expect.stringMatching(/^database: unavailable/) });
      }
      const read = await h.server.inject({ method: 'GET', url: '/v6/key', headers: { authorization: basic(key) } });
      expect(read.statusCode).toBe(200);
    } finally {
      await readOnly(false);
    }
    // the client's retry with the same Idempotency-Key: created once, now
    const created = await post('demoted');
    expect(created.statusCode).toBe(201);
    const { rows } = await h.db.pool.query<{ n: number }>(
      `select count(*)::int as n from notifications where payload->>'alert' = 'demoted'`,
    );
    expect(rows[0]!.n).toBe(1);
  });
});
