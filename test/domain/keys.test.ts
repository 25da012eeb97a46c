import { describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey, KEY_ROLES, keyHint, roleAllows, type Permission } from '../../src/domain/keys.js';
import { ROLES_FOR } from '../http/auth-routes.js';

describe('api keys', () => {
  it('carry at least 128 random bits, URL-safe, never repeated', () => {
    const keys = Array.from({ length: 2000 }, generateApiKey);
    for (const k of keys.slice(0, 50)) {
      expect(k).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(Buffer.from(k, 'base64url').length * 8).toBeGreaterThanOrEqual(128);
    }
    expect(new Set(keys).size).toBe(keys.length);
    // rough entropy check: every base64url symbol shows up across the keys
    expect(new Set(keys.join('')).size).toBe(64);
    // none reads as a command-line flag (`pushd key revoke --key -abc…` would be refused)
    expect(keys.filter((k) => /^[-_]/.test(k))).toEqual([]);
  });

  it('are stored as a SHA-256 hash, the same for the same key only', () => {
    const key = generateApiKey();
    const hash = hashApiKey(key);
    expect(hash).toHaveLength(32);
    expect(hash.toString('hex')).not.toContain(Buffer.from(key).toString('hex'));
    expect(hashApiKey(key).equals(hash)).toBe(true);
    expect(hashApiKey(key + 'x').equals(hash)).toBe(false);
    expect(hashApiKey(key.slice(1)).equals(hash)).toBe(false);
  });

  it('show only a short hint in listings', () => {
    const key = generateApiKey();
    expect(keyHint(key)).toBe(key.slice(0, 6));
  });

  it('grant what the auth matrix expects (read <- read, write; write <- write; device <- write, sdk)', () => {
    for (const permission of ['read', 'write', 'device'] as Permission[]) {
      expect(KEY_ROLES.filter((r) => roleAllows(r, permission))).toEqual(ROLES_FOR[permission]);
    }
  });
});
