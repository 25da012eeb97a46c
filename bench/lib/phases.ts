/**
 * A load phase measured from outside: its rate, latencies and refusals, and the CPU the service's process, the
 * PostgreSQL server and the clients' process took per request meanwhile (read from /proc).
 */
import type { Answers } from './load-clients.js';
import { cpuMs, percentile, serverCpuMs } from './setup.js';

export interface Phase {
  name: string;
  perSec: number;
  p50: number;
  p99: number;
  refused: number;
  /** CPU ms per request: the service's process (null when none serves it), the PostgreSQL server's, the clients' */
  cpu: [number | null, number, number];
}

/** The processes that take a turn on the cores while the clients post; `service` null when no service serves it. */
export interface CpuMeters {
  service: number | null;
  postmaster: number;
  clients: number;
}

/** Runs `run` and measures it; a request answered with another status than `expected` counts as refused. */
export async function measurePhase(name: string, meters: CpuMeters, expected: number, run: () => Promise<Answers>): Promise<Phase> {
  const read = () => [meters.service === null ? 0 : cpuMs(meters.service), serverCpuMs(meters.postmaster), cpuMs(meters.clients)];
  const before = read();
  const answers = await run();
  const after = read();
  const latencies = Array.from(answers.latencies).sort((a, b) => a - b);
  const n = latencies.length;
  const per = (i: number) => (after[i]! - before[i]!) / n;
  return {
    name,
    perSec: n / ((answers.endedAt - answers.startedAt) / 1000),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    refused: answers.statuses.filter((s) => s !== expected).length,
    cpu: [meters.service === null ? null : per(0), per(1), per(2)],
  };
}

/** A phase's cells for printRows: name, rate, rate × pgbench -N, p50, p99, refused, CPU ms per request. */
export function phaseCells(p: Phase, pgbenchTps: number): string[] {
  return [
    p.name,
    p.perSec.toFixed(0),
    Number.isFinite(pgbenchTps) ? (p.perSec / pgbenchTps).toFixed(2) : '–',
    p.p50.toFixed(1),
    p.p99.toFixed(1),
    String(p.refused),
    p.cpu.map((ms) => (ms === null ? '–' : ms.toFixed(2))).join(', '),
  ];
}
