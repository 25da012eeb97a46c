import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppsRepository } from '../../src/db/repositories/apps.js';
import { parseApnsCredentials } from '../../src/domain/credentials.js';
import { generateApnsKey } from '../mocks/index.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/** The key id a provider token (JWT) names in its header. */
const kidOf = (jwt: string): unknown => JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString()).kid;

/**
 * A server keeps the credentials and keys it read while it hears every change to them: a change committed by
 * another process (the CLI, another API) applies to its next notification and its next request.
 */
describe('changes committed elsewhere apply to the next send and request', () => {
  let h: Harness;
  let gw: Gateways;
  let app: { id: string };
  let keys: { read: string; write: string; sdk: string };
  let device: RegisteredDevice;

  beforeAll(async () => {
    gw = await startGateways();
    h = await createHarness({ workers: true, env: gw.env });
    const created = await h.createApp('com.example.rotation');
    app = created.app;
    keys = created.keys;
    await setCredentials(h, app.id, gw);
    device = await registerDevice(h, keys.sdk, { platform: 'ios' });
  });
  afterAll(async () => {
    await h?.close();
    await gw?.close();
  });

  const send = async (alert: string) => {
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: [{ name: 'device_id', criteria: [device.id] }], payload: { alert } } },
    });
    expect(res.statusCode, res.body).toBe(201);
    return waitFor(`the push "${alert}"`, async () => gw.apns.pushes.find((p) => JSON.stringify(p.payload).includes(alert)));
  };

  it('a rotated APNs key signs the next push', async () => {
    const first = await send('before the rotation');
    expect(kidOf(first.jwt)).toBe(gw.apnsKey.credentials.keyId);

    const rotated = generateApnsKey({ teamId: gw.apnsKey.credentials.teamId });
    gw.apns.addKey(rotated);
    // stored as the CLI stores it, from outside the server's services
    await new AppsRepository().setCredentials(h.db.db, app.id, 'apns', { ...parseApnsCredentials(rotated.credentials) });
    const next = await send('after the rotation');
    expect(kidOf(next.jwt)).toBe(rotated.credentials.keyId);
  });
});
