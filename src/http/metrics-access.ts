import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Metrics } from '../platform/metrics.js';

/** What `GET /metrics` answers a request: the metrics, or why not (status and `{"error"}`). */
export type MetricsAccess = { ok: true } | { ok: false; status: number; error: string };

/**
 * Who may read the metrics. With a token, only a request that brings it as a bearer credential; without one, the API
 * port serves none (its listener may face the internet) while a listener of their own (METRICS_BIND) serves them.
 */
export function metricsAccess(authorization: string | undefined, token: string | undefined, ownListener: boolean): MetricsAccess {
  if (token === undefined) {
    return ownListener
      ? { ok: true }
      : { ok: false, status: 404, error: 'metrics: not served on this port (set METRICS_TOKEN, or METRICS_BIND for a listener apart)' };
  }
  const given = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
  // hashed first, so the comparison takes the same time whatever the length given
  if (given !== undefined && timingSafeEqual(sha256(given), sha256(token))) return { ok: true };
  return { ok: false, status: 401, error: 'authorization: /metrics needs METRICS_TOKEN as a bearer token' };
}

const sha256 = (value: string) => createHash('sha256').update(value).digest();

export interface MetricsListener {
  address: AddressInfo;
  close(): Promise<void>;
}

/** The listener of METRICS_BIND: `GET /metrics` and nothing else, in any role (a worker has no API port). */
export async function listenForMetrics(
  metrics: Metrics,
  options: { host: string; port: number; token: string | undefined },
): Promise<MetricsListener> {
  const server = createServer((request: IncomingMessage, response) => {
    const send = (status: number, type: string, body: string) => {
      response.writeHead(status, { 'content-type': type, ...(status === 401 ? { 'www-authenticate': 'Bearer' } : {}) });
      response.end(body);
    };
    const path = (request.url ?? '').split('?')[0];
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD'))
      return send(404, 'application/json', JSON.stringify({ error: 'path: this listener serves GET /metrics only' }));
    const access = metricsAccess(request.headers.authorization, options.token, true);
    if (!access.ok) return send(access.status, 'application/json', JSON.stringify({ error: access.error }));
    metrics.registry.metrics().then(
      (body) => send(200, metrics.registry.contentType, body),
      () => send(500, 'application/json', JSON.stringify({ error: 'metrics: could not be collected' })),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    address: server.address() as AddressInfo,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
