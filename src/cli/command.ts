import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { CLI_ACTOR, type Actor } from '../domain/audit.js';
import type { DatabaseRuntime } from '../app/runtime.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import { isUuid } from '../domain/cursor.js';

/** The values of a command's options, by name without the dashes; checked as declared before the command runs. */
export type Args = Record<string, string | undefined>;

/** What is wrong with an option's value, or undefined when it is fine. */
export type ValueCheck = (value: string) => string | undefined;

export interface OptionSpec {
  /** The value's placeholder in the usage line: `--app ID`; none for a flag (`--on`), which is "true" when given. */
  value?: string;
  help: string;
  required?: boolean;
  check?: ValueCheck;
}

/**
 * One `pushd` command. Its options are declared once: the parser accepts only these, checks them, and `--help`
 * prints them. A file of commands exports a `Record<name, Command>` that src/cli/index.ts spreads into its list;
 * most run on the database (`Command`), a few on this machine's files alone (`LocalCommand`).
 */
export type AnyCommand = Command | LocalCommand;

interface CommandBase {
  /** One sentence for `--help`. */
  summary: string;
  options?: Record<string, OptionSpec>;
  /** Whether the command writes its own output on stdout (an archive): its JSON answer then goes to stderr. */
  writesStdout?(args: Args): boolean;
}

export interface Command extends CommandBase {
  /** What the settings rule out, said before any database is opened (a usage error). */
  refuses?(config: Config): string | undefined;
  /** Runs on an open, migrated database; what it returns is printed as one JSON document. */
  run(args: Args, runtime: DatabaseRuntime): Promise<unknown>;
  /** What a person reads instead, on a terminal unless `--json` is given (the command declares that flag). */
  render?(result: unknown): string;
}

/** A command on this machine's files alone: no database is opened for it. */
export interface LocalCommand extends CommandBase {
  local: true;
  run(args: Args, config: Config, log: Logger): Promise<unknown>;
}

/** The command line is wrong (unknown command or option, a missing or invalid value): exit code 2. */
export class UsageError extends Error {}

export const uuid: ValueCheck = (v) => (isUuid(v) ? undefined : 'must be a UUID');

export const oneOf =
  (...choices: string[]): ValueCheck =>
  (v) =>
    choices.includes(v) ? undefined : `must be one of ${choices.join(', ')}`;

export const number: ValueCheck = (v) => (v.trim() !== '' && Number.isFinite(Number(v)) ? undefined : 'must be a number');

/** A number, or `none` to remove the setting. */
export const numberOrNone: ValueCheck = (v) => (v === 'none' ? undefined : number(v) && 'must be a number or none');

/** A required option's value (the parser has checked it is there). */
export function given(args: Args, name: string): string {
  const value = args[name];
  if (value === undefined) throw new UsageError(`--${name} is required`);
  return value;
}

/** A file option's contents, `-` meaning standard input. */
export async function readOptionFile(args: Args, option: string): Promise<string> {
  const path = given(args, option);
  try {
    if (path !== '-') return await readFile(path, 'utf8');
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  } catch {
    throw new UsageError(`--${option}: cannot read ${path === '-' ? 'standard input' : path}`);
  }
}

/**
 * A secret given in a file (or `-`: standard input), its line end dropped, or, discouraged, as the argument itself
 * (where `ps` and the shell's history show it); not both.
 */
export async function secretOption(args: Args, option: string, required: true): Promise<string>;
export async function secretOption(args: Args, option: string, required?: boolean): Promise<string | undefined>;
export async function secretOption(args: Args, option: string, required = false): Promise<string | undefined> {
  const file = `${option}-file`;
  if (args[option] !== undefined && args[file] !== undefined) throw new UsageError(`give --${option} or --${file}, not both`);
  if (required && args[option] === undefined && args[file] === undefined) throw new UsageError(`--${file} is required`);
  if (args[file] === undefined) return args[option];
  const value = (await readOptionFile(args, file)).replace(/\r?\n$/, '');
  if (value === '') throw new UsageError(`--${file}: is empty`);
  return value;
}

/** The two declarations of a secret option: `--NAME-file F` (or `-`), and the discouraged `--NAME VALUE`. */
export function secretOptions(option: string, value: string, help: string, required = false): Record<string, OptionSpec> {
  const needed = required ? `(required unless --${option}) ` : '';
  return {
    [`${option}-file`]: { value: 'FILE', help: `${needed}a file holding ${help} (- reads standard input)` },
    [option]: { value, help: `${help} itself (discouraged: ps and the shell's history show it)` },
  };
}

/** Who runs this command, as its audit rows name them: the command line, with the OS user and host in place of an address. */
export function operator(): Actor {
  let user: string;
  try {
    user = os.userInfo().username;
  } catch {
    // a uid with no name (a container's): the number, as ps shows it
    user = process.env.USER ?? `uid ${process.getuid?.() ?? '?'}`;
  }
  return { ...CLI_ACTOR, address: `${user}@${os.hostname()}` };
}
