// What a device write must prove and may change, checked before anything of it is stored.
import type { Device, KeyRole } from '../db/schema.js';
import { checkHuaweiToken, type DeviceInput } from '../domain/device-input.js';
import { refuseUnprovenDeviceChange, type HeldDevice } from '../domain/device-credential.js';
import { ValidationError } from '../domain/errors.js';
import { refuseUnprovenChanges, refuseUnprovenLeave, unprovenClaims, type IdentityClaim, type IdentitySecret } from '../domain/identity.js';

/** Who is calling: the key's role decides the event source, whether the IP is the phone's, and what it must prove. */
export interface Caller {
  role: KeyRole;
  ip: string | null;
  /** the app's identity secret while identity verification is on (null: off) */
  identity: IdentitySecret | null;
}

/**
 * The user id and e-mail address an sdk key sets without a hash that proves them, while the app verifies identities;
 * a write key (a backend) binds freely.
 */
export function identityClaims(caller: Caller, input: DeviceInput): IdentityClaim[] {
  if (caller.role !== 'sdk' || !caller.identity) return [];
  return unprovenClaims(input.fields, input.authHashes, caller.identity);
}

/**
 * With the sdk key, what a change of a device that exists must prove (`current`: none when the token is new): each
 * identity it binds, the one it leaves, and, when it changes where the device's pushes go or whether it gets them,
 * the device's credential or its user's proof (refuseUnprovenDeviceChange). Answers whether the device's credential
 * was sent.
 */
export function refuseUnprovenRebind(
  caller: Caller,
  input: DeviceInput,
  unproven: IdentityClaim[],
  current: HeldDevice | undefined,
): boolean {
  if (caller.role !== 'sdk') return false;
  if (caller.identity) refuseUnprovenChanges(unproven, current);
  if (!current) return false;
  if (caller.identity) refuseUnprovenLeave(current, input.fields, input.leavingHashes, caller.identity);
  return refuseUnprovenDeviceChange(current, input.fields, input, caller.identity);
}

/** A browser's subscription and a phone's token are not interchangeable: a device stays web or phone. */
export function checkPlatformChange(current: Device, input: DeviceInput): void {
  const web = current.platform === 'web';
  if (input.fields.platform !== undefined && (input.fields.platform === 'web') !== web)
    throw new ValidationError('device.platform: a device cannot move between web and phone platforms; register a new one');
  if (input.subscribed && !web)
    throw new ValidationError('device.subscription: only a web device (platform "web") has a push subscription');
  if (!input.subscribed && web && input.fields.token !== undefined)
    throw new ValidationError('device.token: a web device gives its push subscription as device.subscription');
  // the token as it will be, on the platform as it will be: a Huawei device holds only an HMS token
  if ((input.fields.platform ?? current.platform) === 'huawei') checkHuaweiToken(input.fields.token ?? current.token);
}

/** How events parse for this caller: their source by key role, and `now` for an event without a date. */
export function eventOptions(caller: Caller, now: Date) {
  return { defaultSource: caller.role === 'sdk' ? '' : 'Public Api', mayNameSource: caller.role === 'write', now };
}
