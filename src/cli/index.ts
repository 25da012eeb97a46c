import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../platform/config.js';
import { DomainError } from '../domain/errors.js';
import { createLogger } from '../platform/logger.js';
import { openDatabaseRuntime, type DatabaseRuntime } from '../app/runtime.js';
import { AppService } from '../services/apps.js';
import { credentialCommands } from './credentials.js';
import { rateLimitCommands } from './rate-limits.js';
import { webPushCommands } from './web-push.js';

/**
 * pushd CLI. Every command prints one JSON document on stdout; logs go to stderr.
 *   migrate
 *   app create --bundle-id ID [--name N]
 *   app list
 *   app set-apns --app ID --key-file AuthKey.p8 --key-id K --team-id T [--topic X]
 *   app set-fcm --app ID --service-account sa.json
 *   app set-web-push --app ID --subject mailto:… [--public-key K --private-key P]
 *   app set-limits --app ID [--max-per-minute N|none] [--default-time-zone ZONE|none]
 *   key create --app ID --role read|write|sdk
 *   key revoke --key KEY
 *   key set-limit --key KEY --per-second N --burst M
 *   key clear-limit --key KEY
 */
export type Command = (args: Record<string, string | undefined>, db: DatabaseRuntime) => Promise<unknown>;

const commands: Record<string, Command> = {
  migrate: async () => ({ migrated: true }),
  'app create': async (a, rt) => new AppService(rt.handle.db).createApp(required(a, 'bundle-id'), a.name),
  'app list': async (_a, rt) => ({ apps: await new AppService(rt.handle.db).listApps() }),
  'key create': async (a, rt) => new AppService(rt.handle.db).createKey(required(a, 'app'), required(a, 'role')),
  'key revoke': async (a, rt) => {
    await new AppService(rt.handle.db).revokeKey(required(a, 'key'));
    return { revoked: true };
  },
  ...credentialCommands,
  ...rateLimitCommands,
  ...webPushCommands,
};

class UsageError extends Error {}

function required(args: Record<string, string | undefined>, name: string): string {
  const v = args[name];
  if (!v) throw new UsageError(`--${name} is required`);
  return v;
}

async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: Object.fromEntries(
      [
        'bundle-id',
        'name',
        'app',
        'role',
        'key',
        'key-file',
        'key-id',
        'team-id',
        'topic',
        'service-account',
        'per-second',
        'burst',
        'max-per-minute',
        'default-time-zone',
        'subject',
        'public-key',
        'private-key',
      ].map((o) => [o, { type: 'string' as const }]),
    ),
  });
  const name = positionals.join(' ');
  const command = commands[name];
  if (!command) {
    process.stderr.write(`unknown command "${name}". Commands: ${Object.keys(commands).join(', ')}\n`);
    return 2;
  }
  const config = loadConfig();
  // Logs go to stderr, at warn: stdout carries exactly one JSON document, also when start-up has something to say
  // (a PostgreSQL left running by a crashed server is stopped first).
  const log = createLogger(config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL, 'stderr');
  const runtime = await openDatabaseRuntime(config, log);
  try {
    const result = await command(values, runtime);
    process.stdout.write(JSON.stringify(result) + '\n');
    return 0;
  } finally {
    await runtime.close();
  }
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    // 2: the command line is wrong (unknown command or option, a missing or invalid value); 1: a well-formed
    // command failed (an unknown or revoked key, an app that exists, an unreachable database).
    const usage =
      err instanceof UsageError ||
      err instanceof ConfigError ||
      (err instanceof DomainError && err.status === 400) ||
      (err as { code?: string }).code?.startsWith?.('ERR_PARSE_ARGS');
    process.stderr.write(`error: ${(err as Error).message}\n`);
    process.exit(usage ? 2 : 1);
  },
);
