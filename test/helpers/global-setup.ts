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

interface Services {
  adminUrl: string;
  redisUrl: string | null;
  stop: () => Promise<void>;
}

/**
 * Shared by the projects of one run (vitest.config.ts): each calls this setup, the first starts the services,
 * the last to finish stops them.
 */
const shared = globalThis as { pushdTestServices?: { ready: Promise<Services>; users: number } };

/**
 * Builds dist/ when a source changed since its last build (scripts/build-if-stale.mjs). One PostgreSQL for the run:
 * DATABASE_URL when given (CI), else an embedded one (a bare machine).
 * Redis: REDIS_URL, else a local Redis if one answers; without one, Redis tests are skipped with a notice.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const entry = (shared.pushdTestServices ??= { ready: startServices(), users: 0 });
  entry.users += 1;
  const services = await entry.ready;
  project.provide('adminDatabaseUrl', services.adminUrl);
  project.provide('redisUrl', services.redisUrl);
  return async () => {
    entry.users -= 1;
    if (entry.users > 0) return;
    if (shared.pushdTestServices === entry) delete shared.pushdTestServices;
    await services.stop();
  };
}

async function startServices(): Promise<Services> {
  // The CLI and the system tests run the compiled code, as users do.
  execFileSync('node', ['scripts/build-if-stale.mjs'], { stdio: 'inherit' });
  let adminUrl = process.env.DATABASE_URL;
  let embedded: EmbeddedDatabase | undefined;
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
  return { adminUrl, redisUrl: redisUp ? redisUrl : null, stop: async () => embedded?.stop() };
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
