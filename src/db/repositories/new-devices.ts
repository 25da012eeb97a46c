import { sql } from 'kysely';
import type { Db } from '../database.js';
import type { Device, NewDevice } from '../schema.js';
import type { CustomChanges } from '../../domain/device-input.js';
import { ShapedStatements } from '../shaped-statements.js';
import { attributeRows, byNameAndPosition, tokenLockName, type AttributeColumns, type DeviceAttributeRow } from './device-queries.js';

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
  private readonly shaped = new ShapedStatements();

  /**
   * Each device in one statement that takes its token's lock (`lockToken`) before the device's row is inserted, as
   * `DevicesRepository.insertNewToken` does for one, but only if the lock is free: a group never waits for one phone's
   * lock (nor deadlocks with another group). Undefined for a device whose lock was held, whose token another device got
   * meanwhile (the unique index skips its row), or that an earlier one of the group also registers: the locked way
   * decides for those.
   */
  async insertNewTokens(db: Db, devices: readonly NewTokenDevice[]): Promise<(StoredNewDevice | undefined)[]> {
    const answers: (StoredNewDevice | undefined)[] = devices.map(() => undefined);
    const first = new Map<string, number>();
    const byShape = new Map<string, NewTokenDevice[]>();
    devices.forEach((d, i) => {
      const lock = lockOf(d.values.app_id, d.values.token);
      if (first.has(lock)) return;
      first.set(lock, i);
      const shape = shapeOf(d.values);
      byShape.set(shape, [...(byShape.get(shape) ?? []), d]);
    });
    for (const [shape, group] of byShape) {
      for (const s of await this.insertShape(db, shape, group)) {
        const index = first.get(lockOf(s.device.app_id, s.device.token!));
        if (index === undefined) throw new Error('a new device stored without a registration of its token');
        answers[index] = s;
      }
    }
    return answers;
  }

  /** Devices that give the same columns, in one statement compiled once for those columns. */
  private async insertShape(db: Db, shape: string, devices: NewTokenDevice[]): Promise<StoredNewDevice[]> {
    const columns = shape.split(',').filter((c) => c !== '');
    const rows = devices.map((d) => ({
      lock: lockOf(d.values.app_id, d.values.token),
      device: jsonReady(d.values),
      // the device's ids come from its row as inserted
      attributes: [...d.changes]
        .flatMap(([name, attr]) => attributeRows('', '', name, attr))
        .map(({ device_id: _deviceId, app_id: _appId, ...a }) => jsonReady(a)),
    }));
    const query = this.shaped.query(
      db,
      `insertNewTokens ${shape}`,
      (b) => b.slot(JSON.stringify(rows)),
      (json) => newDevicesInsert(columns, json),
    );
    const { rows: stored } = await db.executeQuery(query);
    return devicesAndAttributes(stored);
  }
}

/** The token's lock name (tokenLockName) as a parameter sends it, and so as the stored token gives it. */
function lockOf(appId: string, token: string): string {
  return wellFormed(tokenLockName(appId, token)) as string;
}

/** The rows read from the JSON with the devices' own column types (jsonb_populate_record), each inserted once locked. */
function newDevicesInsert(columns: string[], json: string) {
  const into = sql.join(columns.map((c) => sql.ref(c)));
  const from = sql.join(columns.map((c) => sql.ref(`v.${c}`)));
  return sql<Device & Partial<AttributeColumns>>`
    with v as materialized (
      select r.value ->> 'lock' as lock, r.value -> 'attributes' as attributes, d.*
      from jsonb_array_elements(${json}::jsonb) as r(value)
      cross join jsonb_populate_record(null::devices, r.value -> 'device') as d
    ),
    device as (
      insert into devices (app_id, ${into})
      select v.app_id, ${from}
      from v
      where pg_try_advisory_xact_lock(hashtextextended(v.lock, 0))
      on conflict do nothing
      returning *
    ),
    attribute as (
      insert into device_attributes (device_id, app_id, name, type, position, is_array, str_value, num_value, date_value, bool_value)
      select device.id, device.app_id, a.name, a.type, a.position, a.is_array, a.str_value, a.num_value, a.date_value, a.bool_value
      from device
      join v on v.app_id = device.app_id and v.token = device.token
      cross join jsonb_populate_recordset(null::device_attributes, v.attributes) as a
      returning device_id, name, type, position, is_array, str_value, num_value, date_value, bool_value
    )
    select device.*, a.name as a_name, a.type as a_type, a.position as a_position, a.is_array as a_is_array,
      a.str_value as a_str_value, a.num_value as a_num_value, a.date_value as a_date_value, a.bool_value as a_bool_value
    from device
    left join attribute as a on a.device_id = device.id`;
}

/** The columns a device gives besides its app id, in order: what the statement's text depends on. */
function shapeOf(values: NewDevice): string {
  let keys = '';
  for (const key in values) if (key !== 'app_id' && values[key as keyof NewDevice] !== undefined) keys += `${key},`;
  return keys;
}

/**
 * A row as its column types read it from JSON: bytes as bytea's hex text, and text as the UTF-8 a parameter sends (a
 * lone surrogate as U+FFFD, which JSON would keep as an escape PostgreSQL refuses).
 */
function jsonReady(row: object): Record<string, unknown> {
  const ready: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) {
    if (value === undefined) continue;
    ready[key] = Buffer.isBuffer(value) ? `\\x${value.toString('hex')}` : wellFormed(value);
  }
  return ready;
}

const SURROGATE = /[\uD800-\uDFFF]/;

function wellFormed(value: unknown): unknown {
  if (typeof value === 'string') return SURROGATE.test(value) ? Buffer.from(value, 'utf8').toString('utf8') : value;
  if (Array.isArray(value)) return value.map(wellFormed);
  return value;
}

/** The joined rows (each device beside each of its attributes, or beside none) as each device and its attributes. */
function devicesAndAttributes(rows: (Device & Partial<AttributeColumns>)[]): StoredNewDevice[] {
  const stored = new Map<string, StoredNewDevice>();
  for (const row of rows) {
    const { a_name, a_type, a_position, a_is_array, a_str_value, a_num_value, a_date_value, a_bool_value, ...device } = row;
    let entry = stored.get(device.id);
    if (!entry) stored.set(device.id, (entry = { device, attributes: [] }));
    if (a_name == null) continue;
    entry.attributes.push({
      device_id: device.id,
      app_id: device.app_id,
      name: a_name,
      type: a_type!,
      position: a_position!,
      is_array: a_is_array!,
      str_value: a_str_value ?? null,
      num_value: a_num_value ?? null,
      date_value: a_date_value ?? null,
      bool_value: a_bool_value ?? null,
    });
  }
  for (const entry of stored.values()) entry.attributes.sort(byNameAndPosition);
  return [...stored.values()];
}
