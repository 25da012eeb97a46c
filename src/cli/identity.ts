import { ValidationError } from '../domain/errors.js';
import { AppService } from '../services/apps.js';
import type { Command } from './index.js';

const ACTIONS = ['on', 'off', 'rotate'] as const;

/** The command's flags, which take no value, as parseArgs options. */
export const identityFlags: [string, { type: 'boolean' }][] = ACTIONS.map((action) => [action, { type: 'boolean' }]);

/** The parsed options as commands take them: a flag given (`--on`) as "true". */
export function flagsAsText(values: Record<string, string | boolean | undefined>): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(values).map(([name, value]) => [name, typeof value === 'boolean' ? String(value) : value]));
}

/**
 * app set-identity-verification --app ID (--on | --off | --rotate): whether the sdk key must prove the user ids and
 * e-mail addresses it binds devices to. `--on` and `--rotate` print the app's identity secret (the HMAC key the
 * backend makes the hashes with); `--off` keeps it stored without printing it.
 */
export const identityCommands: Record<string, Command> = {
  'app set-identity-verification': async (a, rt) => {
    if (!a.app) throw new ValidationError('--app is required');
    const given = ACTIONS.filter((action) => a[action] !== undefined);
    if (given.length !== 1) throw new ValidationError('give exactly one of --on, --off, --rotate');
    return new AppService(rt.handle.db).setIdentityVerification(a.app, given[0]!);
  },
};
