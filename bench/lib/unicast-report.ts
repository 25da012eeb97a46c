/**
 * The unicast benchmark's report (bench/unicast.ts): the setup it measured, the ceilings beside it, and a row for
 * each configuration.
 */
import type { Floor } from './unicast-floor.js';
import { SAMPLES, type UnicastOptions } from './unicast-options.js';
import type { Result } from './unicast-run.js';

/**
 * Prints what was measured and how (`rate` resolved), PostgreSQL's commit ceiling `tps`, the floor (when measured)
 * and the table of `results`; `slowFlush`: the run had a PostgreSQL of its own with a slow WAL flush.
 */
export function printReport(o: UnicastOptions, tps: string, floor: Floor | null, results: Result[], slowFlush: boolean): void {
  printSetup(o);
  if (slowFlush)
    console.log(
      `PostgreSQL: the benchmark's own (the machine's PostgreSQL 15, default settings), each WAL flush ${o.flushDelayMs} ms longer than this disk makes it (bench/lib/slow-flush.c), its WAL segments recycled before the run`,
    );
  console.log(`Devices' tables after the fill: ${results[0]?.shape ?? '–'}`);
  console.log(`PostgreSQL commit ceiling on the same server (pgbench -N, 50 clients): ${tps} transactions/s`);
  if (floor)
    console.log(
      `Floor on the same server (bench/lib/floor-server.ts: the device_id POST validated and committed, one INSERT a group, nothing enqueued or delivered): ` +
        `${floor.postPerSec.toFixed(0)} req/s, p50 ${floor.p50.toFixed(1)} ms, p99 ${floor.p99.toFixed(1)} ms, refused ${floor.refused}; ` +
        `CPU ms/request: server ${floor.serverCpu.toFixed(2)}, PostgreSQL ${floor.databaseCpu.toFixed(2)}, benchmark clients ${floor.clientsCpu.toFixed(2)}`,
    );
  console.log('');
  printResults(o, results);
}

/** The load, and the view it was measured from. */
function printSetup(o: UnicastOptions): void {
  const { notifications: K, warmup, rate, rateOfPgbench, returning, clients, latencyMs } = o;
  const { view, viewName, registered, logFile, analyze, notificationDays } = o;
  const pace =
    rate > 0
      ? `posted at ${rate}/s${rateOfPgbench > 0 ? ` (${rateOfPgbench} × pgbench -N)` : ''} for ${(K / rate).toFixed(0)} s, latency counted from when each post was due`
      : 'posted as fast as answered';
  console.log(
    `\nunicast benchmark: ${K} notifications (after ${warmup} not counted), each to one device${returning ? ' that the warm-up notified' : ''}, ${clients} concurrent clients, ${pace}; mock gateways on loopback TLS HTTP/2 answering ${latencyMs} ms late`,
  );
  console.log(
    `View: ${viewName} (clients in ${view.clientsIn === 'process' ? 'a process of their own' : "a thread of the benchmark's process"} posting with ${view.httpClient === 'http' ? 'node:http, a keep-alive http.Agent' : "undici's Pool"}; ` +
      `${registered} devices ${view.devices === 'api' ? 'registered through POST /v6/devices with what a phone sends' : 'inserted by SQL, bare'}; ` +
      `the service with ${view.config === 'production' ? `production's settings (rate limits on, LOG_LEVEL info, log lines to ${logFile})` : 'rate limits off and LOG_LEVEL warn'} and the node flags of npm start; ` +
      `mock gateways in ${view.mocksIn === 'process' ? 'a process of their own' : "the benchmark's process"})` +
      (analyze ? '' : "; the devices' table NOT analyzed after the fill") +
      (notificationDays ? `; the day partitions of the last ${notificationDays} days made before the run` : ''),
  );
}

/** A row for each configuration. */
function printResults({ notifications: K, rate, viewName }: UnicastOptions, results: Result[]): void {
  console.log(
    `| view | target | processes | queue | POST req/s | POST p50 ms | POST p99 ms | refused | end to end notifications/s | backlog when posting ended${rate > 0 ? ` (every ${(K / rate / SAMPLES).toFixed(1)} s before) | posting behind the schedule when it ended, s` : ''} | devices missed | pushed twice | CPU ms/notification: service (API + worker) | PostgreSQL | Redis | clients | mock gateways | benchmark process | PostgreSQL WAL bytes/notification | WAL bytes/device registration: new, again |`,
  );
  console.log(
    `|---|---|---|---|---:|---:|---:|---:|---:|---:|${rate > 0 ? '---:|' : ''}---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|`,
  );
  for (const r of results) {
    const processes = r.mode === 'single' ? 'one (npm start)' : 'API + worker';
    const e2e = `${r.endToEnd.toFixed(0)}${r.unfinished ? ' (unfinished at timeout)' : ''}`;
    console.log(
      `| ${viewName} | ${r.target} | ${processes} | ${r.queue} | ${r.postPerSec.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.refused} | ${e2e} | ${r.backlog}${r.backlogSamples.length ? ` (${r.backlogSamples.join(', ')})` : ''}${rate > 0 ? ` | ${r.behindS.toFixed(1)}` : ''} | ${r.missed} | ${r.twice} | ${r.serviceCpu.toFixed(2)}${r.mode === 'split' ? ` (${r.apiCpu.toFixed(2)} + ${(r.serviceCpu - r.apiCpu).toFixed(2)})` : ''} | ${r.databaseCpu.toFixed(2)} | ${r.redisCpu === null ? '–' : r.redisCpu.toFixed(2)} | ${r.clientsCpu?.toFixed(2) ?? 'in benchmark'} | ${r.mocksCpu?.toFixed(2) ?? 'in benchmark'} | ${r.benchCpu.toFixed(2)} | ${r.walBytes.toFixed(0)} | ${r.registrationWal ? `${r.registrationWal.first.toFixed(0)}, ${r.registrationWal.again.toFixed(0)}` : '–'} |`,
    );
  }
}
