import type { AuditRepository } from '../db/repositories/audit.js';
import type { Actor } from '../domain/audit.js';
import type { Transaction } from 'kysely';
import { onGenericPlans, type Db } from '../db/database.js';
import type { DeviceAttributeRow, DevicesRepository } from '../db/repositories/devices.js';
import type { ConversionsRepository } from '../db/repositories/conversions.js';
import type { DeviceEventRow, EventsRepository } from '../db/repositories/events.js';
import type { UninstalledRepository, UninstalledWindow } from '../db/repositories/uninstalled.js';
import type { Database, Device, DeviceUpdate, NewDevice } from '../db/schema.js';
import {
  admitAttributes,
  aggregateEvents,
  LIMITS,
  parseCustomAttributes,
  parseDeviceInput,
  parseEvents,
  type CustomChanges,
  type DeviceFields,
  type DeviceInput,
  type Dropped,
  type EventInput,
} from '../domain/device-input.js';
import { decodeTimeCursor, encodeCursor, FIRST_ID } from '../domain/cursor.js';
import { ErasedError, NotFoundError } from '../domain/errors.js';
import { issueCredential, normalizeApnsToken, normalizeToken, refuseTakingToken } from '../domain/device-credential.js';
import { refuseUnprovenChanges, type IdentityClaim } from '../domain/identity.js';
import { storableIp, type GeoIp } from '../platform/geoip.js';
import type { ServiceDeps } from './deps.js';
import { checkPlatformChange, eventOptions, identityClaims, refuseUnprovenRebind, type Caller } from './device-checks.js';
import { AsIsRegistrations, NEW_TOKEN } from './device-as-is.js';
import type { Admission } from '../platform/admission.js';
import { NewTokenWrites } from './device-new-token.js';
import type { IdempotencyKeys, IdempotentRequest, Replay } from './idempotency.js';
export type { Caller } from './device-checks.js';

/** Devices one DELETE /users/:id/devices call erases at most (as the public API does). */
export const USER_ERASE_LIMIT = 10;

/** A device with its custom attributes and event aggregates. */
export interface DeviceDetails {
  device: Device;
  attributes: DeviceAttributeRow[];
  events: DeviceEventRow[];
}

/** What recording events does to journeys (src/services/journeys.ts), in the events' transaction. */
export interface JourneyEvents {
  onEvents(
    trx: Transaction<Database>,
    appId: string,
    devices: Device[],
    userId: string | null,
    events: readonly EventInput[],
  ): Promise<void>;
}

/** What a request wrote: the device fields it set and the custom attributes it set or removed. */
export interface Written {
  fields: (keyof DeviceFields)[];
  custom: string[];
}

export type WriteResult =
  | {
      kind: 'stored';
      details: DeviceDetails;
      created: boolean;
      written: Written;
      dropped: Dropped[];
      /** the new device's credential, in the answer that created it only */
      credential?: string;
    }
  | { kind: 'nothing-valid'; dropped: Dropped[] };
/** What DELETE /users/:id/devices did to one device of the user. */
export interface UserDeviceErasure {
  id: string;
  outcome: 'erased' | 'gone' | 'out_of_range';
}
export type UserWriteResult = { kind: 'stored'; deviceCount: number; dropped: Dropped[] } | { kind: 'nothing-valid'; dropped: Dropped[] };

/** Devices, their custom attributes and events, users (the devices sharing a user_id), the uninstalled listing. */
export type DeviceServiceDeps = Pick<ServiceDeps, 'db' | 'repos' | 'idempotency' | 'clock'> & {
  geoip: GeoIp;
  /** how long after receiving a push a device's events count as its conversions */
  conversionWindowHours: number;
  /** WEB_PUSH_ALLOWED_ORIGINS: where a web subscription may point beside the push services */
  webPushOrigins?: readonly string[];
  /** the journeys events enter, wake and convert entrants of, in the events' transaction (none: no journeys) */
  journeys?: JourneyEvents | null;
  /** refuses a registration whose read waited past its bound for a turn (none: nothing is refused for time) */
  admission?: Admission;
};

