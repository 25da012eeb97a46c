import type { Db } from '../db/database.js';
import { changedAttributes, type DeviceAttributeRow, type DevicesRepository } from '../db/repositories/devices.js';
import type { FoundByToken, TokenLookup, TokenReadsRepository } from '../db/repositories/token-reads.js';
import type { Device, DeviceUpdate } from '../db/schema.js';
import { admitAttributes, type CustomChanges, type DeviceInput, type Dropped } from '../domain/device-input.js';
import type { IdentityClaim } from '../domain/identity.js';
import type { Admission } from '../platform/admission.js';
import { GroupRunner } from '../platform/group-runner.js';
import { refuseUnprovenRebind, type Caller } from './device-checks.js';

/** What `registeredAsIs` answers when the app has no device with the token (as read without a lock). */
export const NEW_TOKEN = 'new-token';

/** A registration answered without the locked way: the device as stored, what it was admitted, whether it is new. */
export interface QuickRegistration {
  device: Device;
  attributes: DeviceAttributeRow[];
  admitted: CustomChanges;
  dropped: Dropped[];
  created: boolean;
  /** the new device's credential, answered once */
  credential?: string;
}

/** A registration as `registeredAsIs` reads it. */
interface AsIsRequest {
  appId: string;
  input: DeviceInput;
  caller: Caller;
  unproven: IdentityClaim[];
  /** a request with an Idempotency-Key stores its answer: it goes the locked way */
  idempotency: unknown;
  /** a country for a device that has none */
  country: string | null;
}

/**
 * Reads of registrations that arrived together, by one statement (TokenReadsRepository.readTokens): a few in flight, as
 * they hold no lock and wait for no flush. A group the database refused is read again one lookup at a time
 * (DevicesRepository.findUnlockedByToken), so one bad value fails alone. With `admission`, a read that waited its
 * bound for a turn is refused (503) as a request waiting for the pool is.
 */
const TOKEN_READ_GROUPS = { maxInFlight: 2, maxGroup: 100 };

/**
 * A phone registering again exactly as it is (every launch of an app does): told by one read outside any
 * transaction, and answered as stored, without a lock, a transaction id or a flush. Null when anything would be
 * written, a check refuses, or the request is not a phone's with a token: the locked way then decides, on the row as
 * it is then. Writing nothing, it is the locked registration that found nothing changed, read a moment earlier.
 * NEW_TOKEN when the read found no device with the token (device-new-token.ts then inserts one).
 */
export class AsIsRegistrations {
  private readonly reads: GroupRunner<TokenLookup, FoundByToken | undefined>;

  constructor(deps: { db: Db; devices: DevicesRepository; tokenReads: TokenReadsRepository; admission?: Admission | undefined }) {
    const { db, devices, tokenReads } = deps;
    this.reads = new GroupRunner(
      async (group) => (await tokenReads.readTokens(db, group)).map((value) => ({ status: 'fulfilled', value })),
      { ...TOKEN_READ_GROUPS, admission: deps.admission },
      (l) => devices.findUnlockedByToken(db, l.appId, l.token, l.set, l.fillCountry),
    );
  }

  async registered(r: AsIsRequest, update: DeviceUpdate): Promise<QuickRegistration | typeof NEW_TOKEN | null> {
    const token = r.input.fields.token;
    if (r.idempotency || r.caller.role !== 'sdk' || typeof token !== 'string') return null;
    const found = await this.reads.submit({ appId: r.appId, token, set: update, fillCountry: r.country });
    if (!found) return NEW_TOKEN;
    if (found.changes || !provenAsIs(r, found.device)) return null;
    const { admitted, dropped } = admitAttributes(
      found.attributes.map((a) => a.name),
      r.input.custom,
    );
    if (changedAttributes(r.appId, found.device.id, admitted, found.attributes).length) return null;
    return { device: found.device, attributes: found.attributes, admitted, dropped, created: false };
  }
}

/** The sdk key's checks pass on the device as read, and prove nothing new (a credential shown the first time is written). */
function provenAsIs({ caller, input, unproven }: AsIsRequest, current: Device): boolean {
  try {
    return !refuseUnprovenRebind(caller, input, unproven, current) || current.credential_held;
  } catch {
    return false;
  }
}
