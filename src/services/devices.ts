import type { Transaction } from 'kysely';
import type { Db } from '../db/database.js';
import type { DeviceAttributeRow, DevicesRepository } from '../db/repositories/devices.js';
import type { DeviceEventRow, EventsRepository } from '../db/repositories/events.js';
import type { Database, Device, DeviceUpdate, KeyRole, NewDevice } from '../db/schema.js';
import {
  admitAttributes,
  aggregateEvents,
  parseCustomAttributes,
  parseDeviceInput,
  parseEvents,
  type CustomChanges,
  type DeviceFields,
  type Dropped,
} from '../domain/device-input.js';
import { ErasedError, NotFoundError } from '../domain/errors.js';
import { storableIp, type GeoIp } from '../platform/geoip.js';
import type { IdempotencyKeys, IdempotentRequest, Replay } from './idempotency.js';

/** Devices one DELETE /users/:id/devices call erases at most (as the public API does). */
export const USER_ERASE_LIMIT = 10;

/** A device with its custom attributes and event aggregates. */
export interface DeviceDetails {
  device: Device;
  attributes: DeviceAttributeRow[];
  events: DeviceEventRow[];
}

/** Who is calling: the key's role decides the event source and whether the IP is the phone's. */
export interface Caller {
  role: KeyRole;
  ip: string | null;
}

/** What a request wrote: the device fields it set and the custom attributes it set or removed. */
export interface Written {
  fields: (keyof DeviceFields)[];
  custom: string[];
}

export type WriteResult =
  | { kind: 'stored'; details: DeviceDetails; created: boolean; written: Written; dropped: Dropped[] }
  | { kind: 'nothing-valid'; dropped: Dropped[] };
export type UserWriteResult = { kind: 'stored'; deviceCount: number; dropped: Dropped[] } | { kind: 'nothing-valid'; dropped: Dropped[] };

/** Devices, their custom attributes and events, users (the devices sharing a user_id), audience listings. */
export class DeviceService {
  constructor(
    private readonly db: Db,
    private readonly devices: DevicesRepository,
    private readonly events: EventsRepository,
    private readonly geoip: GeoIp,
    private readonly idempotency: IdempotencyKeys,
  ) {}

  /** POST /devices: a new device, or the one that already has this token (then merged like an update). */
  async register(
    appId: string,
    raw: Record<string, unknown>,
    caller: Caller,
    idempotency?: IdempotentRequest<WriteResult>,
  ): Promise<WriteResult | Replay> {
    const input = parseDeviceInput(raw, 'create');
    const net = await this.network(caller, input.fields);
    return this.db.transaction().execute(async (trx) => {
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      const set = columns(input.fields, net);
      const values: NewDevice = { ...set, app_id: appId, platform: input.fields.platform!, country: input.fields.country ?? net.country };
      let device: Device;
      let created = true;
      if (typeof input.fields.token === 'string') {
        await this.devices.lockToken(trx, appId, input.fields.token);
        const update = { ...set, token_invalidated_at: null, token_invalid_reason: null };
        ({ device, inserted: created } = await this.devices.upsertByToken(
          trx,
          { ...values, token: input.fields.token },
          update,
          net.country,
        ));
      } else {
        device = await this.devices.insert(trx, values);
      }
      const existing = created ? [] : await this.devices.attributeNames(trx, device.id);
      const { admitted, dropped } = admitAttributes(existing, input.custom);
      await this.devices.replaceAttributes(trx, appId, device.id, admitted);
      const result: WriteResult = {
        kind: 'stored',
        details: await this.details(trx, device),
        created,
        written: written(input.fields, admitted),
        dropped: [...input.dropped, ...dropped],
      };
      await this.idempotency.store(trx, appId, idempotency, result);
      return result;
    });
  }

