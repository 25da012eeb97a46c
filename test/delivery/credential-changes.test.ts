import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AppChanges } from '../../src/db/app-changes.js';
import { AppsRepository } from '../../src/db/repositories/apps.js';
import { parseApnsCredentials } from '../../src/domain/credentials.js';
import { generateApnsKey } from '../mocks/index.js';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { registerDevice, setCredentials, startGateways, waitFor, type Gateways, type RegisteredDevice } from '../helpers/gateways.js';

/**
 * Resolves when this process next empties its caches (`AppChanges.changed`, which the server's listener calls on
 * hearing an announcement): a change committed before then is read from then on. Nothing else in these tests empties
 * them meanwhile, so the first call after this is the change's.
 */
function serverHears(): { heard: Promise<void> } {
  const changed = vi.spyOn(AppChanges.prototype, 'changed');
  const heard = waitFor('the server to hear the change', async () => changed.mock.calls.length > 0, 5_000, 10);
  return { heard: heard.then(() => changed.mockRestore()) };
}

/** The key id a provider token (JWT) names in its header. */
const kidOf = (jwt: string): unknown => JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString()).kid;

/**
 * A server keeps the credentials, limits and keys it read while it hears every change to them: a change committed
 * by another process (the CLI, another API) applies to its next notification and its next request.
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

  const post = async (alert: string) => {
    const res = await h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(keys.write) },
      payload: { notification: { to: [{ name: 'device_id', criteria: [device.id] }], payload: { alert } } },
    });
    expect(res.statusCode, res.body).toBe(201);
  };
  const send = async (alert: string) => {
    await post(alert);
    return waitFor(`the push "${alert}"`, async () => gw.apns.pushes.find((p) => JSON.stringify(p.payload).includes(alert)));
  };

  it('a rotated APNs key signs the next push', async () => {
    const first = await send('before the rotation');
    expect(kidOf(first.jwt)).toBe(gw.apnsKey.credentials.keyId);

    const rotated = generateApnsKey({ teamId: gw.apnsKey.credentials.teamId });
    gw.apns.addKey(rotated);
    // stored as the CLI stores it, from outside the server's services, and heard by the server a moment after the commit
    const { heard } = serverHears();
    const sealed = h.secrets.seal(JSON.stringify(parseApnsCredentials(rotated.credentials)), 'apns_credentials');
    await new AppsRepository().setCredentials(h.db.db, app.id, 'apns', sealed);
    await heard;
    await new Promise((r) => setTimeout(r, 200));
    const next = await send('after the rotation');
    expect(kidOf(next.jwt)).toBe(rotated.credentials.keyId);
  });

  it("an app's new ceiling paces its next notifications", async () => {
    await send('before the ceiling');
    // set as the CLI sets it (`pushd app set-limits`), from outside the server's services; the server hears it a
    // moment after the commit (it reads settings per request, not per batch as credentials)
    const { heard } = serverHears();
    await new AppsRepository().setLimits(h.db.db, app.id, { maxPerMinute: 1 });
    try {
      await heard;
      await new Promise((r) => setTimeout(r, 200));
      const alerts = ['under the ceiling 1', 'under the ceiling 2'];
      for (const alert of alerts) await post(alert);
      const arrived = () => gw.apns.pushes.filter((p) => alerts.some((a) => JSON.stringify(p.payload).includes(a)));
      await waitFor('the first push under the ceiling', async () => arrived().length > 0);
      // one push a minute: the other waits for the next minute (read before the change, both would go at once)
      await new Promise((r) => setTimeout(r, 1500));
      expect(arrived()).toHaveLength(1);
    } finally {
      await new AppsRepository().setLimits(h.db.db, app.id, { maxPerMinute: null });
    }
  });
});