export class DeviceService {
  private readonly db: Db;
  private readonly devices: DevicesRepository;
  private readonly events: EventsRepository;
  private readonly conversions: ConversionsRepository;
  private readonly uninstalled: UninstalledRepository;
  private readonly audit: AuditRepository;
  private readonly idempotency: IdempotencyKeys;
  private readonly geoip: GeoIp;
  private readonly conversionWindowHours: number;
  private readonly webPushOrigins: readonly string[];
  private readonly journeys: JourneyEvents | null;
  private readonly clock: ServiceDeps['clock'];
  private readonly newTokens: NewTokenWrites;
  private readonly asIs: AsIsRegistrations;

  constructor(deps: DeviceServiceDeps) {
    this.db = deps.db;
    this.devices = deps.repos.devices;
    this.events = deps.repos.events;
    this.conversions = deps.repos.conversions;
    this.uninstalled = deps.repos.uninstalled;
    this.audit = deps.repos.audit;
    this.idempotency = deps.idempotency;
    this.geoip = deps.geoip;
    this.conversionWindowHours = deps.conversionWindowHours;
    this.webPushOrigins = deps.webPushOrigins ?? [];
    this.journeys = deps.journeys ?? null;
    this.clock = deps.clock;
    this.newTokens = new NewTokenWrites({ ...deps.repos, db: deps.db });
    this.asIs = new AsIsRegistrations({ ...deps.repos, db: deps.db, admission: deps.admission });
  }

  /** POST /devices: a new device, or the one that already has this token (then merged like an update). */
  async register(
    appId: string,
    raw: Record<string, unknown>,
    caller: Caller,
    idempotency?: IdempotentRequest<WriteResult>,
  ): Promise<WriteResult | Replay> {
    const input = parseDeviceInput(raw, 'create', { webPushOrigins: this.webPushOrigins });
    input.fields.token = normalizeToken(input.fields.platform, input.fields.token);
    const unproven = identityClaims(caller, input);
    // a new device holds no identity yet: only the device of a token it already has may hold the one claimed
    if (typeof input.fields.token !== 'string') refuseUnprovenChanges(unproven, undefined);
    const net = await this.network(caller, input.fields);
    const set = columns(input.fields, net);
    const values: NewDevice = { ...set, app_id: appId, platform: input.fields.platform!, country: input.fields.country ?? net.country };
    // a new device holds no attributes yet: what it is admitted is written with it, in the device's insert
    const fresh = admitAttributes([], input.custom);
    const asIs = await this.asIs.registered(
      { appId, input, caller, unproven, idempotency, country: net.country },
      { ...set, ...TOKEN_VALID },
    );
    // a token read as new is inserted by one statement; one read as it is stored is answered as stored
    const quick = asIs === NEW_TOKEN ? await this.newTokens.registered({ input, caller, unproven, values, fresh }) : asIs;
    if (quick) {
      const { device, attributes, admitted, dropped, created, credential } = quick;
      const answer = { details: { device, attributes, events: [] }, written: written(input.fields, admitted) };
      return { kind: 'stored', ...answer, created, dropped: [...input.dropped, ...dropped], ...(credential ? { credential } : {}) };
    }
    return this.db.transaction().execute(async (trx) => {
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      const registration = { appId, input, caller, unproven, set, values, country: net.country, custom: fresh.admitted };
      const stored = await this.writeRegistration(trx, registration);
      let device = stored.device;
      const { created } = stored;
      // read once: the names admitAttributes counts, the rows a change is found against and, unchanged, the answer's
      const held = created ? [] : await this.devices.attributesOf(trx, [device.id]);
      const { admitted, dropped } = created ? fresh : admitAttributes(names(held), input.custom);
      // a new device has no events, and a known one's answer shows only what was written (writtenView): no events read
      let details: DeviceDetails;
      if (stored.attributes) details = { device, attributes: stored.attributes, events: [] };
      else if (await this.devices.replaceAttributes(trx, appId, device.id, admitted, held)) {
        // a custom attribute changed is a device update too
        device = await this.devices.touch(trx, device.id);
        details = { device, attributes: await this.devices.attributesOf(trx, [device.id]), events: [] };
      } else details = { device, attributes: held, events: [] };
      const result: WriteResult = {
        kind: 'stored',
        details,
        created,
        written: written(input.fields, admitted),
        dropped: [...input.dropped, ...dropped],
      };
      // the credential is answered once: a replay of the answer (kept in PostgreSQL) goes without it
      await this.idempotency.store(trx, appId, idempotency, result);
      return stored.credential ? { ...result, credential: stored.credential } : result;
    });
  }

