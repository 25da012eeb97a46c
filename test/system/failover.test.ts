import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ETCD, HAPROXY, PATRONI } from '../engines/patroni.js';
import { ROOT } from './proc.js';

const engines = [PATRONI, ETCD, HAPROXY].filter((bin) => !existsSync(bin));
if (engines.length)
  console.warn(`failover test skipped: ${engines.join(', ')} not installed (apt-get install patroni etcd-server haproxy)`);

/**
 * The failover benchmark at a small size (bench/failover.ts): a Patroni pair behind HAProxy, one API and one worker
 * process, a broadcast per fault and one-device notifications at a steady rate; a switchover, then the new primary
 * killed. It exits 1 when a request was answered a 5xx other than 503 or not at all, an accepted notification or a
 * broadcast's device was never delivered, or a process crashed; the figures it prints are checked here too.
 */
describe.skipIf(engines.length > 0)('a PostgreSQL failover under load (Patroni, etcd, HAProxy)', () => {
  it('answers 503 with Retry-After while there is no primary, never another 5xx, and delivers everything accepted', () => {
    const run = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'bench/failover.ts', '--devices', '2000', '--rate', '20', '--after', '5', '--ceiling-seconds', '0'],
      {
        cwd: ROOT,
        encoding: 'utf8',
        env: { ...process.env, NODE_EXTRA_CA_CERTS: path.join(ROOT, 'test/fixtures/tls/ca.pem') },
        timeout: 540_000,
      },
    );
    const output = `${run.stdout}\n${run.stderr}`;
    // the figures, in the test's log
    console.log(
      run.stdout
        .split('\n')
        .filter((line) => line.startsWith('|') || line.includes('one-device'))
        .join('\n'),
    );
    expect(run.status, output).toBe(0);
    const row = (fault: string) => {
      const cells = new RegExp(`^\\| ${fault} +\\|(.*)\\|$`, 'm')
        .exec(run.stdout)?.[1]
        ?.split('|')
        .map((c) => c.trim());
      expect(cells, output).toBeDefined();
      const [noPrimary, s503, other5xx, unanswered, , , missed] = cells!;
      return {
        noPrimary: Number(noPrimary),
        s503: Number(s503),
        other5xx: Number(other5xx),
        unanswered: Number(unanswered),
        missed: Number(missed),
      };
    };
    const kill = row('kill');
    // a killed primary is replaced within Patroni's ttl (10 s here): meanwhile requests are refused, cleanly
    expect(kill.noPrimary).toBeGreaterThan(1);
    expect(kill.s503).toBeGreaterThan(0);
    for (const r of [row('switchover'), kill]) expect([r.other5xx, r.unanswered, r.missed]).toEqual([0, 0, 0]);
    expect(run.stdout).toMatch(/; 0 answered 201 and never delivered;/);
  }, 600_000);
});
