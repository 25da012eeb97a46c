import { TLS_CA_PATH, testCaTrusted } from '../mocks/tls.js';

/** Gateways trust the mocks only through NODE_EXTRA_CA_CERTS, which Node reads at start-up. */
export function requireTestCa(): void {
  if (!testCaTrusted()) {
    throw new Error(`start the test process with NODE_EXTRA_CA_CERTS=${TLS_CA_PATH} (the vitest config sets it for workers)`);
  }
}