  /**
   * The device a registration writes: the one holding its token (what the sdk key must prove checked on it), or a
   * new one with a new credential. The token's lock is taken first, so no other registration inserts it meanwhile.
   */
  private async writeRegistration(trx: Transaction<Database>, r: Registration): Promise<Registered> {
    const { appId, input, caller } = r;
    const token = input.fields.token;
    if (typeof token !== 'string') return this.create(trx, r.values, r.custom);
    await this.devices.lockToken(trx, appId, token);
    const update: DeviceUpdate = { ...r.set, ...TOKEN_VALID };
    if (caller.role !== 'sdk') {
      const issued = issueCredential();
      const { device, attributes } = await this.devices.registerToken(
        trx,
        { ...r.values, token, credential_hash: issued.hash },
        update,
        r.country,
        r.custom,
      );
      return attributes ? { device, created: true, credential: issued.credential, attributes } : { device, created: false };
    }
    const held = await this.devices.lockByToken(trx, appId, token);
    const sent = refuseUnprovenRebind(caller, input, r.unproven, held);
    if (!held) return this.create(trx, { ...r.values, token }, r.custom);
    if (sent && !held.credential_held) update.credential_held = true;
    return { device: await this.devices.updateLocked(trx, held, update, r.country), created: false };
  }

  /** A new device, with the credential only this answer gives. */
  private async create(trx: Transaction<Database>, values: NewDevice, custom: CustomChanges): Promise<Registered> {
    const issued = issueCredential();
    const { device, attributes } = await this.devices.insertWithAttributes(trx, { ...values, credential_hash: issued.hash }, custom);
    return { device, created: true, credential: issued.credential, attributes };
  }

