import path from 'node:path';
import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database.js';
import { migrate } from '../../src/db/migrate.js';
import { AppService } from '../../src/services/apps.js';
import { createRepositories } from '../../src/services/deps.js';
import { testKeyring } from '../engines/secrets-key.js';
import { redisUrl } from '../helpers/harness.js';
import { ApnsMock, FcmMock, generateApnsKey, generateServiceAccount } from '../mocks/index.js';
import { freePort, freshDatabase, ROOT } from './proc.js';

/**
 * What a system test of a broadcast runs against: counting mock gateways (pushes per token in `received`), a fresh
 * migrated database with an app whose credentials they accept and `devices` bulk-inserted devices (half iOS, half
 * Android), and the environment that points compiled processes at them on Redis. `cleanups` undo it, in reverse.
 * `record`: the mocks also keep each push (its payload), for a test small enough to hold them.
 */
export async function broadcastWorld(
  bundle: string,
  devices: number,
  cleanups: (() => Promise<unknown>)[],
  opts: { record?: boolean } = {},
) {
  const apnsKey = generateApnsKey();
  const account = generateServiceAccount();
  // Counting only by default: recording every push with its headers would take a large test's memory.
  const record = opts.record ?? false;
  const apns = (await ApnsMock.start({ record, topic: bundle })).addKey(apnsKey);
  const fcm = (await FcmMock.start({ record })).addServiceAccount(account);
  cleanups.push(
    () => apns.close(),
    () => fcm.close(),
  );
  const received = new Map<string, number>();
  apns.onAccept = fcm.onAccept = (token) => received.set(token, (received.get(token) ?? 0) + 1);

  const database = await freshDatabase();
  cleanups.push(() => database.drop());
  const handle = openDatabase(database.url);
  cleanups.push(() => handle.close());
  await migrate(handle.pool);
  const apps = new AppService({ db: handle.db, secrets: testKeyring(), repos: createRepositories() });
  const { app, keys } = await apps.createApp(bundle);
  await apps.setPushCredentials(app.id, 'apns', apnsKey.credentials);
  await apps.setPushCredentials(app.id, 'fcm', account.json);
  await sql`
    insert into devices (app_id, platform, token)
    select ${app.id}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex')
    from generate_series(1, ${devices}) as i`.execute(handle.db);
  await sql`analyze devices`.execute(handle.db);

  const port = await freePort();
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL: redisUrl()!,
    QUEUE_PREFIX: `${bundle.replace(/\W/g, '')}${port}`,
    APNS_ORIGIN_PRODUCTION: apns.origin,
    APNS_ORIGIN_SANDBOX: apns.origin,
    FCM_ORIGIN: fcm.origin,
    GOOGLE_TOKEN_URL: fcm.tokenUrl,
    NODE_EXTRA_CA_CERTS: path.join(ROOT, 'test/fixtures/tls/ca.pem'),
    RATE_LIMIT_PER_SECOND: '0',
  };
  return { apns, fcm, received, handle, app, keys, port, env };
}
