import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig } from '../platform/config.js';
import { DomainError } from '../domain/errors.js';
import { createLogger } from '../platform/logger.js';
import { openDatabaseRuntime, type DatabaseRuntime } from '../app/runtime.js';
import { RestoreRefused } from '../app/backup.js';
import { UsageError, type AnyCommand, type Args, type OptionSpec } from './command.js';
import { appCommands } from './apps.js';
import { credentialCommands } from './credentials.js';
import { rateLimitCommands } from './rate-limits.js';
import { identityCommands } from './identity.js';
import { webPushCommands } from './web-push.js';
import { hmsCommands } from './hms.js';
import { auditCommands } from './audit.js';
import { secretsCommands } from './secrets.js';
import { backupCommands } from './backup.js';
import { webhookCommands } from './webhooks.js';

/**
 * pushd CLI. Every command prints one JSON document on stdout, its answer or `{"error": "…"}`; logs and messages go
 * to stderr. `pushd --help` lists the commands, `pushd <command> --help` the options of one, from the same
 * declarations the parser checks.
 */
const commands: Record<string, AnyCommand> = {
  ...appCommands,
  ...credentialCommands,
  ...rateLimitCommands,
  ...identityCommands,
  ...webPushCommands,
  ...hmsCommands,
  ...auditCommands,
  ...secretsCommands,
  ...backupCommands,
  ...webhookCommands,
};

const HELP = ['--help', '-h'];

/** What the run printed as its answer (a command's result, or help text) and its exit code. */
type Outcome = { code: number; stdout: string; stderr?: string };

async function run(argv: string[]): Promise<Outcome> {
  if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) return { code: 0, stdout: `pushd ${version()}\n` };
  // the command is the longest run of leading words that names one; what follows are its options
  const leading = argv.findIndex((a) => a.startsWith('-'));
  const all = leading === -1 ? argv.length : leading;
  let words = all;
  while (words > 1 && !commands[argv.slice(0, words).join(' ')]) words--;
  if (!commands[argv.slice(0, words).join(' ')]) words = all;
  const name = argv.slice(0, words).join(' ');
  const rest = argv.slice(words);
  const command = commands[name];
  if (!command) {
    const group = Object.keys(commands)
      .filter((c) => name === '' || c.startsWith(`${name} `))
      .sort();
    if (rest.some((a) => HELP.includes(a)) && group.length) return { code: 0, stdout: overview(name, group) };
    if (name !== '' && group.length) throw new UsageError(`"${name}" needs a command: ${group.join(', ')}`);
    throw new UsageError(name === '' ? 'no command given' : `unknown command "${name}"`);
  }
  const args = parseOptions(name, command, rest);
  if (args === 'help') return { code: 0, stdout: usage(name, command) };

  const config = loadConfig();
  const answer = (result: unknown) => JSON.stringify(result) + '\n';
  const toStderr = command.writesStdout?.(args) ?? false;
  stdoutTaken = toStderr;
  // Logs go to stderr, at warn: stdout carries exactly one JSON document, also when start-up has something to say.
  const log = createLogger(config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL, 'stderr');
  if ('local' in command) return { code: 0, stdout: '', ...answerTo(toStderr, answer(await command.run(args, config, log))) };
  const refused = command.refuses?.(config);
  if (refused) throw new UsageError(refused);
  const runtime = await openDatabaseRuntime(config, log);
  closeOnSignal(runtime);
  let result: unknown;
  try {
    result = await command.run(args, runtime);
  } finally {
    // what the command did is done: a failure to close is told on stderr, it does not replace the answer
    await runtime.close().catch((err: Error) => log.warn({ err }, 'closing the database failed'));
  }
  const forPerson = command.render && args.json === undefined && process.stdout.isTTY;
  return { code: 0, stdout: '', ...answerTo(toStderr, forPerson ? command.render!(result) : answer(result)) };
}

/** pushd's version, from the package.json above this module (src/cli, or dist/src/cli once built). */
function version(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    try {
      const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (manifest.name === 'pushd' && manifest.version) return manifest.version;
    } catch {
      // no package.json here: look higher
    }
  }
  return 'unknown';
}

/** Set once the command line says the command's own output goes to stdout: an error is then told on stderr alone. */
let stdoutTaken = false;

/** The answer goes to stdout, or to stderr when the command's own output is on stdout. */
const answerTo = (stderr: boolean, text: string): Partial<Outcome> => (stderr ? { stderr: text } : { stdout: text });

