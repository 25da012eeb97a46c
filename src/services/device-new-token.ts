import type { Db } from '../db/database.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { NewDevicesRepository, NewTokenDevice, StoredNewDevice } from '../db/repositories/new-devices.js';
import type { NewDevice } from '../db/schema.js';
import type { DeviceInput, Dropped, CustomChanges } from '../domain/device-input.js';
import { issueCredential } from '../domain/device-credential.js';
import type { IdentityClaim } from '../domain/identity.js';
import { GroupRunner } from '../platform/group-runner.js';
import type { QuickRegistration } from './device-as-is.js';
import { refuseUnprovenRebind, type Caller } from './device-checks.js';

/** A phone's registration of a token its app had no device with, as `NewTokenWrites.registered` writes it. */
interface NewTokenRequest {
  input: DeviceInput;
  caller: Caller;
  unproven: IdentityClaim[];
  /** the new device's columns */
  values: NewDevice;
  /** the custom attributes a new device is admitted, and those it is not */
  fresh: { admitted: CustomChanges; dropped: Dropped[] };
}

/**
 * Groups of new devices written at once: one writing at a time, to its commit, the next gathered meanwhile. A turn that
 * gave itself up before its commit (as a transactional send's does) made smaller groups: paced at 850 a second on a
 * slow flush, those fell behind (766/s, PostgreSQL 0.66 ms a device) where these kept up (0.48 ms).
 */
const NEW_TOKEN_GROUPS = { maxInFlight: 1, maxGroup: 200 };
// No admission bound on the wait for a turn: a commit held by a synchronous standby must not turn the registrations
// behind it into 503s while it may still succeed (test/system/failover-window.test.ts); the pool's wait is bounded.

/**
 * A device with more attribute values than this is written alone, so that a group's parameters stay a few MB: an SDK
 * sends a handful, and the API takes up to 50 attributes of up to 50 values each.
 */
const GROUPED_MAX_VALUES = 50;

/**
 * Phones registering tokens that `registeredAsIs` just read no device of: each new device, with its attributes and
 * the credential only this answer gives, inserted without a transaction of five round trips. The registrations that
 * arrive together are written by one autocommit statement (NewDevicesRepository.insertNewTokens) that takes each
 * token's lock itself. A group the database refused is written again one device at a time
 * (DevicesRepository.insertNewToken), so one bad row fails alone.
 */
export class NewTokenWrites {
  private readonly groups: GroupRunner<NewTokenDevice, StoredNewDevice | undefined>;
  private readonly alone: (d: NewTokenDevice) => Promise<StoredNewDevice | undefined>;

  constructor(deps: { db: Db; devices: DevicesRepository; newDevices: NewDevicesRepository }) {
    const { db, devices, newDevices } = deps;
    this.alone = (d) => devices.insertNewToken(db, d.values, d.changes);
    this.groups = new GroupRunner(
      async (group) => {
        const stored = await newDevices.insertNewTokens(db, group);
        return stored.map((value) => ({ status: 'fulfilled', value }));
      },
      NEW_TOKEN_GROUPS,
      this.alone,
    );
  }

  /**
   * The new device, or null when the checks of a new device refuse it or a device got the token meanwhile: the
   * locked way then decides (and refuses), on the row as it is under the lock, as it did before.
   */
  async registered(r: NewTokenRequest): Promise<QuickRegistration | null> {
    const token = r.input.fields.token;
    if (typeof token !== 'string' || !provenNew(r)) return null;
    const issued = issueCredential();
    const device = { values: { ...r.values, token, credential_hash: issued.hash }, changes: r.fresh.admitted };
    let values = 0;
    for (const attr of device.changes.values()) values += attr?.values.length ?? 0;
    const stored = await (values > GROUPED_MAX_VALUES ? this.alone(device) : this.groups.submit(device));
    return stored ? { ...stored, ...r.fresh, created: true, credential: issued.credential } : null;
  }
}

/** The sdk key's checks of a device that has no row yet pass (the identities it binds are proven). */
function provenNew({ caller, input, unproven }: NewTokenRequest): boolean {
  try {
    refuseUnprovenRebind(caller, input, unproven, undefined);
    return true;
  } catch {
    return false;
  }
}
