import { createHmac } from 'node:crypto';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { IdentityNotProvenError } from '../../src/domain/errors.js';
import {
  generateIdentitySecret,
  identityHash,
  IdentitySecret,
  refuseUnprovenChanges,
  refuseUnprovenLeave,
  unprovenClaims,
} from '../../src/domain/identity.js';

describe('identity hashes', () => {
  const secret = generateIdentitySecret();
  const held = new IdentitySecret(secret);

  it('are the hex HMAC-SHA256 of the value keyed with the secret as printed (what a backend computes)', () => {
    expect(identityHash('k', 'customer-42')).toBe(createHmac('sha256', 'k').update('customer-42').digest('hex'));
    // RFC 4231 test case 2: key "Jefe"
    expect(identityHash('Jefe', 'what do ya want for nothing?')).toBe('5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843');
    expect(held.proves('ana', identityHash(secret, 'ana'))).toBe(true);
    expect(held.proves('ana', identityHash(secret, 'ana').toUpperCase())).toBe(true);
  });

  it.each([
    ['a hash made with another secret', () => identityHash(generateIdentitySecret(), 'ana')],
    ['the hash of another value', () => identityHash(secret, 'bob')],
    ['too short', () => 'ab'.repeat(31)],
    ['too long', () => 'ab'.repeat(33)],
    ['not hex', () => 'g'.repeat(64)],
    ['not a string', () => 42],
    ['null', () => null],
  ])('refuse %s', (_what, hash) => {
    expect(held.proves('ana', hash())).toBe(false);
  });

  it('never show the secret in JSON or inspection', () => {
    const shown = [JSON.stringify({ held }), inspect(held), inspect({ nested: { held } }), String(JSON.stringify(held))];
    for (const text of shown) expect(text).not.toContain(secret);
  });

  it('are needed to set a value the device does not hold; not to keep one', () => {
    const claims = unprovenClaims({ user_id: 'ana', user_email: null }, {}, held);
    expect(claims).toEqual([{ field: 'user_id', value: 'ana', hash: undefined }]);
    expect(() => refuseUnprovenChanges(claims, { user_id: 'ana' })).not.toThrow();
    expect(() => refuseUnprovenChanges(claims, { user_id: 'bob' })).toThrow(IdentityNotProvenError);
    expect(() => refuseUnprovenChanges(claims, undefined)).toThrow(/^device\.user_id_auth_hash: is required/);
    const wrong = unprovenClaims({ user_email: 'a@b.c' }, { user_email: 'ff'.repeat(32) }, held);
    expect(() => refuseUnprovenChanges(wrong, undefined)).toThrow(/^device\.user_email_auth_hash: does not match user_email/);
  });

  it('of the value a device holds are needed to change or clear it (the user it leaves); not to keep it or bind an empty one', () => {
    const leave = (current: object, fields: object, leaving: object) => () => refuseUnprovenLeave(current, fields, leaving, held);
    expect(leave({ user_id: 'ana' }, { user_id: 'bob' }, {})).toThrow(/^device\.previous_user_id_auth_hash: is required to change user_id/);
    expect(leave({ user_id: 'ana' }, { user_id: null }, { user_id: identityHash(secret, 'bob') })).toThrow(
      /^device\.previous_user_id_auth_hash: does not match the user_id the device has/,
    );
    expect(leave({ user_email: 'a@b.c' }, { user_email: null }, {})).toThrow(/^device\.previous_user_email_auth_hash: /);
    expect(leave({ user_id: 'ana' }, { user_id: null }, { user_id: identityHash(secret, 'ana') })).not.toThrow();
    expect(leave({ user_id: 'ana' }, { user_id: 'ana' }, {})).not.toThrow();
    expect(leave({ user_id: 'ana' }, { locale: 'fr_FR' }, {})).not.toThrow();
    expect(leave({ user_id: null }, { user_id: 'bob' }, {})).not.toThrow();
  });
});
