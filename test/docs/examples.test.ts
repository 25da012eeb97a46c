import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateways, type Gateways } from '../helpers/gateways.js';
import { freePort, freshDatabase, Proc, ROOT } from '../system/proc.js';
import { TEST_SECRETS_KEY } from '../engines/secrets-key.js';
import { TEST_METRICS_TOKEN } from '../engines/metrics-token.js';
import { documentationFiles, shellBlocks, type ShellBlock } from './markdown-blocks.js';

/**
 * Every ```sh block of the README and of docs/, run in order by one bash session against a fresh server, as a
 * reader would paste them: the compiled `pushd` process on a fresh database, its gateways the mocks of test/mocks.
 * What earlier blocks set (keys, ids) is there for later ones, in the README and then each page by path. The
 * session has what a reader brings: `$PUSHD`, the database the server uses (so `npx pushd` works on it), and the
 * gateway credentials Apple and Google gave them (`$APNS_KEY_FILE`, `$APNS_KEY_ID`, `$APNS_TEAM_ID`,
 * `$FCM_SERVICE_ACCOUNT`). A block fails on a command that fails (`set -eo pipefail`), and on an HTTP answer of 500
 * or more, no answer at all, or a 4xx where the block does not say it shows one (`docs-test: expect 4xx`).
 */
const MARK = '__docs_block_done__';
const BLOCK_TIMEOUT_MS = 60_000;
/** a block beside the embedded default starts its PostgreSQL (a backup, a restore's check) on a busy machine */
const EMBEDDED_BLOCK_TIMEOUT_MS = 240_000;

/** One bash, fed block after block; each block's output and exit status come back once it is done. */
class BashSession {
  private readonly child: ChildProcessWithoutNullStreams;
  private stdout = '';
  private stderr = '';
  private waiting: (() => void) | null = null;
  exited: number | null = null;

  constructor(env: Record<string, string>, cwd: string) {
    this.child = spawn('bash', ['--noprofile', '--norc'], { cwd, env, stdio: 'pipe' });
    this.child.stdout.on('data', (d: Buffer) => this.collect('stdout', d));
    this.child.stderr.on('data', (d: Buffer) => this.collect('stderr', d));
    this.child.on('exit', (code) => {
      this.exited = code ?? -1;
      this.waiting?.();
    });
    // every transfer reports its status on stderr, where the test reads it (curl writes nothing else there with -s)
    this.child.stdin.write(`set -eo pipefail\ncurl() { command curl -w '%{stderr}[http %{http_code}]\\n' "$@"; }\n`);
  }

  private collect(which: 'stdout' | 'stderr', d: Buffer) {
    this[which] += d.toString();
    this.waiting?.();
  }

