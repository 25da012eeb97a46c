import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/platform/config.js';
import { Metrics } from '../../src/platform/metrics.js';
import { listenForMetrics } from '../../src/http/metrics-access.js';
import { metricsAuth, TEST_METRICS_TOKEN, useHarness } from '../helpers/harness.js';

/**
 * Who reads /metrics: by default nobody on the API port (it binds 0.0.0.0); with METRICS_TOKEN whoever brings it;
 * on METRICS_BIND a listener apart that serves /metrics alone.
 */
describe('/metrics on the API port', () => {
  const plain = useHarness();
  const guarded = useHarness({ env: { METRICS_TOKEN: TEST_METRICS_TOKEN } });

  it('is not served by default', async () => {
    const res = await plain.server.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatch(/^metrics: .*METRICS_TOKEN/);
    expect(res.body).not.toContain('pushd_');
  });

  it('asks for METRICS_TOKEN as a bearer token when it is set', async () => {
    for (const authorization of [undefined, 'Bearer wrong-token-0123456789', `Basic ${TEST_METRICS_TOKEN}`, 'Bearer ']) {
      const res = await guarded.server.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });
      expect(res.statusCode, String(authorization)).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer');
      expect(res.body).not.toContain('pushd_');
    }
    const res = await guarded.server.inject({ method: 'GET', url: '/metrics', headers: metricsAuth });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('pushd_http_requests_in_flight');
  });
});

describe('METRICS_BIND', () => {
  it('parses host:port, IPv6 in brackets, and refuses anything else naming the setting', () => {
    expect(loadConfig({ METRICS_BIND: '127.0.0.1:9464' }).METRICS_BIND).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(loadConfig({ METRICS_BIND: '[::1]:9464' }).METRICS_BIND).toEqual({ host: '::1', port: 9464 });
    for (const bad of ['9464', '127.0.0.1', '127.0.0.1:99999', '[nothost]:1', 'a:b'])
      expect(() => loadConfig({ METRICS_BIND: bad }), bad).toThrow(/METRICS_BIND: must be host:port/);
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).toThrow(/METRICS_TOKEN/);
  });

  it('serves GET /metrics alone on a listener apart, with the token when one is set', async () => {
    const metrics = new Metrics();
    const open = await listenForMetrics(metrics, { host: '127.0.0.1', port: 0, token: undefined });
    const guarded = await listenForMetrics(metrics, { host: '127.0.0.1', port: 0, token: TEST_METRICS_TOKEN });
    try {
      const url = (l: typeof open, path = '/metrics') => `http://127.0.0.1:${l.address.port}${path}`;
      const res = await fetch(url(open));
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('pushd_pushes_total');
      expect((await fetch(url(open, '/v6/key'))).status).toBe(404);
      expect((await fetch(url(open), { method: 'POST' })).status).toBe(404);

      expect((await fetch(url(guarded))).status).toBe(401);
      expect((await fetch(url(guarded), { headers: { authorization: 'Bearer not-the-token-at-all' } })).status).toBe(401);
      const ok = await fetch(url(guarded), { headers: metricsAuth });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('pushd_pushes_total');
    } finally {
      await open.close();
      await guarded.close();
    }
  });
});
