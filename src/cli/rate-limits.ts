import { operatorServices } from '../app/runtime.js';
import {
  type Args,
  type Command,
  type OptionSpec,
  given,
  number,
  numberOrNone,
  operator,
  secretOption,
  UsageError,
  uuid,
} from './command.js';
import { parseQuietHoursSetting } from '../domain/quiet-hours.js';
import { parseFrequencyCaps } from '../domain/frequency-caps.js';

/** A key named by its id (`key list`) or read from a file or standard input: never the key on the command line. */
const whichKey: Record<string, OptionSpec> = {
  id: { value: 'ID', help: "the key's id, as key list shows it", check: uuid },
  'key-file': { value: 'FILE', help: 'a file holding the key (- reads standard input)' },
};
async function keyNamed(a: Args): Promise<string | { id: string }> {
  if ((a.id === undefined) === (a['key-file'] === undefined)) throw new UsageError('give one of --id, --key-file');
  return a.id === undefined ? secretOption(a, 'key', true) : { id: a.id };
}

/**
 * app set-limits: the app's ceiling on pushes a minute and its default time zone.
 * key set-limit / key clear-limit: a rate limit of one key's own, in place of its role's default (for an sdk
 * key it applies per client address). Stored with the key; every API process applies it once it hears the change.
 */
export const rateLimitCommands: Record<string, Command> = {
  'key set-limit': {
    summary: "Gives one key its own rate limit in place of its role's default (an sdk key: per client address).",
    options: {
      ...whichKey,
      'per-second': { value: 'N', help: 'requests a second, sustained; 0 means no limit', required: true, check: number },
      burst: { value: 'M', help: 'requests at once before the rate applies (at least 1)', required: true, check: number },
    },
    run: async (a, rt) => {
      const limit = { perSecond: Number(given(a, 'per-second')), burst: Number(given(a, 'burst')) };
      await operatorServices(rt).apps.setKeyRateLimit(await keyNamed(a), limit, operator());
      return { rate_limit: { per_second: limit.perSecond, burst: limit.burst } };
    },
  },
  'key clear-limit': {
    summary: "Returns a key to its role's default rate limit.",
    options: whichKey,
    run: async (a, rt) => {
      await operatorServices(rt).apps.setKeyRateLimit(await keyNamed(a), null, operator());
      return { rate_limit: null };
    },
  },
  'app set-limits': {
    summary: "Sets an app's campaign limits: pushes a minute, the default time zone of local-time sends, quiet hours, frequency caps.",
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      'max-per-minute': { value: 'N|none', help: 'pushes a minute at most, for all its campaigns; none removes it', check: numberOrNone },
      'default-time-zone': { value: 'ZONE|none', help: 'an IANA time zone such as Europe/Paris; none removes it' },
      'quiet-hours': {
        value: 'HH:MM-HH:MM[/drop]|none',
        help: "each device's quiet hours, e.g. 22:00-08:00 (held to their end) or 22:00-08:00/drop; none removes them",
        check: (v) => (v === 'none' || parseQuietHoursSetting(v) ? undefined : 'must be HH:MM-HH:MM, HH:MM-HH:MM/drop or none'),
      },
      cap: {
        value: 'N/WINDOW,...|none',
        help: 'pushes one device receives at most in any minute, hour or day (N up to 1000), e.g. 3/day,1/hour; none removes them',
        check: (v) =>
          v === 'none' || parseFrequencyCaps(v)
            ? undefined
            : 'must be N/minute, N/hour or N/day (N from 1 to 1000), comma-separated, or none',
      },
    },
    run: async (a, rt) => {
      const value = (name: string) => (a[name] === undefined ? undefined : a[name] === 'none' ? null : a[name]!);
      const max = value('max-per-minute');
      const quiet = value('quiet-hours');
      const cap = value('cap');
      if (max === undefined && value('default-time-zone') === undefined && quiet === undefined && cap === undefined)
        throw new UsageError(
          'give --max-per-minute N|none, --default-time-zone ZONE|none, --quiet-hours HH:MM-HH:MM|none and/or --cap N/day|none',
        );
      const limits = {
        maxPerMinute: max === undefined || max === null ? max : Number(max),
        defaultTimeZone: value('default-time-zone'),
        quietHours: quiet === undefined || quiet === null ? quiet : parseQuietHoursSetting(quiet),
        frequencyCaps: cap === undefined || cap === null ? cap : parseFrequencyCaps(cap),
      };
      return operatorServices(rt).apps.setLimits(given(a, 'app'), limits, operator());
    },
  },
};
