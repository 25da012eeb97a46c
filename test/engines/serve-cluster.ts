/**
 * The cluster profile's engines as a process of their own, for scripts/container-check.sh to run the profile's
 * pushd containers against (standing in for the compose file's redis-N, postgres, postgres-replica and pgbouncer):
 *   node --import tsx test/engines/serve-cluster.ts DIR
 * starts a Redis Cluster of 3 masters with a replica each, a PostgreSQL primary with a streaming replica and
 * PgBouncer in transaction mode in front of the primary, creates the database `pushd`, writes DIR/engines.json
 * (the URLs the profile's settings name, for this machine: DATABASE_URL through PgBouncer, DATABASE_LISTEN_URL,
 * DATABASE_READ_URL, REDIS_URL, and the Redis nodes' ports), then runs until SIGTERM.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { startPrimaryWithReplica } from './pg-replica.js';
import { startPgBouncer } from './pgbouncer.js';
import { startRedisCluster } from './redis-cluster.js';

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: serve-cluster.ts DIR\n');
  process.exit(2);
}
const cluster = await startRedisCluster(3, 1);
const postgres = await startPrimaryWithReplica();
const bouncer = await startPgBouncer({ serverUrl: postgres.primaryUrl });
const admin = new pg.Client({ connectionString: postgres.primaryUrl });
await admin.connect();
await admin.query('CREATE DATABASE pushd');
await admin.end();
const database = new URL(postgres.primaryUrl);
database.pathname = '/pushd';
const engines = {
  DATABASE_URL: bouncer.through(database.toString()),
  DATABASE_LISTEN_URL: database.toString(),
  DATABASE_READ_URL: postgres.onReplica(database.toString()),
  REDIS_URL: `redis://127.0.0.1:${cluster.ports[0]}`,
  redisPorts: cluster.ports,
};
writeFileSync(path.join(dir, 'engines.json'), JSON.stringify(engines));

const stop = async () => {
  await bouncer.stop();
  await postgres.stop();
  await cluster.stop();
  process.exit(0);
};
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
