/**
 * The ceiling of the Live Activity benchmark, in a process of its own: `node --import tsx bench/lib/bare-live-activity.ts
 * <json spec>` sends the same Live Activity update, byte for byte and with the same headers, to the same activity
 * tokens on the mock APNs over bare node:http2, and prints `{"ms","ok","cpuMs"}`.
 */
import { toLiveActivityRequest } from '../../src/domain/push-mapping.js';
import { liveActivityTopic } from '../../src/domain/live-activity.js';
import { apnsJwt, bareSend } from './bare-http2.js';
import { activityTokenOf } from './live-activity-tokens.js';

interface Spec {
  tokens: number;
  apnsOrigin: string;
  topic: string;
  apnsKey: { keyPem: string; keyId: string; teamId: string };
  payload: Record<string, unknown>;
  connections: number;
  streamsPerConnection: number;
}

const spec = JSON.parse(process.argv[2]!) as Spec;
const jwt = apnsJwt(spec.apnsKey.keyPem, spec.apnsKey.keyId, spec.apnsKey.teamId);
const request = toLiveActivityRequest(spec.payload);
const body = JSON.stringify(request.body);
const start = performance.now();
const cpuStart = process.cpuUsage();
const result = await bareSend(
  {
    origin: spec.apnsOrigin,
    path: (i) => `/3/device/${activityTokenOf(i)}`,
    headers: {
      ':scheme': 'https',
      ':authority': new URL(spec.apnsOrigin).hostname,
      'apns-priority': String(request.headers['apns-priority']),
      'apns-topic': liveActivityTopic(spec.topic),
      'apns-push-type': request.headers['apns-push-type'],
      authorization: `bearer ${jwt}`,
    },
    body: () => body,
  },
  spec.tokens,
  { sessions: spec.connections, window: spec.connections * spec.streamsPerConnection },
);
const cpu = process.cpuUsage(cpuStart);
process.stdout.write(JSON.stringify({ ms: performance.now() - start, ok: result.ok, cpuMs: (cpu.user + cpu.system) / 1000 }) + '\n');
