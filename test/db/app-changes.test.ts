import net from 'node:net';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AppChanges, appChangesApplicationName, type FollowedCache } from '../../src/db/app-changes.js';
import { createLogger } from '../../src/platform/logger.js';
import { useHarness } from '../helpers/harness.js';
import { waitFor } from '../helpers/gateways.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The caches of API keys and push credentials: values are served from memory only while this process hears every
 * committed change to keys and credentials (the tables' triggers announce them), whoever commits it.
 */
describe('caches that follow the changes to keys and credentials', () => {
  const h = useHarness();
  let changes: AppChanges;
  let cache: FollowedCache<string, string>;
  let reads: number;
  const read = () =>
    cache.get('k', async () => {
      reads += 1;
      return `value ${reads}`;
    });
  /** Reads until the cache reads the database again (a change was heard), or fails after 5 s. */
  const untilReadAgain = async () => {
    const before = reads;
    await waitFor('the cache to be emptied', async () => (await read(), reads > before), 5000, 10);
  };
  let appId: string;

  beforeEach(async () => {
    // first: making an app commits changes to it (the harness turns identity verification off), unheard from here
    appId = (await h.createApp()).app.id;
    changes = new AppChanges(h.databaseUrl, createLogger('silent'));
    await changes.start();
    cache = changes.cache();
    reads = 0;
  });
  afterEach(() => changes.close());

  it('keeps what it read while it listens', async () => {
    expect(changes.following).toBe(true);
    expect(await read()).toBe('value 1');
    expect(await read()).toBe('value 1');
    expect(reads).toBe(1);
  });

  it("is emptied by a change to keys or apps' credentials or limits another connection commits, not by the apps' pacing", async () => {
    await read();
    await sql`update api_keys set rate_limit_per_second = 3, rate_limit_burst = 3 where app_id = ${appId}::uuid`.execute(h.db.db);
    await untilReadAgain();

    // a change that nothing caches: an announcement would come within milliseconds
    await sql`update apps set pace_next_at = now() where id = ${appId}::uuid`.execute(h.db.db);
    const before = reads;
    await sleep(300);
    await read();
    expect(reads).toBe(before);

    const sealed = h.secrets.seal('{}', 'apns_credentials');
    await sql`update apps set apns_credentials = ${sealed} where id = ${appId}::uuid`.execute(h.db.db);
    await untilReadAgain();
    await sql`update apps set max_per_minute = 60 where id = ${appId}::uuid`.execute(h.db.db);
    await untilReadAgain();
    await sql`update apps set default_time_zone = 'Europe/Paris' where id = ${appId}::uuid`.execute(h.db.db);
    await untilReadAgain();
    await sql`update api_keys set revoked_at = now() where app_id = ${appId}::uuid`.execute(h.db.db);
    await untilReadAgain();
    await sql`delete from apps where id = ${appId}::uuid`.execute(h.db.db);
    await untilReadAgain();
  });

  it('reads the keys it does not keep with one load, and keeps what that load found', async () => {
    const many = changes.cache<string, number>();
    const loads: string[][] = [];
    const load = async (missing: string[]) => {
      loads.push(missing);
      return new Map(missing.filter((k) => k !== 'absent').map((k) => [k, k.length] as const));
    };
    expect(await many.getMany(['a', 'bb', 'a'], load)).toEqual(
      new Map([
        ['a', 1],
        ['bb', 2],
      ]),
    );
    expect(await many.getMany(['a', 'ccc', 'absent'], load)).toEqual(
      new Map([
        ['a', 1],
        ['ccc', 3],
      ]),
    );
    expect(await many.getMany(['bb', 'ccc'], load)).toEqual(
      new Map([
        ['bb', 2],
        ['ccc', 3],
      ]),
    );
    expect(loads).toEqual([
      ['a', 'bb'],
      ['ccc', 'absent'],
    ]);

    await sql`update apps set max_per_minute = 5 where id = ${appId}::uuid`.execute(h.db.db);
    await waitFor('the change to be heard', async () => (await many.getMany(['a', 'bb'], load), loads.length > 2), 5000, 10);
    expect(loads[2]).toEqual(['a', 'bb']);
  });

  it('a change not committed is not heard', async () => {
    await read();
    await h.db.db
      .transaction()
      .execute(async (trx) => {
        await sql`update api_keys set revoked_at = now() where app_id = ${appId}::uuid`.execute(trx);
        await sleep(300);
        await read();
        expect(reads).toBe(1);
        throw new Error('rolled back');
      })
      .catch((err: Error) => expect(err.message).toBe('rolled back'));
    await sleep(300);
    await read();
    expect(reads).toBe(1);
  });

  it('keeps nothing read before a change it heard meanwhile, nor an undefined value', async () => {
    const overtaken = await cache.get('k', async () => {
      changes.changed();
      return 'read before the change';
    });
    expect(overtaken).toBe('read before the change');
    expect(await read()).toBe('value 1');

    let absent = 0;
    const none = () => cache.get('missing', async () => ((absent += 1), undefined));
    expect(await none()).toBeUndefined();
    expect(await none()).toBeUndefined();
    expect(absent).toBe(2);
  });

  it('reads from the database while its connection is lost, and keeps values again once it listens anew', async () => {
    await read();
    // this test's connection and the harness server's: both reconnect
    const { rows } = await sql<{ ended: boolean }>`
      select pg_terminate_backend(pid) as ended from pg_stat_activity
      where datname = current_database() and application_name = ${appChangesApplicationName(h.databaseUrl)}`.execute(h.db.db);
    expect(rows.length).toBeGreaterThanOrEqual(1);
    await waitFor('the connection loss to be noticed', async () => !changes.following, 5000, 10);
    const before = reads;
    await read();
    await read();
    expect(reads).toBe(before + 2);

    await waitFor('it to listen again', async () => changes.following, 10_000, 20);
    await read();
    await read();
    expect(reads).toBe(before + 3);
    // and it hears again
    await sql`update api_keys set rate_limit_per_second = null, rate_limit_burst = null where app_id = ${appId}::uuid`.execute(h.db.db);
    await untilReadAgain();
  });

  /**
   * A NAT in front of the database that can forget the connections it carries (`freeze`): nothing more passes
   * them, and nobody is told.
   */
  const natProxy = async () => {
    const carried: net.Socket[] = [];
    let frozen = new Set<net.Socket>();
    const target = new URL(h.databaseUrl);
    // half-open allowed: a forgotten connection's end is not answered either
    const proxy = net.createServer({ allowHalfOpen: true }, (downstream) => {
      const upstream = net.connect({ port: Number(target.port || 5432), host: target.hostname, allowHalfOpen: true });
      for (const [from, to] of [
        [downstream, upstream],
        [upstream, downstream],
      ] as const) {
        from.on('data', (chunk) => void (frozen.has(from) || to.write(chunk)));
        from.on('end', () => void (frozen.has(from) || to.end()));
        from.on('error', () => to.destroy());
        from.on('close', () => to.destroy());
      }
      carried.push(downstream, upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const url = new URL(h.databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String((proxy.address() as net.AddressInfo).port);
    return {
      url: url.toString(),
      freeze: () => void (frozen = new Set(carried)),
      close: async () => {
        for (const socket of carried) socket.destroy();
        await new Promise((r) => proxy.close(r));
      },
    };
  };

  it('gives up a connection that stops answering without closing, within one and a half heartbeats, and listens anew', async () => {
    const nat = await natProxy();
    const behindNat = new AppChanges(nat.url, createLogger('silent'), 400);
    try {
      await behindNat.start();
      const natCache = behindNat.cache<string, number>();
      let natReads = 0;
      const natRead = () => natCache.get('k', async () => (natReads += 1));
      await natRead();
      await natRead();
      expect(natReads).toBe(1);

      nat.freeze();
      await waitFor('the silent connection to be given up', async () => !behindNat.following, 5000, 20);
      await natRead();
      expect(natReads).toBe(2);
      await waitFor('it to listen again on a new connection', async () => behindNat.following, 10_000, 20);
    } finally {
      await behindNat.close();
      await nat.close();
    }
  });

  it('closes without waiting for a connection that died unnoticed', async () => {
    const nat = await natProxy();
    // heartbeats far apart: the connection is still taken for alive when it closes
    const behindNat = new AppChanges(nat.url, createLogger('silent'), 60_000);
    try {
      await behindNat.start();
      expect(behindNat.following).toBe(true);
      nat.freeze();
      const closing = Date.now();
      await behindNat.close();
      expect(Date.now() - closing).toBeLessThan(3000);
    } finally {
      await nat.close();
    }
  });

  it('gives up a server that takes the connection and never answers', async () => {
    // a TCP peer that accepts and then says nothing: the startup (and a Terminate on close) is never answered
    const held: net.Socket[] = [];
    const mute = net.createServer((socket) => void held.push(socket));
    await new Promise<void>((r) => mute.listen(0, '127.0.0.1', r));
    const url = new URL(h.databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String((mute.address() as net.AddressInfo).port);
    const unanswered = new AppChanges(url.toString(), createLogger('silent'), 400);
    try {
      const started = Date.now();
      await unanswered.start();
      expect(Date.now() - started).toBeLessThan(3000);
      expect(unanswered.following).toBe(false);
      const unheard = unanswered.cache<string, number>();
      let n = 0;
      await unheard.get('k', async () => (n += 1));
      await unheard.get('k', async () => (n += 1));
      expect(n).toBe(2);
    } finally {
      await unanswered.close();
      for (const socket of held) socket.destroy();
      await new Promise((r) => mute.close(r));
    }
  });

  it('after close, keeps nothing', async () => {
    await changes.close();
    await read();
    await read();
    expect(reads).toBe(2);
  });
});