  /** PUT /devices/:id: merges the given fields; custom attributes key by key, null removing one. */
  async update(appId: string, id: string, raw: Record<string, unknown>, caller: Caller): Promise<WriteResult> {
    const input = parseDeviceInput(raw, 'update', { webPushOrigins: this.webPushOrigins });
    const token = input.fields.token;
    // an APNs token in upper case is normalised on the platform the device has, read only then
    if (typeof token === 'string' && normalizeApnsToken(token) !== token)
      input.fields.token = normalizeToken(input.fields.platform ?? (await this.devices.findForApp(this.db, appId, id))?.platform, token);
    const unproven = identityClaims(caller, input);
    const net = await this.network(caller, input.fields);
    return this.db.transaction().execute(async (trx) => {
      const moving = typeof input.fields.token === 'string';
      const holder = moving ? await this.devices.lockTokenMove(trx, appId, input.fields.token!, id) : undefined;
      const current = await this.lockLive(trx, appId, id, 'update');
      const holds = refuseUnprovenRebind(caller, input, unproven, current) && !current.credential_held;
      // the device that has the token now loses it: the sdk key must prove that device's side too
      if (holder && caller.role === 'sdk') refuseTakingToken(holder, input.authHashes, caller.identity);
      checkPlatformChange(current, input);
      const { admitted, dropped: over } = admitAttributes(await this.devices.attributeNames(trx, id), input.custom);
      const dropped = [...input.dropped, ...over];
      if (Object.keys(input.fields).length === 0 && admitted.size === 0 && !holds) return { kind: 'nothing-valid', dropped };

      const set = columns(input.fields, net);
      if (holds) set.credential_held = true;
      if (moving) {
        Object.assign(set, { token_invalidated_at: null, token_invalid_reason: null });
        if (holder) await this.devices.releaseToken(trx, appId, input.fields.token!, id);
      }
      let device = await this.devices.update(trx, id, set, net.country);
      if (await this.devices.replaceAttributes(trx, appId, id, admitted)) device = await this.devices.touch(trx, id);
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
  async erase(appId: string, id: string, actor: Actor): Promise<DeviceDetails> {
    return this.db.transaction().execute(async (trx) => {
      const current = await this.devices.lock(trx, appId, id, 'update');
      if (!current) throw new NotFoundError('device');
      if (current.erased_at) return this.details(trx, current);
      const erased = await this.devices.erase(trx, id);
      await this.audit.recordChange(trx, actor, appId, 'device.erased', { device_id: id });
      return this.details(trx, erased);
    });
  }

  /**
   * DELETE /users/:id/devices: the user's live devices in id order; the first USER_ERASE_LIMIT are erased (as the
   * public API does) and the rest are out of range until a later call. A device that stopped being the user's
   * between the listing and its lock (a concurrent erase or update) is `gone`. 404 when the user has no device.
   */
  async eraseUser(appId: string, userId: string, actor: Actor): Promise<UserDeviceErasure[]> {
    const ids = await this.devices.userDeviceIds(this.db, appId, userId);
    if (ids.length === 0) throw new NotFoundError('user');
    const erased = await this.db.transaction().execute(async (trx) => {
      const devices = await this.devices.lockUserDevices(trx, appId, userId, 'update', ids.slice(0, USER_ERASE_LIMIT));
      for (const d of devices) await this.devices.erase(trx, d.id);
      // the devices it erased, never the user id: the row must not keep what the erasure removed
      if (devices.length) await this.audit.recordChange(trx, actor, appId, 'user.erased', { device_ids: devices.map((d) => d.id) });
      return new Set(devices.map((d) => d.id));
    });
    return ids.map((id, i) => ({ id, outcome: i >= USER_ERASE_LIMIT ? 'out_of_range' : erased.has(id) ? 'erased' : 'gone' }));
  }

  /**
   * GET /devices/uninstalled: devices whose token a gateway rejected, in (invalidated_at, id) keyset pages, with
   * how many the listing holds. Every page has a cursor; an empty one keeps the position it was asked for.
   */
  async uninstalledPage(
    appId: string,
    q: UninstalledWindow & { cursor?: string; per: number },
  ): Promise<{ devices: DeviceDetails[]; total: number; cursor: string }> {
    const after = q.cursor ? decodeTimeCursor(q.cursor, UNINSTALLED) : null;
    if (q.cursor && !after) throw new NotFoundError('cursor');
    const window = { from: q.from, to: q.to };
    const [rows, total] = await Promise.all([
      this.uninstalled.page(this.db, appId, { ...window, after, limit: q.per }),
      this.uninstalled.count(this.db, appId, window),
    ]);
    const last = rows.at(-1);
    const position = last ? { at: last.position_at, id: last.id } : (after ?? { at: '1970-01-01T00:00:00.000000Z', id: FIRST_ID });
    return {
      devices: await this.detailsOf(rows),
      total,
      cursor: encodeCursor(UNINSTALLED, [position.at, position.id]),
    };
  }

  /** POST /devices/:id/events. The share lock keeps an erase from interleaving. */
  async recordEvents(
    appId: string,
    id: string,
    raw: unknown,
    caller: Caller,
    idempotency?: IdempotentRequest<void>,
  ): Promise<Replay | void> {
    const events = parseEvents(raw, eventOptions(caller, this.clock.now()));
    return this.writeEvents(appId, events, idempotency, null, async (trx) => [await this.lockLive(trx, appId, id, 'share')]);
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
    const events = parseEvents(raw, eventOptions(caller, this.clock.now()));
    return this.writeEvents(appId, events, idempotency, userId, async (trx) => {
      const devices = await this.devices.lockUserDevices(trx, appId, userId, 'share');
      if (devices.length === 0) throw new NotFoundError('user');
      return devices;
    });
  }

  /**
   * Records events on the devices `lockDevices` locks (of `userId`, or one device), in one transaction: their
   * aggregates, the conversions they make, and the journeys that listen for them.
   */
  private writeEvents(
    appId: string,
    events: EventInput[],
    idempotency: IdempotentRequest<void> | undefined,
    userId: string | null,
    lockDevices: (trx: Transaction<Database>) => Promise<Device[]>,
  ): Promise<Replay | void> {
    const aggregates = aggregateEvents(events);
    return this.db.transaction().execute(async (trx) => {
      await onGenericPlans(trx);
      const replay = await this.idempotency.claim(trx, appId, idempotency);
      if (replay) return replay;
      const devices = await lockDevices(trx);
      const rows = devices.flatMap((d) => aggregates.map((event) => ({ deviceId: d.id, event })));
      await this.events.record(trx, appId, rows, LIMITS.distinctEvents);
      await this.attributeConversions(
        trx,
        devices.map((d) => d.id),
        events,
      );
      await this.journeys?.onEvents(trx, appId, devices, userId, events);
      await this.idempotency.store(trx, appId, idempotency, undefined);
    });
  }

  /** Each event of each device counts for the pushes that device received within the window before it. */
  private async attributeConversions(db: Db, deviceIds: string[], events: EventInput[]): Promise<void> {
    const sent = deviceIds.flatMap((deviceId) => events.map((e) => ({ deviceId, source: e.source, name: e.name, at: e.date })));
    await this.conversions.attribute(db, sent, this.conversionWindowHours);
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
      columns: {
        ip_address: ip,
        ip_latitude: found?.latitude ?? null,
        ip_longitude: found?.longitude ?? null,
        ip_city: found?.city ?? null,
        ip_country: found?.country ?? null,
      },
      country: fields.country === undefined ? (found?.country ?? null) : null,
    };
  }
}

/** What a registration writes, as `writeRegistration` takes it. */
interface Registration {
  appId: string;
  input: DeviceInput;
  caller: Caller;
  unproven: IdentityClaim[];
  set: DeviceUpdate;
  values: NewDevice;
  /** a country for a device that has none */
  country: string | null;
  /** the custom attributes a new device is admitted */
  custom: CustomChanges;
}

const names = (attributes: DeviceAttributeRow[]) => attributes.map((a) => a.name);

/** A token registered is a token that works: what a rejection noted of it is cleared. */
const TOKEN_VALID = { token_invalidated_at: null, token_invalid_reason: null };

interface Registered {
  device: Device;
  created: boolean;
  credential?: string;
  /** a new device's attributes, as stored with it */
  attributes?: DeviceAttributeRow[];
}

interface Network {
  columns: Pick<DeviceUpdate, 'ip_address' | 'ip_latitude' | 'ip_longitude' | 'ip_city' | 'ip_country'>;
  /** A country for a device that has none. */
  country: string | null;
}
const UNINSTALLED = 'uninstalled';

function written(fields: DeviceFields, custom: CustomChanges): Written {
  return { fields: (Object.keys(fields) as (keyof DeviceFields)[]).filter((f) => fields[f] !== undefined), custom: [...custom.keys()] };
}

/** Device fields and network columns as a column update; absent fields are left out. */
function columns(fields: DeviceFields, net: Network): DeviceUpdate {
  return { ...(Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as DeviceUpdate), ...net.columns };
}