  async run(code: string, file: string, timeoutMs = BLOCK_TIMEOUT_MS): Promise<{ stdout: string; stderr: string; status: number }> {
    this.stdout = '';
    this.stderr = '';
    await writeFile(file, `${code}\n`);
    this.child.stdin.write(`source ${file}\necho "${MARK} $?"\necho "${MARK}" >&2\n`);
    const done = () => this.exited !== null || (this.stdout.includes(MARK) && this.stderr.includes(MARK));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no end within ${timeoutMs} ms:\n${this.stdout}\n${this.stderr}`)), timeoutMs);
      this.waiting = () => {
        if (!done()) return;
        clearTimeout(timer);
        this.waiting = null;
        resolve();
      };
      this.waiting();
    });
    const status = this.exited ?? Number(new RegExp(`${MARK} (\\d+)`).exec(this.stdout)![1]);
    const strip = (s: string) => s.replace(new RegExp(`${MARK}( \\d+)?\\n?`), '');
    return { stdout: strip(this.stdout), stderr: strip(this.stderr), status };
  }

  close() {
    this.child.stdin.end();
    if (this.exited === null) this.child.kill('SIGKILL');
  }
}

describe('the examples of the README and docs/', () => {
  const blocks = documentationFiles(ROOT).flatMap(shellBlocks);
  let gw: Gateways;
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let dir: string;
  let server: Proc;
  let bash: BashSession;
  let embedded: Promise<EmbeddedDefault> | undefined;

  beforeAll(async () => {
    gw = await startGateways();
    db = await freshDatabase();
    dir = await mkdtemp(path.join(os.tmpdir(), 'pushd-docs-'));
    const apnsKeyFile = path.join(dir, 'AuthKey.p8');
    const serviceAccount = path.join(dir, 'firebase-service-account.json');
    await writeFile(apnsKeyFile, gw.apnsKey.credentials.keyPem);
    await writeFile(serviceAccount, JSON.stringify(gw.serviceAccount.json));
    const port = await freePort();
    // the webhooks page runs a receiver on this port, with the test CA's certificate, as a private network's
    const receiverPort = await freePort();
    server = Proc.server({
      WEBHOOK_ALLOWED_ORIGINS: `https://localhost:${receiverPort}`,
      DATABASE_URL: db.url,
      REDIS_URL: '',
      PORT: String(port),
      HOST: '127.0.0.1',
      METRICS_TOKEN: TEST_METRICS_TOKEN,
      NODE_EXTRA_CA_CERTS: path.join(ROOT, 'test/fixtures/tls/ca.pem'),
      ...gw.env,
      // Live Activity broadcast channels: the APNs mock also answers Apple's channel management and broadcast API
      APNS_CHANNELS_ORIGIN_PRODUCTION: gw.apns.origin,
      APNS_BROADCAST_ORIGIN_PRODUCTION: gw.apns.origin,
    });
    await server.waitForLog('listening');
    bash = new BashSession(
      {
        PATH: process.env.PATH!,
        HOME: process.env.HOME ?? dir,
        PUSHD: `http://127.0.0.1:${port}`,
        METRICS_TOKEN: TEST_METRICS_TOKEN,
        DATABASE_URL: db.url,
        // the server's key, as a deployment's CLI is given it (docs/secrets.md)
        SECRETS_KEY: TEST_SECRETS_KEY,
        APNS_KEY_FILE: apnsKeyFile,
        APNS_KEY_ID: gw.apnsKey.credentials.keyId,
        APNS_TEAM_ID: gw.apnsKey.credentials.teamId,
        FCM_SERVICE_ACCOUNT: serviceAccount,
        RECEIVER_PORT: String(receiverPort),
        TLS_KEY_FILE: path.join(ROOT, 'test/fixtures/tls/server-key.pem'),
        TLS_CERT_FILE: path.join(ROOT, 'test/fixtures/tls/server.pem'),
      },
      ROOT,
    );
  }, 120_000);

  afterAll(async () => {
    bash?.close();
    if (embedded) await rm((await embedded).home, { recursive: true, force: true });
    await server?.stop('SIGTERM');
    await gw?.close();
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('finds the blocks, and every skip says why', () => {
    expect(blocks.length).toBeGreaterThan(40);
    for (const b of blocks.filter((b) => b.skip !== undefined)) expect(b.skip!.length, where(b)).toBeGreaterThan(5);
  });

  // one test per block, in order: a failure names the block, and the log shows what each printed
  it.each(blocks.map((b, i) => [where(b), b, i] as const))(
    '%s',
    async (_label, block, index) => {
      if (block.skip !== undefined) {
        console.log(`SKIPPED ${where(block)}: ${block.skip}`);
        return;
      }
      expect(bash.exited, 'the session ended at an earlier block').toBeNull();
      const file = path.join(dir, `block-${index}.sh`);
      const { stdout, stderr, status } = block.embedded
        ? await bash.run(besideEmbedded(block.code, await (embedded ??= embeddedDefault())), file, EMBEDDED_BLOCK_TIMEOUT_MS)
        : await bash.run(block.code, file);
      console.log(`${where(block)}\n$ ${block.code.replaceAll('\n', '\n$ ')}\n${stdout}${stderr}`);
      expect(status, `${where(block)} exited ${status}:\n${stdout}${stderr}`).toBe(0);
      const answers = [...stderr.matchAll(/\[http (\d{3})\]/g)].map((m) => Number(m[1]));
      const wrong = answers.filter((s) => s === 0 || s >= 500 || (s >= 400 && block.expect4xx === undefined));
      expect(wrong, `${where(block)}: HTTP answers ${answers.join(', ')}:\n${stdout}${stderr}`).toEqual([]);
    },
    EMBEDDED_BLOCK_TIMEOUT_MS + 60_000,
  );
});

/** A reader's machine running the embedded default: a DATA_DIR holding an app, and a home of its own. */
interface EmbeddedDefault {
  home: string;
  env: { DATA_DIR: string; EMBEDDED_PG_PORT: string };
}

/** Made once, for the first block that asks for it: `pushd app create` on a fresh DATA_DIR (no server left running). */
async function embeddedDefault(): Promise<EmbeddedDefault> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'pushd-docs-embedded-'));
  await chmod(home, 0o755); // as root, PostgreSQL runs as the postgres user and must reach its directory
  const env = { DATA_DIR: path.join(home, 'data'), EMBEDDED_PG_PORT: String(await freePort()) };
  const cli = Proc.cli(['app', 'create', '--bundle-id', 'com.example.embedded'], { ...env, DATABASE_URL: '' });
  const { code } = await cli.exited;
  expect(code, cli.output).toBe(0);
  return { home, env };
}

/** The block in a subshell as on that machine: no DATABASE_URL or key setting, its DATA_DIR and home. */
function besideEmbedded(code: string, { home, env }: EmbeddedDefault): string {
  const exports = Object.entries({ HOME: home, ...env }).map(([k, v]) => `${k}=${v}`);
  return `(\nunset DATABASE_URL SECRETS_KEY\nexport ${exports.join(' ')}\n${code}\n)`;
}

function where(block: ShellBlock): string {
  return `${path.relative(ROOT, block.file)}:${block.line}`;
}
