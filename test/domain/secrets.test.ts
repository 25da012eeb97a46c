import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  decodeSecretsKey,
  isSealed,
  keyIdOf,
  newSecretsKeyText,
  sealedKeyId,
  SecretsKeyError,
  SecretsKeyring,
} from '../../src/domain/secrets.js';

const key = () => randomBytes(32);

describe('SecretsKeyring', () => {
  it('seals a value that names its key and opens to the same text, a new iv each time', () => {
    const k = key();
    const ring = new SecretsKeyring(k);
    const a = ring.seal('the secret', 'identity_secret');
    const b = ring.seal('the secret', 'identity_secret');
    expect(a).toMatch(/^pushd:v1:[0-9a-f]{16}:/);
    expect(isSealed(a)).toBe(true);
    expect(sealedKeyId(a)).toBe(keyIdOf(k));
    expect(a).not.toBe(b);
    expect(a).not.toContain('the secret');
    expect(ring.open(a, 'identity_secret')).toBe('the secret');
    expect(ring.openJson(ring.seal('{"a":1}', 'hms_credentials'), 'hms_credentials')).toEqual({ a: 1 });
  });

  it('refuses a value moved to another column, changed, or sealed under a key it does not hold', () => {
    const ring = new SecretsKeyring(key());
    const sealed = ring.seal('{"private_key":"x"}', 'fcm_credentials');
    expect(() => ring.open(sealed, 'apns_credentials')).toThrow(SecretsKeyError);
    const parts = sealed.split(':');
    parts[4] = Buffer.from('{"private_key":"y"}').toString('base64url');
    expect(() => ring.open(parts.join(':'), 'fcm_credentials')).toThrow(/does not open/);
    const other = new SecretsKeyring(key());
    expect(() => other.open(sealed, 'fcm_credentials')).toThrow(new RegExp(`sealed under key ${sealedKeyId(sealed)}, which is not one`));
    expect(() => ring.open('{"plain": true}', 'fcm_credentials')).toThrow(/not sealed/);
  });

  it('opens with a previous key, seals with the current one; a rotated ring keeps the old keys for opening', () => {
    const [old, next] = [key(), key()];
    const before = new SecretsKeyring(old).seal('v', 'apns_credentials');
    const ring = new SecretsKeyring(next, [old]);
    expect(ring.open(before, 'apns_credentials')).toBe('v');
    expect(sealedKeyId(ring.seal('v', 'apns_credentials'))).toBe(keyIdOf(next));
    const rotated = new SecretsKeyring(old).rotatedTo(next);
    expect(rotated.keyIds).toEqual([keyIdOf(next), keyIdOf(old)]);
    expect(rotated.open(before, 'apns_credentials')).toBe('v');
  });

  it('reads its key source again for a key it does not hold, and seals with the current key found there', () => {
    const [old, next] = [key(), key()];
    let source = { current: old, others: [] as Buffer[] };
    const ring = new SecretsKeyring(old, [], () => source);
    source = { current: next, others: [] };
    const sealedByNext = new SecretsKeyring(next).seal('v', 'identity_secret');
    expect(ring.open(sealedByNext, 'identity_secret')).toBe('v');
    expect(ring.currentId).toBe(keyIdOf(next));
    expect(ring.keyIds).toContain(keyIdOf(old)); // never forgets a key it held
  });

  it('reads a key as 32 bytes of base64 only; a key id tells nothing of the key', () => {
    const text = newSecretsKeyText();
    expect(decodeSecretsKey(text)).toHaveLength(32);
    expect(decodeSecretsKey(Buffer.alloc(16).toString('base64'))).toBeUndefined();
    expect(decodeSecretsKey('not base64 at all!')).toBeUndefined();
    const k = decodeSecretsKey(text)!;
    expect(keyIdOf(k)).toMatch(/^[0-9a-f]{16}$/);
    expect(k.toString('hex')).not.toContain(keyIdOf(k));
  });
});
