/**
 * The ceiling of the HMS benchmark, in a process of its own: `node --import tsx bench/lib/bare-hms.ts <json spec>`
 * sends the same Push Kit requests the gateway sends (the production mapping of the same notification, 1,000 tokens
 * a request, the same headers and bearer token) to the same mock over bare node:http2, and prints `{"ms","ok","cpuMs"}`
 * (`ok`: the requests answered 2xx).
 */
import { toHmsMessage } from '../../src/domain/push-mapping.js';
import { HMS_MAX_TOKENS_PER_REQUEST } from '../../src/gateways/hms.js';
import { bareSend } from './bare-http2.js';
import { hmsTokenOf } from './hms-tokens.js';

interface Spec {
  devices: number;
  origin: string;
  hmsAppId: string;
  accessToken: string;
  payload: Record<string, unknown>;
  notificationId: string;
  connections: number;
  /** requests (of up to 1,000 tokens) in flight across the connections */
  inFlight: number;
}

const spec = JSON.parse(process.argv[2]!) as Spec;
const message = toHmsMessage(spec.payload, spec.notificationId, { now: new Date() });
const requests = Math.ceil(spec.devices / HMS_MAX_TOKENS_PER_REQUEST);
const start = performance.now();
const cpuStart = process.cpuUsage();
const result = await bareSend(
  {
    origin: spec.origin,
    path: () => `/v1/${spec.hmsAppId}/messages:send`,
    headers: {
      authorization: `Bearer ${spec.accessToken}`,
      'content-type': 'application/json; charset=UTF-8',
      accept: 'application/json',
    },
    body: (r) => {
      const first = r * HMS_MAX_TOKENS_PER_REQUEST;
      const count = Math.min(HMS_MAX_TOKENS_PER_REQUEST, spec.devices - first);
      const token = Array.from({ length: count }, (_, j) => hmsTokenOf(first + j));
      return JSON.stringify({ validate_only: false, message: { ...message, token } });
    },
  },
  requests,
  { sessions: spec.connections, window: spec.inFlight },
);
const cpu = process.cpuUsage(cpuStart); // all threads, GC helpers included
process.stdout.write(JSON.stringify({ ms: performance.now() - start, ok: result.ok, cpuMs: (cpu.user + cpu.system) / 1000 }) + '\n');
