/**
 * Unicast benchmark: the traffic most apps send — many small notifications, each to one device. C concurrent
 * clients post K notifications, each targeting one seeded device (by a `device_id` filter, a `user_id` filter,
 * or through `POST /v6/transactional/notifications`, which answers once the gateway has), against the mock gateways. Each configuration runs on a fresh database: the API and the workers in
 * one process (`npm start`) or apart, on either queue backend. Beside the figures, PostgreSQL's own commit
 * ceiling on the same server (`pgbench -N`, 50 clients), so they can be read on a faster or slower machine, and the
 * floor (bench/lib/floor-server.ts, posted to by the same clients): what a durable 201 costs on this stack alone.
 *
 *   npm run bench -- unicast [--notifications 10000] [--clients 50] [--target device_id,user_id,transactional]
 *                            [--mode single,split] [--queue redis,postgres] [--timeout-s 300]
 *                            [--rate 0 | --rate-of-pgbench 0.5] [--gateway-latency-ms 0] [--warmup 10000] [--returning]
 *
 * By default the clients post as fast as they are answered (what the service absorbs). With --rate R they post R
 * notifications a second on a schedule, as live traffic comes, and the backlog (answered, not yet pushed) is
 * sampled as they go: whether delivery keeps up with that rate (`--rate 1000 --notifications 60000`: 60 s). A paced
 * post's latency counts from when it was due, so a post held back because all the clients were waiting counts that
 * wait (no coordinated omission). --rate-of-pgbench F sets R to F times the same run's `pgbench -N`.
 * --gateway-latency-ms N: the mocks answer every push N ms late, as a far data centre does.
 *
 * By default it measures what an outside client sees (the "outside" view): the clients in a process of their own
 * posting with node:http over a keep-alive http.Agent (HTTP/1.1, one connection each); the devices registered
 * through `POST /v6/devices` with the sdk key and what a phone sends (bench/lib/device-fill.ts); the service with
 * production's settings (rate limits on, their buckets in Redis when REDIS_URL is set, LOG_LEVEL info, its log
 * lines to a file, the node flags of `npm start`); the mock gateways in a process of their own. --lab measures as
 * the lab did: the clients (undici) on a thread of this process, bare device rows inserted by SQL, rate limits off
 * and LOG_LEVEL warn, the mocks on this process's main thread. Each part can be switched alone, to tell which one
 * makes a difference:
 *   --clients-in process|thread  --http-client http|undici  --devices api|sql  --config production|lab
 *   --mocks-in process|bench     --registered N (devices registered, at least --notifications + --warmup)
 *   --analyze yes|no (no: the devices' table left without statistics after the fill, as on a server without autovacuum)
 *   --notification-days N (the day partitions of the last N days made before the run, as a server holds them after
 *   N days: the notifications' are kept RETENTION_NOTIFICATIONS_DAYS, 90 by default; a new database has today's)
 *   --latencies-to PREFIX (each counted post's latency in ms, a line each in the order posted, to PREFIX-<target>-<mode>-<queue>.txt:
 *   when the slow ones came)
 *   --wal-detail (the counted window's WAL by relation and record kind, a notification's share of each, with
 *   pg_walinspect, PostgreSQL 15 or later: which writes a notification costs; read it on a server nothing else writes to)
 *   --flush-delay-ms N (everything, pgbench included, on a PostgreSQL of the benchmark's own whose WAL flush takes N ms
 *   longer, bench/lib/slow-flush.ts: a disk slow to flush, as on the machine the targets were set on, or a synchronous
 *   standby; its WAL segments made and recycled before, as a server that has run a while has them)
 */
import { pgbenchTps } from './lib/pgbench.js';
import { slowFlushDatabase } from './lib/slow-flush.js';
import { measureFloor } from './lib/unicast-floor.js';
import { unicastOptions } from './lib/unicast-options.js';
import { printReport } from './lib/unicast-report.js';
import { runOne, type Result } from './lib/unicast-run.js';

const options = unicastOptions();

async function main() {
  const { flushDelayMs, rateOfPgbench } = options;
  const slowFlush = await slowFlushDatabase(flushDelayMs);
  const tps = await pgbenchTps();
  if (rateOfPgbench > 0) {
    if (!/^[\d.]+$/.test(tps)) throw new Error(`--rate-of-pgbench needs pgbench's figure, got: ${tps}`);
    options.rate = Math.round(rateOfPgbench * Number(tps));
  }
  const floor = options.rate === 0 ? await measureFloor(options) : null;
  const results: Result[] = [];
  for (const queue of options.queues)
    for (const mode of options.modes)
      for (const target of options.targets) {
        const r = await runOne(options, target, mode, queue);
        results.push(r);
        console.log(
          `${target} / ${mode} / ${queue}: POST ${r.postPerSec.toFixed(0)}/s, end to end ${r.endToEnd.toFixed(0)}/s, missed ${r.missed}, twice ${r.twice}; ` +
            `p99 ${r.p99.toFixed(1)} ms; PostgreSQL backends opened while posting ${r.backendsOpened} (the service started ${r.serviceAgeS.toFixed(1)} s before); posted ${r.postedFrom} to ${r.postedTo}`,
        );
      }

  printReport(options, tps, floor, results, slowFlush !== null);
  const bad = results.filter((r) => r.missed > 0 || r.twice > 0 || r.refused > 0);
  await slowFlush?.stop();
  process.exit(bad.length || floor?.refused ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
