import { identityHash } from '../../src/domain/identity.js';
import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { DatabaseHandle } from '../../src/db/database.js';
import { LoadClients } from './load-clients.js';
import { LAB_ENV, startServices } from './stack.js';

/** Deterministic bytes for device i (the same fill every run), hex or base64url. */
const bytes = (i: number, salt: string, n: number) => createHash('sha256').update(`${salt}${i}`).digest().subarray(0, n);
const pick = <T>(i: number, list: readonly T[]) => list[i % list.length]!;

const LOCALES = ['en_US', 'en_GB', 'fr_FR', 'de_DE', 'es_ES', 'pt_BR', 'ja_JP', 'it_IT', 'nl_NL', 'pl_PL', 'sv_SE'];
const ZONES = ['America/New_York', 'Europe/London', 'Europe/Paris', 'Europe/Berlin', 'Europe/Madrid', 'America/Sao_Paulo', 'Asia/Tokyo'];
const COUNTRIES = ['us', 'gb', 'fr', 'de', 'es', 'br', 'jp', 'it', 'nl', 'pl', 'se'];
const TAGS = ['news', 'sports', 'deals', 'weather', 'music', 'travel', 'tech'];
const PLANS = ['free', 'plus', 'pro'];
const IOS_VERSIONS = ['17.5', '17.6.1', '18.0', '18.1'];
const ANDROID_VERSIONS = ['13', '14', '15'];
const APP_VERSIONS = ['4.2.0', '4.2.1', '4.3.0'];
const IOS_MODELS = ['iPhone15,2', 'iPhone16,1', 'iPhone14,5'];
const ANDROID_MODELS = ['Pixel 8', 'SM-S911B', 'moto g84'];

/**
 * What a phone's SDK sends when it registers (public-api-notes.md, The device SDKs): its token (an APNs token of
 * 32 bytes in hex, or an FCM registration token of about 160 characters), locale, time zone, country, OS and app
 * versions, model, a user id with the hash its backend gave it (identity verification), a few tags and custom
 * attributes of each type.
 */
export function registration(i: number, identitySecret: string): { device: Record<string, unknown> } {
  const ios = i % 2 === 0;
  return {
    device: {
      platform: ios ? 'ios' : 'android',
      token: registrationToken(i),
      locale: pick(i, LOCALES),
      time_zone: pick(i, ZONES),
      country: pick(i, COUNTRIES),
      os_name: ios ? 'iOS' : 'Android',
      os_version: ios ? pick(i, IOS_VERSIONS) : pick(i, ANDROID_VERSIONS),
      app_version: pick(i, APP_VERSIONS),
      sdk_version: ios ? '5.1.0' : '5.0.3',
      hardware_name: ios ? pick(i, IOS_MODELS) : pick(i, ANDROID_MODELS),
      badge: 0,
      user_id: `u${i}`,
      user_id_auth_hash: identityHash(identitySecret, `u${i}`),
      notifications_allowed: 'Enabled',
      tags: [pick(i, TAGS), pick(i + 3, TAGS)],
      custom: {
        plan: { type: 'string', value: pick(i, PLANS) },
        age: { type: 'integer', value: 18 + (i % 60) },
        score: { type: 'float', value: (i % 1000) / 10 },
        signed_up: { type: 'date', value: new Date(Date.UTC(2024, 0, 1) + (i % 700) * 86_400_000).toISOString() },
        newsletter: { type: 'boolean', value: i % 3 === 0 },
      },
    },
  };
}

/** Device i's push token as registration(i) sends it: an APNs token for an even i, an FCM registration token for an odd. */
export function registrationToken(i: number): string {
  if (i % 2 === 0) return bytes(i, 'apns', 32).toString('hex');
  const fcm = Buffer.concat([bytes(i, 'fcm-a', 32), bytes(i, 'fcm-b', 32), bytes(i, 'fcm-c', 32)]);
  return `${bytes(i, 'fcm-id', 16).toString('base64url')}:APA91b${fcm.toString('base64url')}`;
}

/**
 * Registers `count` devices through `POST /v6/devices` with the sdk key, as phones do, on a service started for
 * the fill and stopped after it: phones register over days, not in one burst from one address, so its sdk rate
 * limit and its admission control are off (the measured service keeps its own).
 */
