import type { Db } from '../db/database.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { NewDevice } from '../db/schema.js';
import type { DeviceInput, Dropped, CustomChanges } from '../domain/device-input.js';
import { issueCredential } from '../domain/device-credential.js';
import type { IdentityClaim } from '../domain/identity.js';
import type { QuickRegistration } from './device-as-is.js';
import { refuseUnprovenRebind, type Caller } from './device-checks.js';

/** A phone's registration of a token its app had no device with, as `registeredNew` writes it. */
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
 * A phone registering a token that `registeredAsIs` just read no device of: the new device, with its attributes and
 * the credential only this answer gives, inserted by one autocommit statement that takes the token's lock itself
 * (DevicesRepository.insertNewToken) instead of a transaction of five round trips. Null when the checks of a new
 * device refuse it or a device got the token meanwhile: the locked way then decides (and refuses), on the row as
 * it is under the lock, as it did before.
 */
export async function registeredNew(db: Db, devices: DevicesRepository, r: NewTokenRequest): Promise<QuickRegistration | null> {
  const token = r.input.fields.token;
  if (typeof token !== 'string' || !provenNew(r)) return null;
  const issued = issueCredential();
  const stored = await devices.insertNewToken(db, { ...r.values, token, credential_hash: issued.hash }, r.fresh.admitted);
  return stored ? { ...stored, ...r.fresh, created: true, credential: issued.credential } : null;
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
