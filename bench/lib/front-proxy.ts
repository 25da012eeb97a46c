import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HAPROXY } from '../../test/engines/patroni.js';
import { freePort } from './setup.js';

export interface FrontProxy {
  base: string;
  close(): Promise<void>;
}

/**
 * HAProxy in front of one API process, as a deployment puts a load balancer there: it holds the clients'
 * connections (accepting a burst of them at once, which a saturated Node loop does one a turn), keeps at most
 * `maxConn` requests at the service, queues the rest up to `queueMs` and answers those past it 503 with Retry-After.
 */
export async function startFrontProxy(backend: string, opts: { maxConn: number; queueMs: number }): Promise<FrontProxy> {
  const dir = mkdtempSync(path.join(tmpdir(), 'pushd-front-'));
  const port = await freePort();
  const body = JSON.stringify({ error: 'the server is at capacity: try again later' });
  const refusal = [
    'HTTP/1.1 503 Service Unavailable',
    'content-type: application/json; charset=utf-8',
    'retry-after: 1',
    `content-length: ${Buffer.byteLength(body)}`,
    '',
    body,
  ].join('\r\n');
  writeFileSync(path.join(dir, '503.http'), refusal);
  const { hostname, port: backendPort } = new URL(backend);
  const config = [
    'global',
    '  maxconn 9000',
    'defaults',
    '  mode http',
    '  option http-keep-alive',
    '  http-reuse always',
    '  timeout connect 1s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  timeout http-keep-alive 60s',
    `  timeout queue ${opts.queueMs}ms`,
    'frontend api',
    `  bind 127.0.0.1:${port}`,
    '  default_backend pushd',
    'backend pushd',
    `  errorfile 503 ${path.join(dir, '503.http')}`,
    `  server pushd ${hostname}:${backendPort} maxconn ${opts.maxConn}`,
    '',
  ].join('\n');
  writeFileSync(path.join(dir, 'haproxy.cfg'), config);
  const child = spawn(HAPROXY, ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'ignore', 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const up = await fetch(`${base}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (i > 100 || child.exitCode !== null) throw new Error('haproxy did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    async close() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