export async function registerThroughApi(opts: {
  env: Record<string, string>;
  sdkKey: string;
  identitySecret: string;
  count: number;
  clients: number;
}): Promise<void> {
  const services = await startServices({ ...opts.env, ...LAB_ENV, MAX_QUEUE_DELAY_MS: '0' }, { mode: 'single' });
  const load = new LoadClients({
    base: services.base,
    authorization: `Basic ${Buffer.from(`:${opts.sdkKey}`).toString('base64')}`,
    clients: opts.clients,
  });
  try {
    const answers = await load.post(
      Array.from({ length: opts.count }, (_, i) => ({ path: '/v6/devices', body: registration(i, opts.identitySecret) })),
    );
    const refused = answers.statuses.filter((s) => s !== 200 && s !== 201).length;
    if (refused)
      throw new Error(
        `${refused} of ${opts.count} device registrations refused (status ${answers.statuses.find((s) => s !== 200 && s !== 201)})`,
      );
  } finally {
    await load.close();
    await services.stop();
  }
}

/** The PostgreSQL WAL bytes written while `work` ran (the server's, so nothing else should be writing). */
export async function walBytesDuring(db: DatabaseHandle, work: () => Promise<void>): Promise<number> {
  const lsn = async () => (await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(db.db)).rows[0]!.lsn;
  const before = await lsn();
  await work();
  const { rows } = await sql<{ bytes: string }>`select pg_wal_lsn_diff(${await lsn()}::pg_lsn, ${before}::pg_lsn)::text as bytes`.execute(
    db.db,
  );
  return Number(rows[0]!.bytes);
}

/** The lab's fill: bare rows (platform, token, user id) inserted by SQL, no attributes, tags or custom attributes. */
export async function insertBareDevices(db: DatabaseHandle, appId: string, count: number): Promise<void> {
  await sql`
    insert into devices (app_id, platform, token, user_id)
    select ${appId}::uuid, case when i % 2 = 0 then 'ios' else 'android' end, encode(sha256(int4send(i)), 'hex'), 'u' || i
    from generate_series(1, ${count}) as i`.execute(db.db);
}

/**
 * What shows whether two fills built the same tables: the rows of the devices and their attributes and tags, the
 * size of the devices' heap, and of each of its indexes (name without the devices_ prefix), in kB.
 */
export async function fillShape(db: DatabaseHandle): Promise<string> {
  const { rows } = await sql<{ devices: string; attributes: string; tags: string }>`
    select
      (select count(*) from devices)::text as devices,
      (select count(*) from device_attributes)::text as attributes,
      (select count(*) from device_tags)::text as tags`.execute(db.db);
  const { rows: sizes } = await sql<{ relation: string; kb: string }>`
    select c.relname as relation, (pg_relation_size(c.oid) / 1024)::text as kb
    from pg_class c
    where c.oid = 'devices'::regclass
      or c.oid in (select indexrelid from pg_index where indrelid = 'devices'::regclass)
    order by c.relkind desc, c.relname`.execute(db.db);
  const counts = rows[0]!;
  const size = (r: { relation: string; kb: string }) => `${r.relation.replace(/^devices_/, '')} ${r.kb}`;
  return (
    `${counts.devices} devices, ${counts.attributes} custom attribute rows, ${counts.tags} tag rows; ` +
    `kB: heap ${sizes[0]!.kb}, indexes ${sizes.slice(1).map(size).join(', ')}`
  );
}

/** The tables a registration writes, whose secondary indexes a bulk fill builds after its rows. */
const REGISTRY_TABLES = ['devices', 'device_tags', 'device_attributes'];

/**
 * registration(i) for every i in [0, count), written by SQL instead of through the API, `chunk` devices a
 * statement, `parallel` statements at a time; `progress` is told the devices written so far after each. The same
 * rows as registering through the API (test/bench/device-fill.test.ts holds it to that): devices (the installs
 * counted by their trigger), their tags and custom attributes; the address a phone registers from is one of
 * 198.18.0.0/15's. Built as a bulk load is: the secondary indexes of those tables dropped and made again after the
 * rows (the same definitions, built whole: denser than indexes grown by single inserts), the rows' foreign keys
 * not checked (they hold by construction), the tags written by the statement instead of by the per-row trigger.
 * For a benchmark's own database only: nothing else may write these tables meanwhile.
 */
