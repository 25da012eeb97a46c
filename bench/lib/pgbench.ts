import { execFileSync } from 'node:child_process';
import { benchDatabase } from './setup.js';

/** PostgreSQL's commit ceiling on this server: pgbench's simple-update transactions with 50 clients, 10 s. */
export async function pgbenchTps(): Promise<string> {
  const database = await benchDatabase('bench_pgbench');
  try {
    execFileSync('pgbench', ['-i', '-q', database.url], { stdio: 'ignore' });
    const out = execFileSync('pgbench', ['-N', '-n', '-c', '50', '-j', '2', '-T', '10', database.url], { encoding: 'utf8' });
    return /tps = ([\d.]+)/.exec(out)?.[1] ?? 'unparsed';
  } catch (err) {
    return `not measured (${(err as Error).message.split('\n')[0]})`;
  } finally {
    await database.close();
  }
}