  /** PUT /devices/:id: merges the given fields; custom attributes key by key, null removing one. */
  async update(appId: string, id: string, raw: Record<string, unknown>, caller: Caller): Promise<WriteResult> {
    const input = parseDeviceInput(raw, 'update');
    const net = await this.network(caller, input.fields);
    return this.db.transaction().execute(async (trx) => {
      if (typeof input.fields.token === 'string') await this.devices.lockTokenMove(trx, appId, input.fields.token, id);
      const current = await this.lockLive(trx, appId, id, 'update');
      const { admitted, dropped: over } = admitAttributes(await this.devices.attributeNames(trx, id), input.custom);
      const dropped = [...input.dropped, ...over];
      if (Object.keys(input.fields).length === 0 && admitted.size === 0) return { kind: 'nothing-valid', dropped };

      const set = columns(input.fields, net);
      if (typeof input.fields.token === 'string') {
        Object.assign(set, { token_invalidated_at: null, token_invalid_reason: null });
        if (input.fields.token !== current.token) await this.devices.releaseToken(trx, appId, input.fields.token, id);
      }
      const device = await this.devices.update(trx, id, set, net.country);
      await this.devices.replaceAttributes(trx, appId, id, admitted);
      return {
        kind: 'stored',
        details: await this.details(trx, device),
        created: false,
        written: written(input.fields, admitted),
        dropped,
      };
    });
  }

  async get(appId: string, id: string): Promise<DeviceDetails> {
    const device = await this.devices.findForApp(this.db, appId, id);
    if (!device) throw new NotFoundError('device');
    return this.details(this.db, device);
  }

  /** Empties the device (attributes and events too) and marks it erased; erasing twice is harmless. */
  async erase(appId: string, id: string): Promise<DeviceDetails> {
    return this.db.transaction().execute(async (trx) => {
      const current = await this.devices.lock(trx, appId, id, 'update');
      if (!current) throw new NotFoundError('device');
      if (current.erased_at) return this.details(trx, current);
      return this.details(trx, await this.devices.erase(trx, id));
    });
  }

  /**
   * DELETE /users/:id/devices: erases up to USER_ERASE_LIMIT of the user's live devices (in id order) and
   * says how many are left, so a client calls again until none remain. 404 when the user has none.
   */
  async eraseUser(appId: string, userId: string): Promise<{ erased: string[]; remaining: number }> {
    return this.db.transaction().execute(async (trx) => {
      const devices = await this.devices.lockUserDevices(trx, appId, userId, 'update', USER_ERASE_LIMIT);
      if (devices.length === 0) throw new NotFoundError('user');
      for (const d of devices) await this.devices.erase(trx, d.id);
      return { erased: devices.map((d) => d.id), remaining: await this.devices.countUserDevices(trx, appId, userId) };
    });
  }

  /** POST /devices/:id/events. The share lock keeps an erase from interleaving. */
  async recordEvents(
    appId: string,
    id: string,
    raw: unknown,
    caller: Caller,
    idempotency?: IdempotentRequest<void>,
  ): Promise<Replay | void> {
    const aggregates = aggregateEvents(parseEvents(raw, eventOptions(caller)));
    return this.db.transaction().execute(async (trx) => {
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      await this.lockLive(trx, appId, id, 'share');
      await this.events.record(
        trx,
        appId,
        aggregates.map((event) => ({ deviceId: id, event })),
      );
      await this.idempotency.store(trx, appId, idempotency, undefined);
    });
  }

  /** PUT /users/:user_id: the custom attributes go to every live device of the user. */
  async updateUser(appId: string, userId: string, raw: Record<string, unknown>): Promise<UserWriteResult> {
    const changes: CustomChanges = new Map();
    const dropped: Dropped[] = [];
    for (const [key, value] of Object.entries(raw)) {
      if (key === 'custom' || key === 'user_attributes') {
        const r = parseCustomAttributes(value, key);
        for (const [name, attr] of r.custom) changes.set(name, attr);
        dropped.push(...r.dropped);
      } else dropped.push({ field: key, error: 'is not a user field (custom, user_attributes)' });
    }
    return this.db.transaction().execute(async (trx) => {
      const devices = await this.devices.lockUserDevices(trx, appId, userId, 'update');
      if (devices.length === 0) throw new NotFoundError('user');
      let stored = false;
      for (const device of devices) {
        const { admitted, dropped: over } = admitAttributes(await this.devices.attributeNames(trx, device.id), changes);
        await this.devices.replaceAttributes(trx, appId, device.id, admitted);
        stored ||= admitted.size > 0;
        dropped.push(...over.map((d) => ({ field: d.field, error: `${d.error} (device ${device.id})` })));
      }
      // Nothing was written when nothing was admitted anywhere, so there is nothing to roll back.
      if (!stored) return { kind: 'nothing-valid', dropped };
      await this.devices.touchMany(
        trx,
        devices.map((d) => d.id),
      );
      return { kind: 'stored', deviceCount: devices.length, dropped };
    });
  }