/** `--name value` or `--name=value`, each declared option at most once; `-h`/`--help` asks for the usage. */
function parseOptions(name: string, command: AnyCommand, tokens: string[]): Args | 'help' {
  const specs = command.options ?? {};
  const args: Args = {};
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (HELP.includes(token)) return 'help';
    if (!token.startsWith('--')) throw new UsageError(`unexpected argument "${token}"`);
    const eq = token.indexOf('=');
    const option = token.slice(2, eq === -1 ? undefined : eq);
    if (!Object.hasOwn(specs, option)) throw new UsageError(`unknown option --${option} for "${name}"`);
    if (args[option] !== undefined) throw new UsageError(`--${option} is given twice`);
    if (specs[option]!.value === undefined) {
      if (eq !== -1) throw new UsageError(`--${option} takes no value`);
      args[option] = 'true';
      continue;
    }
    const value = eq === -1 ? tokens[++i] : token.slice(eq + 1);
    if (value === undefined || (eq === -1 && value.startsWith('--'))) throw new UsageError(`--${option} needs a value`);
    args[option] = value;
  }
  for (const [option, spec] of Object.entries(specs)) {
    const value = args[option];
    if (value === undefined) {
      if (spec.required) throw new UsageError(`--${option} is required`);
      continue;
    }
    const wrong = spec.check?.(value);
    if (wrong) throw new UsageError(`--${option} ${wrong}`);
  }
  return args;
}

/** `--app ID`, or `--on` for a flag. */
const spelled = (option: string, spec: OptionSpec): string => (spec.value === undefined ? `--${option}` : `--${option} ${spec.value}`);

function synopsis(name: string, command: AnyCommand): string {
  const options = Object.entries(command.options ?? {}).map(([o, s]) => (s.required ? spelled(o, s) : `[${spelled(o, s)}]`));
  return ['pushd', name, ...options].join(' ');
}

function usage(name: string, command: AnyCommand): string {
  const rows = Object.entries(command.options ?? {}).map(([o, s]) => [spelled(o, s), (s.required ? '(required) ' : '') + s.help]);
  rows.push(['-h, --help', 'prints this help']);
  return `Usage: ${synopsis(name, command)}\n\n${command.summary}\n\nOptions:\n${table(rows)}\n${FOOTER}`;
}

/** The commands of a group (`app`: app create, app list, …), or every command when `group` is empty. */
function overview(group: string, names: string[]): string {
  const rows = names.map((n) => [n, commands[n]!.summary]);
  const prefix = group === '' ? 'pushd' : `pushd ${group}`;
  const heading = group === '' ? 'Commands:' : `Commands of ${prefix}:`;
  const more = `\`${prefix} <command> --help\` lists the options of one.`;
  return `Usage: ${prefix} <command> [options]\n\n${heading}\n${table(rows)}\n\n${more}\n${FOOTER}`;
}

const FOOTER = `
Settings come from the environment, as for the server: DATABASE_URL with SECRETS_KEY or SECRETS_KEY_FILE, or
DATA_DIR and EMBEDDED_PG_PORT for the embedded PostgreSQL (a running server's is shared, and its key file); LOG_LEVEL.
Prints one JSON document on stdout: the answer, or {"error": "..."} (the message also goes to stderr); a command
with --json prints a table instead on a terminal. \`pushd --version\` prints the version.
Exit codes: 0 done; 2 the command line or a setting is wrong; 1 a well-formed command failed.
`;

function table(rows: string[][]): string {
  const width = Math.max(...rows.map((r) => r[0]!.length));
  return rows.map(([left, right]) => `  ${left!.padEnd(width)}  ${right}`).join('\n');
}

/** Ctrl-C during a command: the embedded PostgreSQL this command started is stopped before the process ends. */
function closeOnSignal(runtime: DatabaseRuntime): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void runtime.close().finally(() => process.exit(130));
    });
  }
}

/** 2: the command line or a setting is wrong (unknown command or option, a missing or invalid value); 1: the rest. */
function exitCodeOf(err: unknown): number {
  const usage =
    err instanceof UsageError ||
    err instanceof ConfigError ||
    err instanceof RestoreRefused ||
    (err instanceof DomainError && err.status === 400);
  return usage ? 2 : 1;
}

run(process.argv.slice(2)).then(
  ({ code, stdout, stderr }) => {
    process.stdout.write(stdout);
    if (stderr) process.stderr.write(stderr);
    process.exit(code);
  },
  (err: Error) => {
    const code = exitCodeOf(err);
    if (!stdoutTaken) process.stdout.write(JSON.stringify({ error: err.message }) + '\n');
    const hint = code === 2 ? '\n(`pushd --help` lists the commands, `pushd <command> --help` their options)' : '';
    process.stderr.write(`error: ${err.message}${hint}\n`);
    process.exit(code);
  },
);
