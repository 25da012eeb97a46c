import { hash, randomBytes } from 'node:crypto';
/** What a key may be: read (dashboards), write (backends), sdk (ships inside the app). */
export type KeyRole = 'read' | 'write' | 'sdk';
export const KEY_ROLES: readonly KeyRole[] = ['read', 'write', 'sdk'];

/** Which roles may do what. A write key may also read; an sdk key only registers devices and events. */
export type Permission = 'read' | 'write' | 'device';
const GRANTS: Record<KeyRole, readonly Permission[]> = {
  read: ['read'],
  write: ['read', 'write', 'device'],
  sdk: ['device'],
};

export function roleAllows(role: KeyRole, permission: Permission): boolean {
  return GRANTS[role].includes(permission);
}

/** 192 random bits, base64url; never starting with "-" or "_", so `--key KEY` on a command line is not read as a flag. */
export function generateApiKey(): string {
  for (;;) {
    const key = randomBytes(24).toString('base64url');
    if (/^[A-Za-z0-9]/.test(key)) return key;
  }
}

/** Keys are stored and looked up by this hash only: 192 random bits need no salt or slow hash. */
export function hashApiKey(key: string): Buffer {
  return hash('sha256', key, 'buffer');
}

/** A non-secret hint for listings: the first characters only. */
export function keyHint(key: string): string {
  return key.slice(0, 6);
}
