/**
 * npm run bench -- <name> [options]: runs bench/<name>.ts. Without a name: every benchmark at its default size.
 * Benchmarks talk to mock gateways with a test CA; Node reads NODE_EXTRA_CA_CERTS only at start, so it is set here.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const BENCHES = [
  'audience-count',
  'best-time',
  'capacity',
  'cluster',
  'fanout',
  'failover',
  'faults',
  'hms',
  'journeys',
  'live-activity',
  'local-time',
  'outside',
  'registrations',
  'scale',
  'stats',
  'templates',
  'unicast',
  'web-push',
  'webhooks',
];
const [name, ...rest] = process.argv.slice(2);
const run = (bench: string, args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', `bench/${bench}.ts`, ...args], {
    stdio: 'inherit',
    env: { ...process.env, NODE_EXTRA_CA_CERTS: path.resolve('test/fixtures/tls/ca.pem') },
  }).status ?? 1;

if (name && !BENCHES.includes(name)) {
  console.error(`unknown benchmark ${name}; one of ${BENCHES.join(', ')}`);
  process.exit(2);
}
// Benchmarks run the service as production does: compiled to dist/.
let status = spawnSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' }).status ?? 1;
for (const bench of name ? [name] : BENCHES) status ||= run(bench, name ? rest : []);

process.exit(status);
