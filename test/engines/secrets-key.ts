import { decodeSecretsKey, SecretsKeyring } from '../../src/domain/secrets.js';

/**
 * The secrets key the tests and benchmarks run their servers on DATABASE_URL with (a server there must be given one,
 * docs/secrets.md), so what a test stores through a service directly its server processes open. A test key only.
 */
export const TEST_SECRETS_KEY = 'cHVzaGQtdGVzdC1zZWNyZXRzLWtleS0zMi1ieXRlcyE=';

export const testKeyring = (): SecretsKeyring => new SecretsKeyring(decodeSecretsKey(TEST_SECRETS_KEY)!);

/** `env` with the test key added where it names a database server and no key of its own. */
export function withTestSecretsKey<T extends Record<string, string | undefined>>(env: T): T {
  const given = ['SECRETS_KEY', 'SECRETS_KEY_FILE'].some((name) => Object.hasOwn(env, name));
  return env.DATABASE_URL && !given ? { ...env, SECRETS_KEY: TEST_SECRETS_KEY } : env;
}
