/**
 * The gateway mocks as a process of their own, for checks that run pushd elsewhere (a container):
 *   node --import tsx test/mocks/serve.ts DIR
 * writes DIR/apns.p8, DIR/service-account.json and DIR/mocks.json (the origins to configure, the APNs key and
 * team ids, and a control URL whose GET /pushes lists the tokens each mock accepted), then runs until SIGTERM.
 * The pushd side must trust test/fixtures/tls/ca.pem (NODE_EXTRA_CA_CERTS).
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { ApnsMock, FcmMock, generateApnsKey, generateServiceAccount } from './index.js';

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: serve.ts DIR\n');
  process.exit(2);
}
// Containers on the host network reach loopback; another address can be given for other setups.
const host = process.env.MOCK_HOST ?? '127.0.0.1';

const apnsKey = generateApnsKey();
const serviceAccount = generateServiceAccount();
const apns = (await ApnsMock.start({ host })).addKey(apnsKey);
const sandbox = (await ApnsMock.start({ host })).addKey(apnsKey);
const fcm = (await FcmMock.start({ host })).addServiceAccount(serviceAccount);

const control = createServer((req, res) => {
  if (req.url !== '/pushes') {
    res.writeHead(404).end();
    return;
  }
  const body = {
    apns: apns.pushes.map((p) => p.token),
    sandbox: sandbox.pushes.map((p) => p.token),
    fcm: fcm.pushes.map((p) => p.token),
  };
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
});
await new Promise<void>((resolve) => control.listen(0, host, resolve));

// Readable by the container's unprivileged user.
writeFileSync(path.join(dir, 'apns.p8'), apnsKey.credentials.keyPem, { mode: 0o644 });
writeFileSync(path.join(dir, 'service-account.json'), JSON.stringify(serviceAccount.json), { mode: 0o644 });
writeFileSync(
  path.join(dir, 'mocks.json'),
  JSON.stringify({
    APNS_ORIGIN_PRODUCTION: apns.origin,
    APNS_ORIGIN_SANDBOX: sandbox.origin,
    FCM_ORIGIN: fcm.origin,
    GOOGLE_TOKEN_URL: fcm.tokenUrl,
    keyId: apnsKey.credentials.keyId,
    teamId: apnsKey.credentials.teamId,
    control: `http://${host}:${(control.address() as AddressInfo).port}`,
  }),
);

const stop = async () => {
  control.close();
  await Promise.all([apns.close(), sandbox.close(), fcm.close()]);
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
