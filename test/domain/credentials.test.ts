import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CredentialsError, parseApnsCredentials, parseFcmServiceAccount } from '../../src/domain/credentials.js';
import { ValidationError } from '../../src/domain/errors.js';
import { generateApnsKey, generateServiceAccount } from '../mocks/credentials.js';

const apns = generateApnsKey({ keyId: 'ABCDE12345', teamId: 'TEAM123456' });
const sa = generateServiceAccount({ projectId: 'pushd-test' });

const pkcs8 = (type: 'ec' | 'rsa' | 'ed25519', curve?: string) => {
  const { privateKey } =
    type === 'ec'
      ? generateKeyPairSync('ec', { namedCurve: curve ?? 'P-256' })
      : type === 'rsa'
        ? generateKeyPairSync('rsa', { modulusLength: 1024 })
        : generateKeyPairSync('ed25519');
  return privateKey;
};

describe('parseApnsCredentials', () => {
  it('accepts a .p8 key with key id and team id', () => {
    const parsed = parseApnsCredentials(apns.credentials);
    expect(parsed).toEqual({ keyPem: expect.stringContaining('-----BEGIN PRIVATE KEY-----'), keyId: 'ABCDE12345', teamId: 'TEAM123456' });
  });

  it('accepts `key` as an alias and an optional topic', () => {
    const { keyPem, ...rest } = apns.credentials;
    expect(parseApnsCredentials({ ...rest, key: keyPem, topic: 'com.example.whitelabel' }).topic).toBe('com.example.whitelabel');
  });

  it('throws a CredentialsError (a ValidationError) with a clear message', () => {
    const err = (() => {
      try {
        parseApnsCredentials({ ...apns.credentials, keyId: 'short' });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(CredentialsError);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as Error).message).toMatch(/keyId must be 10 upper-case letters or digits/);
  });

  it.each([
    ['not an object', 'nope', /must be an object/],
    ['missing key', { keyId: 'ABCDE12345', teamId: 'TEAM123456' }, /keyPem must be the content of the \.p8/],
    ['lower-case key id', { ...apns.credentials, keyId: 'abcde12345' }, /keyId/],
    ['11-char team id', { ...apns.credentials, teamId: 'TEAM1234567' }, /teamId/],
    ['topic with a slash', { ...apns.credentials, topic: 'com/x' }, /topic/],
    [
      'garbage PEM',
      { ...apns.credentials, keyPem: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----' },
      /not a readable private key/,
    ],
    ['SEC1 EC key (not PKCS#8)', { ...apns.credentials, keyPem: pkcs8('ec').export({ type: 'sec1', format: 'pem' }).toString() }, /PKCS#8/],
    ['P-384 key', { ...apns.credentials, keyPem: pkcs8('ec', 'P-384').export({ type: 'pkcs8', format: 'pem' }).toString() }, /EC P-256/],
    ['RSA key', { ...apns.credentials, keyPem: pkcs8('rsa').export({ type: 'pkcs8', format: 'pem' }).toString() }, /EC P-256/],
    [
      'a certificate instead of a key',
      { ...apns.credentials, keyPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----' },
      /PKCS#8/,
    ],
  ])('refuses %s', (_name, input, message) => {
    expect(() => parseApnsCredentials(input)).toThrow(message);
  });

  it('never echoes key material in its errors', () => {
    const keyPem = pkcs8('rsa').export({ type: 'pkcs8', format: 'pem' }).toString();
    const body = keyPem.split('\n')[1] ?? '';
    try {
      parseApnsCredentials({ ...apns.credentials, keyPem });
    } catch (e) {
      expect((e as Error).message).not.toContain(body.slice(0, 16));
    }
  });
});

describe('parseFcmServiceAccount', () => {
  it('accepts the service account object and its JSON text', () => {
    const fromObject = parseFcmServiceAccount(sa.json);
    expect(fromObject).toMatchObject({
      type: 'service_account',
      project_id: 'pushd-test',
      client_email: sa.json.client_email,
      private_key_id: sa.json.private_key_id,
    });
    expect(parseFcmServiceAccount(JSON.stringify(sa.json))).toEqual(fromObject);
  });

  it('repairs a private key whose newlines arrived as literal \\n', () => {
    const flattened = { ...sa.json, private_key: sa.json.private_key.replace(/\n/g, '\\n') };
    expect(parseFcmServiceAccount(flattened).private_key).toBe(sa.json.private_key);
  });

  it.each([
    ['invalid JSON text', '{"type":', /not valid JSON/],
    ['an array', [], /must be a JSON object/],
    ['another credential type', { ...sa.json, type: 'authorized_user' }, /service_account/],
    ['missing project_id', { ...sa.json, project_id: undefined }, /project_id/],
    ['a project_id with a slash', { ...sa.json, project_id: 'a/b' }, /project_id/],
    ['missing client_email', { ...sa.json, client_email: '' }, /client_email/],
    ['missing private_key', { ...sa.json, private_key: undefined }, /private_key/],
    ['a private_key that is not PEM', { ...sa.json, private_key: 'MIIEv...' }, /PEM/],
    ['an EC private_key', { ...sa.json, private_key: pkcs8('ec').export({ type: 'pkcs8', format: 'pem' }).toString() }, /RSA/],
    [
      'a broken PEM',
      { ...sa.json, private_key: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----' },
      /not a readable private key/,
    ],
  ])('refuses %s', (_name, input, message) => {
    expect(() => parseFcmServiceAccount(input)).toThrow(CredentialsError);
    expect(() => parseFcmServiceAccount(input)).toThrow(message);
  });
});
