import type { DatabaseRuntime } from '../app/runtime.js';
import type { Config } from '../platform/config.js';
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
}

/** A command on this machine's files alone: no database is opened for it. */
export interface LocalCommand extends CommandBase {
  local: true;
  run(args: Args, config: Config): Promise<unknown>;
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
