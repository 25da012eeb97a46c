// Reads docker-compose.yml the way Compose does (anchors, `<<` merge keys, ${VAR} and ${VAR:-default} taken from
// this environment) and prints one service's parts as JSON, so scripts/container-check.sh runs the compose file's
// own commands, environment and health checks:
//   node scripts/container/compose-services.mjs SERVICE  ->  {"command":[…]|null,"environment":{…},"healthcheck":[…]|null,"init":bool}
//   node scripts/container/compose-services.mjs          ->  the service names
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

const file = new URL('../../docker-compose.yml', import.meta.url);
const compose = parse(readFileSync(file, 'utf8'), { merge: true });
const services = compose?.services;
if (!services || typeof services !== 'object') fail('docker-compose.yml has no services');

const name = process.argv[2];
if (!name) {
  process.stdout.write(Object.keys(services).join('\n') + '\n');
  process.exit(0);
}
const service = services[name];
if (!service) fail(`docker-compose.yml has no service "${name}"`);

const interpolate = (value) =>
  String(value).replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_, v, fallback) => process.env[v] || (fallback ?? ''));

const environment = Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, interpolate(v)]));
const command = service.command === undefined ? null : toArgv(service.command);
let healthcheck = null;
if (service.healthcheck?.test) {
  const [kind, ...rest] = service.healthcheck.test;
  if (kind === 'CMD') healthcheck = rest.map(interpolate);
  else if (kind === 'CMD-SHELL') healthcheck = ['/bin/sh', '-c', interpolate(rest.join(' '))];
  else fail(`service "${name}": unsupported healthcheck test ${JSON.stringify(service.healthcheck.test)}`);
}
process.stdout.write(JSON.stringify({ command, environment, healthcheck, init: service.init === true }) + '\n');

function toArgv(command) {
  if (Array.isArray(command)) return command.map(interpolate);
  return ['/bin/sh', '-c', interpolate(command)];
}

function fail(message) {
  process.stderr.write(`compose-services: ${message}\n`);
  process.exit(1);
}
