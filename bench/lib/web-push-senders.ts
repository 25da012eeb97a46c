/**
 * The two senders the Web Push benchmark compares pushd with, each in a process of its own (as the worker is):
 * `node --import tsx bench/lib/web-push-senders.ts <json spec>` prints `{"ms","ok","cpuMs"}`.
 *
 * - `bare`: node:http2 to the push service with the window pushd keeps (connections × streams), each push encrypted
 *   as RFC 8291 requires (pushd's encryptRecord: a fresh ECDH key pair and salt per push), one VAPID JWT signed for
 *   the origin and reused: what pushd does with nothing of the service around it.
 * - `web-push`: the web-push package's sendNotification in a loop with `concurrency` in flight, as the Parse Server
 *   push adapter sends: one HTTPS (HTTP/1.1) request per push, a JWT signed per push.
 * Both send device i the document pushd maps for the same notification, encrypted to device i's keys.
 */
import webpush from 'web-push';
import { toWebPushMessage } from '../../src/domain/push-mapping.js';
import { encryptRecord } from '../../src/gateways/web-push.js';
import { bareSend, es256Jwt } from './bare-http2.js';
import { browserKeyPool } from './web-push-mock.js';

export interface WebPushSenderSpec {
  sender: 'bare' | 'web-push';
  devices: number;
  origin: string;
  keyPoolSize: number;
  vapid: { subject: string; publicKey: string; privateKey: string; privateKeyPem: string };
  payload: Record<string, unknown>;
  notificationId: string;
  /** bare: HTTP/2 connections and streams in flight on each; web-push: requests in flight */
  connections: number;
  streamsPerConnection: number;
  concurrency: number;
}

const spec = JSON.parse(process.argv[2]!) as WebPushSenderSpec;
const pool = browserKeyPool(spec.keyPoolSize);
const message = toWebPushMessage(spec.payload, spec.notificationId, { now: new Date() });
// devices are numbered from 1, as the benchmark's fill numbers them
const device = (i: number) => ({ endpoint: `${spec.origin}/push/${i + 1}`, keys: pool[(i + 1) % pool.length]! });

const start = performance.now();
const cpuStart = process.cpuUsage();
const sent = spec.sender === 'bare' ? await sendBare() : await sendWithWebPushPackage();
const cpu = process.cpuUsage(cpuStart); // all threads, GC helpers included
process.stdout.write(JSON.stringify({ ms: performance.now() - start, ok: sent, cpuMs: (cpu.user + cpu.system) / 1000 }) + '\n');

async function sendBare(): Promise<number> {
  const exp = Math.floor(Date.now() / 1000) + 12 * 3600;
  const jwt = es256Jwt(spec.vapid.privateKeyPem, { typ: 'JWT', alg: 'ES256' }, { aud: spec.origin, exp, sub: spec.vapid.subject });
  const result = await bareSend(
    {
      origin: spec.origin,
      path: (i) => new URL(device(i).endpoint).pathname,
      headers: {
        authorization: `vapid t=${jwt}, k=${spec.vapid.publicKey}`,
        'content-encoding': 'aes128gcm',
        'content-type': 'application/octet-stream',
        ttl: message.headers.TTL,
        urgency: message.headers.Urgency,
      },
      body: (i) => encryptRecord(message.body, device(i).keys),
    },
    spec.devices,
    { sessions: spec.connections, window: spec.connections * spec.streamsPerConnection },
  );
  return result.ok;
}

async function sendWithWebPushPackage(): Promise<number> {
  const options = {
    vapidDetails: { subject: spec.vapid.subject, publicKey: spec.vapid.publicKey, privateKey: spec.vapid.privateKey },
    TTL: Number(message.headers.TTL),
    urgency: message.headers.Urgency as webpush.Urgency,
    contentEncoding: 'aes128gcm' as const,
  };
  let next = 0;
  let ok = 0;
  const lane = async () => {
    for (let i = next++; i < spec.devices; i = next++) {
      const { endpoint, keys } = device(i);
      // it throws a WebPushError on any answer but 2xx: that push is missed, which the mock's tally reports
      const res = await webpush
        .sendNotification({ endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } }, message.body, options)
        .catch((err: webpush.WebPushError) => err);
      if (res.statusCode >= 200 && res.statusCode < 300) ok++;
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, lane));
  return ok;
}
