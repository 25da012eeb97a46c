/**
 * The ceiling's client, in a process of its own (as the worker is), so it does not share a core with the
 * mock gateways: `node --import tsx bench/lib/bare-client.ts <json spec>` prints `{"ms","ok"}`.
 */
import { apnsJwt, bareSend } from './bare-http2.js';

interface Spec {
  devices: number;
  apnsOrigin: string;
  fcmOrigin: string;
  topic: string;
  apnsKey: { keyPem: string; keyId: string; teamId: string };
  fcmProject: string;
  fcmAccessToken: string;
}

const spec = JSON.parse(process.argv[2]!) as Spec;
const jwt = apnsJwt(spec.apnsKey.keyPem, spec.apnsKey.keyId, spec.apnsKey.teamId);
const token = (i: number) => Buffer.from(`${i}`.padStart(32, '0')).toString('hex');
const half = Math.floor(spec.devices / 2);
const start = performance.now();
const [a, f] = await Promise.all([
  bareSend(
    { origin: spec.apnsOrigin, path: (i) => `/3/device/${token(i)}`, headers: { authorization: `bearer ${jwt}`, 'apns-topic': spec.topic, 'apns-push-type': 'alert' }, body: () => '{"aps":{"alert":"bench","badge":1}}' },
    half,
    { sessions: 2, window: 200 },
  ),
  bareSend(
    { origin: spec.fcmOrigin, path: () => `/v1/projects/${spec.fcmProject}/messages:send`, headers: { authorization: `Bearer ${spec.fcmAccessToken}` }, body: (i) => JSON.stringify({ message: { token: token(i), data: { alert: 'bench' }, android: { priority: 'high', notification: { body: 'bench' } } } }) },
    spec.devices - half,
    { sessions: 2, window: 200 },
  ),
]);
process.stdout.write(JSON.stringify({ ms: performance.now() - start, ok: a.ok + f.ok }) + '\n');
