import { ValidationError } from '../domain/errors.js';
import { AppService } from '../services/apps.js';
import type { Command } from './index.js';

/**
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