  /** POST /users/:user_id/events: the events count on every live device of the user. */
  async recordUserEvents(
    appId: string,
    userId: string,
    raw: unknown,
    caller: Caller,
    idempotency?: IdempotentRequest<void>,
  ): Promise<Replay | void> {
    const aggregates = aggregateEvents(parseEvents(raw, eventOptions(caller)));
    return this.db.transaction().execute(async (trx) => {
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      const devices = await this.devices.lockUserDevices(trx, appId, userId, 'share');
      if (devices.length === 0) throw new NotFoundError('user');
      await this.events.record(
        trx,
        appId,
        devices.flatMap((d) => aggregates.map((event) => ({ deviceId: d.id, event }))),
      );
      await this.idempotency.store(trx, appId, idempotency, undefined);
    });
  }

  private async lockLive(db: Transaction<Database>, appId: string, id: string, mode: 'update' | 'share'): Promise<Device> {
    const device = await this.devices.lock(db, appId, id, mode);
    if (!device) throw new NotFoundError('device');
    if (device.erased_at) throw new ErasedError();
    return device;
  }

  /** Devices with their custom attributes and event aggregates, in two queries for the whole list. */
  async detailsOf(devices: Device[]): Promise<DeviceDetails[]> {
    const ids = devices.map((d) => d.id);
    const [attributes, events] = await Promise.all([this.devices.attributesOf(this.db, ids), this.events.forDevices(this.db, ids)]);
    return devices.map((device) => ({
      device,
      attributes: attributes.filter((a) => a.device_id === device.id),
      events: events.filter((e) => e.device_id === device.id),
    }));
  }

  private async details(db: Db, device: Device): Promise<DeviceDetails> {
    const [attributes, events] = await Promise.all([this.devices.attributesOf(db, [device.id]), this.events.forDevices(db, [device.id])]);
    return { device, attributes, events };
  }

  /**
   * The phone's address and what GeoIP says of it. Only an SDK key calls from the phone: a write key is a
   * backend, whose address says nothing about where the device is. A GeoIP country only fills a gap.
   */
  private async network(caller: Caller, fields: DeviceFields): Promise<Network> {
    const ip = caller.ip ? storableIp(caller.ip) : null;
    if (caller.role !== 'sdk' || !ip) return { columns: {}, country: null };
    if (!this.geoip.enabled) return { columns: { ip_address: ip }, country: null };
    const found = await this.geoip.lookup(ip);
    return {
      columns: { ip_address: ip, ip_latitude: found?.latitude ?? null, ip_longitude: found?.longitude ?? null },
      country: fields.country === undefined ? (found?.country ?? null) : null,
    };
  }
}

interface Network {
  columns: Pick<DeviceUpdate, 'ip_address' | 'ip_latitude' | 'ip_longitude'>;
  /** A country for a device that has none. */
  country: string | null;
}

function eventOptions(caller: Caller) {
  return { defaultSource: caller.role === 'sdk' ? '' : 'Public Api', mayNameSource: caller.role === 'write', now: new Date() };
}

function written(fields: DeviceFields, custom: CustomChanges): Written {
  return { fields: (Object.keys(fields) as (keyof DeviceFields)[]).filter((f) => fields[f] !== undefined), custom: [...custom.keys()] };
}

/** Device fields and network columns as a column update; absent fields are left out. */
function columns(fields: DeviceFields, net: Network): DeviceUpdate {
  return { ...(Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as DeviceUpdate), ...net.columns };
}
