import { execFileSync } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/db/embedded.js';
import { createLogger } from '../../src/platform/logger.js';

declare module 'vitest' {
  export interface ProvidedContext {
    adminDatabaseUrl: string;
    redisUrl: string | null;
  }
}

let embedded: EmbeddedDatabase | undefined;

/**
 * Builds dist/ once. One PostgreSQL for the run: DATABASE_URL when given (CI), else an embedded one (a bare machine).
 * Redis: REDIS_URL, else a local Redis if one answers; without one, Redis tests are skipped with a notice.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The CLI and the system tests run the compiled code, as users do.
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    const dir = path.resolve('.test-data');
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    embedded = await startEmbeddedPostgres(dir, Number(process.env.TEST_PG_PORT ?? 54339), createLogger('warn'));
    adminUrl = embedded.url;
    process.stdout.write(`[tests] no DATABASE_URL: using an embedded PostgreSQL\n`);
  }
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redisUp = await reachable(new URL(redisUrl));
  if (!redisUp) process.stdout.write(`[tests] NOTICE: no Redis at ${redisUrl}: tests that need Redis are skipped\n`);
  project.provide('adminDatabaseUrl', adminUrl);
  project.provide('redisUrl', redisUp ? redisUrl : null);
  return async () => {
    await embedded?.stop();
  };
}

function reachable(url: URL): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port || 6379) });
    socket.setTimeout(1000);
    socket.once('connect', () => {
      socket.end();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}
