/**
 * Where the CPU time went, read from /proc: a PostgreSQL server's processes by kind, processes' threads by name,
 * the machine's busy share, a group of processes' sum.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpuMs } from './setup.js';

/** /proc/<pid>/stat's fields after the command name: [1] the parent, [11] utime, [12] stime, [13]-[14] children's. */
function procFields(pid: number | string): number[] {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ').map(Number);
}
const MS_A_TICK = 10; // sysconf(_SC_CLK_TCK) is 100 on Linux
const SERVER_PROCESS_KINDS = [
  'checkpointer',
  'background writer',
  'walwriter',
  'autovacuum launcher',
  'autovacuum worker',
  'walsender',
  'walreceiver',
  'startup',
  'logical replication launcher',
  'archiver',
];

/**
 * CPU ms so far of a PostgreSQL server's processes by kind (their process titles; `backend` for the connections,
 * `exited` for the children that have ended), each kind's name after `label`.
 */
export function serverDetail(postmaster: number, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  const add = (kind: string, ticks: number) => (out[label + kind] = (out[label + kind] ?? 0) + ticks * MS_A_TICK);
  const main = procFields(postmaster);
  add('postmaster', main[11]! + main[12]!);
  add('exited', main[13]! + main[14]!);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = procFields(entry);
      if (fields[1] !== postmaster) continue;
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8')
        .replace(/\0/g, ' ')
        .replace(/^postgres: /, '');
      add(SERVER_PROCESS_KINDS.find((k) => title.startsWith(k)) ?? 'backend', fields[11]! + fields[12]!);
    } catch {
      // exited meanwhile: its time is in the postmaster's
    }
  }
  return out;
}

/** CPU ms so far of the processes' threads, summed by thread name (the main one's: `node`), after `label`. */
export function threadDetail(pids: number[], label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const pid of pids)
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
        const fields = procFields(`${pid}/task/${tid}`);
        out[label + name] = (out[label + name] ?? 0) + (fields[11]! + fields[12]!) * MS_A_TICK;
      } catch {
        // ended meanwhile
      }
    }
  return out;
}

/** The machine's CPU time so far (/proc/stat, all cores, ticks): busy, and in all. */
export function machineCpu(): { busy: number; total: number } {
  const ticks = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  // idle and iowait
  return { busy: total - ticks[3]! - ticks[4]!, total };
}

/** CPU ms so far of these processes together. */
export function sumCpu(pids: number[]): number {
  return pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
}
