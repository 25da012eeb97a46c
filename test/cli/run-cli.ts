import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect } from 'vitest';
import { withTestSecretsKey } from '../engines/secrets-key.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const ROOT = path.resolve(import.meta.dirname, '../..');

/**
 * Runs the installed entry point (`bin/pushd.js`, as `npx pushd` would) with an environment of its own; on a
 * DATABASE_URL, with the harness's secrets key unless it names one; `stdin` is what it reads on standard input.
 */
export function runCli(args: string[], env: Record<string, string | undefined>, stdin?: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/pushd.js'), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...withTestSecretsKey(env) } as NodeJS.ProcessEnv,
      stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (stdin !== undefined) child.stdin!.end(stdin);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The one JSON document a command that succeeded printed, with nothing on stderr. */
export function oneDocument(r: CliResult): Record<string, unknown> {
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}
