import { ValidationError } from '../domain/errors.js';
import { AppService } from '../services/apps.js';
import type { Command } from './index.js';

/**
 * app set-limits: the app's ceiling on pushes a minute and its default time zone.
 * key set-limit / key clear-limit: a rate limit of one key's own, in place of its role's default (for an sdk
 * key it applies per client address). Stored with the key, so every API process applies it from the next request.
 */
export const rateLimitCommands: Record<string, Command> = {
  'key set-limit': async (a, rt) => {
    const limit = { perSecond: number(a, 'per-second'), burst: number(a, 'burst') };
    await new AppService(rt.handle.db).setKeyRateLimit(text(a, 'key'), limit);
    return { rate_limit: { per_second: limit.perSecond, burst: limit.burst } };
  },
  'key clear-limit': async (a, rt) => {
    await new AppService(rt.handle.db).setKeyRateLimit(text(a, 'key'), null);
    return { rate_limit: null };
  },
  // app set-limits --app ID [--max-per-minute N|none] [--default-time-zone ZONE|none]: the app's campaign limits
  'app set-limits': async (a, rt) => {
    const given = (name: string) => (a[name] === undefined ? undefined : a[name] === 'none' ? null : a[name]!);
    const max = given('max-per-minute');
    if (max === undefined && given('default-time-zone') === undefined)
      throw new ValidationError('give --max-per-minute N|none and/or --default-time-zone ZONE|none');
    return new AppService(rt.handle.db).setLimits(text(a, 'app'), {
      maxPerMinute: max === undefined || max === null ? max : Number(max),
      defaultTimeZone: given('default-time-zone'),
    });
  },
};

function text(args: Record<string, string | undefined>, name: string): string {
  const v = args[name];
  if (!v) throw new ValidationError(`--${name} is required`);
  return v;
}

function number(args: Record<string, string | undefined>, name: string): number {
  const v = Number(text(args, name));
  if (!Number.isFinite(v)) throw new ValidationError(`--${name} must be a number`);
  return v;
}