export async function fillRegistrations(
  db: DatabaseHandle,
  appId: string,
  opts: { count: number; chunk: number; parallel: number; progress?: (written: number) => void },
): Promise<{ insertMs: number; indexMs: number }> {
  const { rows: indexes } = await sql<{ name: string; definition: string }>`
    select indexrelid::regclass::text as name, pg_get_indexdef(indexrelid) as definition
    from pg_index i
    where indrelid = any(${REGISTRY_TABLES}::regclass[])
      and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid)`.execute(db.db);
  const triggers = async (enable: boolean) => {
    const set = sql.raw(enable ? 'enable' : 'disable');
    await sql`alter table devices ${set} trigger devices_tags_inserted`.execute(db.db);
    for (const table of ['device_tags', 'device_attributes']) await sql`alter table ${sql.table(table)} ${set} trigger all`.execute(db.db);
  };
  for (const index of indexes) await sql`drop index ${sql.raw(index.name)}`.execute(db.db);
  await triggers(false);
  const t0 = performance.now();
  try {
    let next = 0;
    let written = 0;
    const lane = async () => {
      while (next < opts.count) {
        const from = next;
        const to = (next = Math.min(opts.count, next + opts.chunk));
        await insertRegistrations(db, appId, from, to);
        written += to - from;
        opts.progress?.(written);
      }
    };
    await Promise.all(Array.from({ length: opts.parallel }, lane));
  } finally {
    await triggers(true);
  }
  const t1 = performance.now();
  // the indexes built two at a time, each with the memory a bulk build takes
  const pending = [...indexes];
  const build = async () => {
    for (let index = pending.shift(); index; index = pending.shift()) {
      const definition = index.definition;
      await db.db.connection().execute(async (conn) => {
        await sql`set maintenance_work_mem = '512MB'`.execute(conn);
        await sql.raw(definition).execute(conn);
        await sql`reset maintenance_work_mem`.execute(conn);
      });
    }
  };
  await Promise.all([build(), build()]);
  return { insertMs: t1 - t0, indexMs: performance.now() - t1 };
}

/** registration(i) for every i in [from, to): one statement, the tags written by it (their trigger is off). */
async function insertRegistrations(db: DatabaseHandle, appId: string, from: number, to: number): Promise<void> {
  const sha = (salt: string) => sql`sha256(convert_to(${salt} || i, 'UTF8'))`;
  // base64url without padding, as Buffer's; PostgreSQL's base64 breaks lines every 76 characters
  const base64url = (bytes: ReturnType<typeof sql>) => sql`rtrim(translate(encode(${bytes}, 'base64'), E'+/\\n', '-_'), '=')`;
  const pickOf = (list: readonly string[], offset = 0) => sql`(${list}::text[])[1 + (i + ${offset}::int) % ${list.length}::int]`;
  await sql`
    with registered as (
      insert into devices (app_id, platform, token, locale, time_zone, country, os_name, os_version, app_version, sdk_version,
                           marketing_name, badge, user_id, notifications_allowed, tags, ip_address, credential_hash)
      select ${appId}::uuid,
        case when i % 2 = 0 then 'ios' else 'android' end,
        case when i % 2 = 0 then encode(${sha('apns')}, 'hex')
          else ${base64url(sql`substring(${sha('fcm-id')} from 1 for 16)`)} || ':APA91b' ||
            ${base64url(sql`${sha('fcm-a')} || ${sha('fcm-b')} || ${sha('fcm-c')}`)} end,
        ${pickOf(LOCALES)}, ${pickOf(ZONES)}, upper(${pickOf(COUNTRIES)}),
        case when i % 2 = 0 then 'iOS' else 'Android' end,
        case when i % 2 = 0 then ${pickOf(IOS_VERSIONS)} else ${pickOf(ANDROID_VERSIONS)} end,
        ${pickOf(APP_VERSIONS)},
        case when i % 2 = 0 then '5.1.0' else '5.0.3' end,
        case when i % 2 = 0 then ${pickOf(IOS_MODELS)} else ${pickOf(ANDROID_MODELS)} end,
        0, 'u' || i, 'Enabled', array[${pickOf(TAGS)}, ${pickOf(TAGS, 3)}],
        inet '198.18.0.0' + i % 131072,
        -- the hash of the credential a registration answers: random there, as large here
        ${sha('credential')}
      from generate_series(${from}::int, ${to - 1}::int) as i
      returning id, tags, substring(user_id from 2)::int as i),
    tagged as (
      -- what the devices' tag trigger writes for a new device
      insert into device_tags (device_id, app_id, tag)
      select distinct r.id, ${appId}::uuid, t from registered r, unnest(r.tags) as t)
    insert into device_attributes (device_id, app_id, name, type, str_value, num_value, date_value, bool_value)
    select r.id, ${appId}::uuid, a.name, a.type, a.str_value, a.num_value, a.date_value, a.bool_value
    from registered r, lateral (values
      ('age', 'integer', null, (18 + r.i % 60)::float8, null::timestamptz, null::boolean),
      ('newsletter', 'boolean', null, null, null, r.i % 3 = 0),
      ('plan', 'string', (${PLANS}::text[])[1 + r.i % ${PLANS.length}::int], null, null, null),
      ('score', 'float', null, (r.i % 1000)::float8 / 10, null, null),
      ('signed_up', 'date', null, null, timestamptz '2024-01-01 00:00:00+00' + (r.i % 700) * interval '1 day', null)
    ) as a(name, type, str_value, num_value, date_value, bool_value)`.execute(db.db);
}
