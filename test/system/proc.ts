import { spawn, type ChildProcess } from 'node:child_process';
import { PRODUCTION_NODE_ARGS } from '../../bench/lib/setup.js';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { inject } from 'vitest';
import { withTestSecretsKey } from '../engines/secrets-key.js';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export { freePort, portAnswers } from '../engines/engines.js';

/** A fresh empty database on the test PostgreSQL; drop() removes it. */
export async function freshDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const adminUrl = inject('adminDatabaseUrl');
  const name = `sys_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await a.end();
    },
  };
}

/** Only what a process needs from the parent environment; everything else is given explicitly. */
const baseEnv = () => ({ PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR });

/** A process of ours (server or CLI) with its output collected, so tests can wait for log lines. */
export class Proc {
  readonly child: ChildProcess;
  output = '';
  stdout = '';
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private waiters: (() => void)[] = [];

  /** `group`: the process leads a process group of its own, as a shell's foreground job does (see interrupt()). */
  constructor(args: string[], env: Record<string, string | undefined>, opts: { group?: boolean } = {}) {
    this.child = spawn(process.execPath, args, {
      cwd: ROOT,
      detached: opts.group ?? false,
      env: { ...baseEnv(), ...withTestSecretsKey(env) } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const collect = (which: 'stdout' | 'stderr') => (d: Buffer) => {
      this[which] += d.toString();
      this.output += d.toString();
      for (const w of this.waiters) w();
    };
    this.child.stdout!.on('data', collect('stdout'));
    this.child.stderr!.on('data', collect('stderr'));
    // 'exit' can come before the pipes' last bytes are read; wait for both to end, but not for a grandchild
    // (an embedded PostgreSQL) that may hold them open.
    const ended = (s: Readable) => new Promise<void>((r) => (s.readableEnded ? r() : s.once('end', r)));
    const drained = () =>
      Promise.race([Promise.all([ended(this.child.stdout!), ended(this.child.stderr!)]), sleep(2_000, undefined, { ref: false })]);
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => void drained().then(() => resolve({ code, signal }))));
    void this.exited.then(() => this.waiters.forEach((w) => w()));
  }

  /** The compiled server with the production node flags: what `npm start` and the Docker image run. */
  static server(env: Record<string, string | undefined>, opts: { group?: boolean } = {}): Proc {
    return new Proc([...PRODUCTION_NODE_ARGS, 'dist/src/main.js'], { LOG_LEVEL: 'info', ...env }, opts);
  }

  static cli(args: string[], env: Record<string, string | undefined>): Proc {
    return new Proc(['bin/pushd.js', ...args], env);
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves with the first pino line whose msg matches; rejects if the process exits first or time runs out. */
  waitForLog(msg: string | RegExp, timeoutMs = 90_000): Promise<Record<string, unknown>> {
    const matches = (line: string) => {
      try {
        const j = JSON.parse(line) as Record<string, unknown>;
        return typeof j.msg === 'string' && (typeof msg === 'string' ? j.msg === msg : msg.test(j.msg)) ? j : null;
      } catch {
        return null;
      }
    };
    return new Promise((resolve, reject) => {
      const check = () => {
        for (const line of this.stdout.split('\n')) {
          const hit = matches(line);
          if (hit) return done(() => resolve(hit));
        }
        if (!this.running) done(() => reject(new Error(`process exited before logging "${msg}":\n${this.output}`)));
      };
      const timer = setTimeout(() => done(() => reject(new Error(`no "${msg}" within ${timeoutMs} ms:\n${this.output}`))), timeoutMs);
      const done = (f: () => void) => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== check);
        f();
      };
      this.waiters.push(check);
      check();
    });
  }

  /** Ctrl-C in a terminal: SIGINT to the whole process group (a Proc started with `group`). */
  async interrupt(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    process.kill(-this.child.pid!, 'SIGINT');
    return this.exited;
  }

  /** Sends a signal and waits for the exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.running) this.child.kill(signal);
    return this.exited;
  }
}
