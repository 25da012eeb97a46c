/**
 * The ceiling's client, in a process of its own (as the worker is), so it does not share a core with the
 * mock gateways: `node --import tsx bench/lib/bare-client.ts <json spec>` prints `{"ms","ok","cpuMs"}`.
 *
 * It sends the same requests the pipeline sends — the headers node-apn and our FCM client put on the
 * wire and the bodies of the production payload mapping for the same notification — so the two
 * measurements differ only by the service around the HTTP/2 client, not by the work the mocks do.
 */
import { fcmSendBodyEncoder, toApnsRequest, toFcmMessage } from '../../src/domain/push-mapping.js';
import { apnsJwt, bareSend } from './bare-http2.js';
import { registrationToken } from './device-fill.js';

interface Spec {
  devices: number;
  apnsOrigin: string;
  fcmOrigin: string;
  topic: string;
  apnsKey: { keyPem: string; keyId: string; teamId: string };
  fcmProject: string;
  fcmAccessToken: string;
  payload: Record<string, unknown>;
  notificationId: string;
  /** HTTP/2 connections per gateway, and streams in flight on each (what a real gateway allows: 1,000) */
  connections: number;
  streamsPerConnection: number;
  /** 'registration': the tokens of registration(i), APNs the even i and FCM the odd, as a fill of those has them */
  tokens?: 'registration';
  /**
   * Personal alerts, as the templates benchmark renders them: device i's is `Hi name-<i mod names>`, a tenth of the
   * devices `Hi there`; spliced into the body serialised once, as a well-made client of its own would.
   */
  personal?: { names: number };
}

const spec = JSON.parse(process.argv[2]!) as Spec;
const jwt = apnsJwt(spec.apnsKey.keyPem, spec.apnsKey.keyId, spec.apnsKey.teamId);
const token = (i: number) => Buffer.from(`${i}`.padStart(32, '0')).toString('hex');
const half = Math.floor(spec.devices / 2);
// made before the clock starts, as the pipeline reads them from its database
const listed = (n: number, first: number) => Array.from({ length: n }, (_, k) => registrationToken(2 * k + first));
const [apnsTokens, fcmTokens] = spec.tokens === 'registration' ? [listed(half, 0), listed(spec.devices - half, 1)] : [undefined, undefined];
const apnsToken = apnsTokens ? (i: number) => apnsTokens[i]! : token;
const fcmToken = fcmTokens ? (i: number) => fcmTokens[i]! : token;
const MARK = 'PERSONAL_ALERT_7f3a';
const payload = spec.personal ? { ...spec.payload, alert: MARK } : spec.payload;
const apns = toApnsRequest(payload, spec.notificationId);
const apnsBody = JSON.stringify(apns.body);
const fcmBody = fcmSendBodyEncoder(toFcmMessage(payload, spec.notificationId));
/** Device i's alert as it is inside a JSON string, spliced where the mark is (FCM carries it twice). */
const alertOf = (i: number) => JSON.stringify(i % 10 === 0 ? 'Hi there' : `Hi name-${i % spec.personal!.names}`).slice(1, -1);
const apnsParts = spec.personal ? apnsBody.split(MARK) : null;
const TOKEN = 'PERSONAL_TOKEN_91c2';
const fcmParts = spec.personal ? fcmBody(TOKEN).split(MARK) : null;
const start = performance.now();
const cpuStart = process.cpuUsage();
const [a, f] = await Promise.all([
  bareSend(
    {
      origin: spec.apnsOrigin,
      path: (i) => `/3/device/${apnsToken(i)}`,
      headers: {
        ':scheme': 'https',
        ':authority': new URL(spec.apnsOrigin).hostname,
        'apns-priority': String(apns.headers['apns-priority']),
        'apns-topic': spec.topic,
        'apns-push-type': apns.headers['apns-push-type'],
        authorization: `bearer ${jwt}`,
      },
      body: (i) => (apnsParts ? apnsParts.join(alertOf(i)) : apnsBody),
    },
    half,
    { sessions: spec.connections, window: spec.connections * spec.streamsPerConnection },
  ),
  bareSend(
    {
      origin: spec.fcmOrigin,
      path: () => `/v1/projects/${spec.fcmProject}/messages:send`,
      headers: {
        authorization: `Bearer ${spec.fcmAccessToken}`,
        'content-type': 'application/json; charset=UTF-8',
        accept: 'application/json',
      },
      body: (i) => (fcmParts ? fcmParts.join(alertOf(i)).replace(TOKEN, () => fcmToken(i)) : fcmBody(fcmToken(i))),
    },
    spec.devices - half,
    { sessions: spec.connections, window: spec.connections * spec.streamsPerConnection },
  ),
]);
const cpu = process.cpuUsage(cpuStart); // all threads, GC helpers included
process.stdout.write(JSON.stringify({ ms: performance.now() - start, ok: a.ok + f.ok, cpuMs: (cpu.user + cpu.system) / 1000 }) + '\n');
