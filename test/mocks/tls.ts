/**
 * The loopback TLS identity of the mocks (test/fixtures/tls). Clients trust it through
 * NODE_EXTRA_CA_CERTS=test/fixtures/tls/ca.pem, set before Node starts (vitest config / bench script).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));

export const TLS_CA_PATH = `${dir}ca.pem`;

export function serverTls(): { key: Buffer; cert: Buffer } {
  return { key: readFileSync(`${dir}server-key.pem`), cert: readFileSync(`${dir}server.pem`) };
}

/** True when this process was started trusting the test CA; tests fail fast with a hint otherwise. */
export function testCaTrusted(): boolean {
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  return extra !== undefined && readFileSync(extra, 'utf8').trim() === readFileSync(TLS_CA_PATH, 'utf8').trim();
}
