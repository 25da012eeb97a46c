import { CompiledQuery, sql } from 'kysely';
import type { Db } from '../database.js';
import type { Device, NewDevice } from '../schema.js';
import type { CustomChanges } from '../../domain/device-input.js';
import { attributeArrays, attributeRows, byNameAndPosition, tokenLockName, type DeviceAttributeRow } from './device-queries.js';

/** A phone's new device for a token its app had no device with a moment ago, and its custom attributes. */
export interface NewTokenDevice {
  values: NewDevice & { token: string };
  changes: CustomChanges;
}

/** A new device as PostgreSQL stored it, with its attributes in the order `attributesOf` reads them. */
export interface StoredNewDevice {
  device: Device;
  attributes: DeviceAttributeRow[];
}

/**
 * The new devices of registrations that arrived together, each with its attributes, written by one statement for
 * all of them instead of one each: the statement, its trigger of the installs counted and its commit are shared, which
 * took PostgreSQL 0.25 ms of CPU a device in groups of 20 against 0.9 ms alone.
 */
export class NewDevicesRepository {
  private statement: string | null = null;

  /**
   * Each device in one statement that takes its token's lock (`lockToken`) before the device's row is inserted, as
   * `DevicesRepository.insertNewToken` does for one, but only if the lock is free: a group never waits for one phone's
   * lock (nor deadlocks with another group). Undefined for a device whose lock was held, whose token another device got
   * meanwhile (the unique index skips its row), or that an earlier one of the group also registers: the locked way
   * decides for those. One statement whatever columns each device gives, so its installs counters are locked in the
   * trigger's one order (two statements of one transaction could lock them against another's order).
   */
  async insertNewTokens(db: Db, devices: readonly NewTokenDevice[]): Promise<(StoredNewDevice | undefined)[]> {
    const first = new Map<string, number>();
    const rows: { lock: string; device: Record<string, unknown> }[] = [];
    // each attribute row beside its device's place (1-based) in the JSON
    const places: number[] = [];
    const attributes: ReturnType<typeof attributeRows> = [];
    const ownAttributes: ReturnType<typeof attributeRows>[] = [];
    devices.forEach((d, i) => {
      const lock = lockOf(d.values.app_id, d.values.token);
      if (first.has(lock)) return;
      first.set(lock, i);
      rows.push({ lock, device: jsonReady(d.values) });
      const own = [...d.changes].flatMap(([name, attr]) => attributeRows('', '', name, attr));
      ownAttributes[i] = own;
      attributes.push(...own);
      places.push(...own.map(() => rows.length));
    });
    const a = attributeArrays(attributes);
    const query = CompiledQuery.raw((this.statement ??= newDevicesInsert().compile(db).sql), [
      JSON.stringify(rows),
      places,
      ...[a.name, a.type, a.position, a.is_array, a.str_value, a.num_value, a.date_value, a.bool_value],
    ]);
    const { rows: stored } = await db.executeQuery<Device>(query);
    const answers: (StoredNewDevice | undefined)[] = devices.map(() => undefined);
    for (const device of stored) {
      const index = first.get(lockOf(device.app_id, device.token!));
      if (index === undefined) throw new Error('a new device stored without a registration of its token');
      answers[index] = { device, attributes: storedAttributes(device, ownAttributes[index]!) };
    }
    return answers;
  }
}

/** The token's lock name (tokenLockName) as a parameter sends it, and so as the stored token gives it. */
function lockOf(appId: string, token: string): string {
  return wellFormed(tokenLockName(appId, token)) as string;
}

/**
 * What a device does not give, as the table's defaults give it (every column with a default is NOT NULL, so a device
 * never gives null for one): jsonb_populate_record fills from the JSON the device's own keys only.
 */
const DEVICE_DEFAULTS = sql`jsonb_build_object('id', gen_random_uuid(), 'development', false, 'tags', '{}'::text[],
  'created_at', now(), 'registered_at', now(), 'credential_held', false)`;

/**
 * The devices read from the JSON ($1) with their own column types, each inserted once its lock is taken, and their
 * attributes from columns of arrays ($2 their devices' places in the JSON, $3–$10 as `attributeArrays` lays them out).
 */
function newDevicesInsert() {
  const [json, ord, name, type, position, isArray, str, num, date, bool] = Array.from({ length: 10 }, (_, i) => sql.raw(`$${i + 1}`));
  return sql`
    with v as materialized (
      select r.ord, r.value ->> 'lock' as lock, jsonb_populate_record(null::devices, ${DEVICE_DEFAULTS} || (r.value -> 'device')) as d
      from jsonb_array_elements(${json}::jsonb) with ordinality as r(value, ord)
    ),
    device as (
      insert into devices
      select (v.d).* from v
      where pg_try_advisory_xact_lock(hashtextextended(v.lock, 0))
      on conflict (app_id, pushd_token_key(token)) where token is not null do nothing
      returning *
    ),
    attribute as (
      insert into device_attributes (device_id, app_id, name, type, position, is_array, str_value, num_value, date_value, bool_value)
      select device.id, device.app_id, a.name, a.type, a.position, a.is_array, a.str_value, a.num_value, a.date_value, a.bool_value
      from device
      join v on (v.d).app_id = device.app_id and (v.d).token = device.token
      join unnest(${ord}::int8[], ${name}::text[], ${type}::text[], ${position}::int2[], ${isArray}::bool[], ${str}::text[],
                  ${num}::float8[], ${date}::timestamptz[], ${bool}::bool[])
        as a(ord, name, type, position, is_array, str_value, num_value, date_value, bool_value) on a.ord = v.ord
    )
    select device.* from device`;
}

/**
 * A row as its column types read it from JSON: bytes as bytea's hex text, and text as the UTF-8 a parameter sends (a
 * lone surrogate as U+FFFD, which JSON would keep as an escape PostgreSQL refuses).
 */
export function jsonReady(row: object): Record<string, unknown> {
  const ready: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) {
    if (value === undefined) continue;
    ready[key] = Buffer.isBuffer(value) ? `\\x${value.toString('hex')}` : wellFormed(value);
  }
  return ready;
}

const SURROGATE = /[\uD800-\uDFFF]/;

export function wellFormed(value: unknown): unknown {
  if (typeof value === 'string') return SURROGATE.test(value) ? Buffer.from(value, 'utf8').toString('utf8') : value;
  if (Array.isArray(value)) return value.map(wellFormed);
  return value;
}

/**
 * A new device's attributes as the statement stored them: the rows it was sent, in `attributesOf`'s order, their text
 * as a parameter sends it. Each device's rows are inserted by the statement that inserts it, so they are not read back.
 */
function storedAttributes(device: Device, sent: ReturnType<typeof attributeRows>): DeviceAttributeRow[] {
  return sent
    .map((r) => ({
      ...r,
      device_id: device.id,
      app_id: device.app_id,
      name: wellFormed(r.name) as string,
      str_value: wellFormed(r.str_value) as string | null,
    }))
    .sort(byNameAndPosition);
}
