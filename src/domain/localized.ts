import { z } from 'zod';
import { payloadSchema, webSchema, type Payload } from './payload.js';

/**
 * Content per language (issue 42): `"localized": {"fr": {"alert": …}, "pt_BR": {…}}` beside a payload. Each device
 * gets the entry of its locale (`pt_BR`), else of its language (`pt`), else the payload as it is. An entry replaces
 * the payload's text (alert, title, subtitle) and browser fields (`web`, merged key by key); everything else (sound,
 * badge, collapse_key, custom keys) is the payload's, the same in every language.
 */

/** At most this many entries: every language is mapped and measured for each gateway when the request comes. */
export const LOCALIZED_MAX_ENTRIES = 200;

const str = () => z.string({ error: 'must be a string' }).optional();

const entrySchema = z
  .strictObject(
    { alert: str(), title: str(), subtitle: str(), web: webSchema.optional() },
    { error: (issue) => (issue.code === 'invalid_type' ? 'must be an object of alert, title, subtitle, web' : undefined) },
  )
  .refine((entry) => Object.keys(entry).length > 0, 'must not be empty');

export type LocalizedEntry = z.output<typeof entrySchema>;
export type Localized = Record<string, LocalizedEntry>;

/** A key as devices' locales have it: `fr` or `pt_BR` (`pt-br` is read as `pt_BR`). */
function localeKey(key: string): string | null {
  const m = /^([A-Za-z]{2})(?:[_-]([A-Za-z]{2}))?$/.exec(key);
  if (!m) return null;
  return m[2] === undefined ? m[1]!.toLowerCase() : `${m[1]!.toLowerCase()}_${m[2].toUpperCase()}`;
}

/** The `localized` object of a request, its keys in the devices' locale form. */
export const localizedSchema = z
  .record(z.string(), entrySchema, { error: 'must be an object of languages ({"fr": {"alert": "..."}})' })
  .transform((entries, ctx) => {
    const out: Localized = {};
    const keys = Object.keys(entries);
    if (keys.length === 0) ctx.addIssue({ code: 'custom', message: 'must hold at least one language' });
    if (keys.length > LOCALIZED_MAX_ENTRIES)
      ctx.addIssue({ code: 'custom', message: `must hold at most ${LOCALIZED_MAX_ENTRIES} languages` });
    for (const key of keys) {
      const normal = localeKey(key);
      if (normal === null)
        ctx.addIssue({ code: 'custom', path: [key], message: 'must be a language (fr) or <language>_<COUNTRY> (pt_BR)' });
      else if (normal in out) ctx.addIssue({ code: 'custom', path: [key], message: `names the same language as another key (${normal})` });
      else out[normal] = entries[key]!;
    }
    return out;
  });

/** The key of `localized` a device of this locale gets: its locale, else its language; null for the payload as it is. */
export function localeVariant(localized: Localized | null | undefined, locale: string | null | undefined): string | null {
  if (!localized || !locale) return null;
  if (locale in localized) return locale;
  const language = locale.slice(0, 2);
  return language in localized ? language : null;
}

/** The payload a device of the entry's language receives. */
export function localizedPayload<P extends Record<string, unknown>>(payload: P, entry: LocalizedEntry | undefined): P {
  if (!entry) return payload;
  const web = entry.web && { ...(payload.web as Record<string, unknown> | undefined), ...entry.web };
  return { ...payload, ...entry, ...(web && { web }) };
}

/**
 * Reports the problems of each language's payload at `localized.<key>`, as the payload's own rules find them (its
 * size once mapped for APNs, FCM, Web Push and HMS included), and what `extraProblem` finds (a message's push
 * measures it with the message id).
 */
export function checkLocalized(
  payload: Payload,
  localized: Localized | undefined,
  ctx: z.RefinementCtx,
  extraProblem: (payload: Payload) => string | null = () => null,
  /** where the payload sits in the request (an A/B test's variant), before `localized` */
  prefix: (string | number)[] = [],
): void {
  if (!localized) return;
  for (const [key, entry] of Object.entries(localized)) {
    const merged = localizedPayload(payload, entry);
    const parsed = payloadSchema.safeParse(merged);
    const problems = parsed.success ? [] : parsed.error.issues.map((i) => ({ path: i.path, message: i.message }));
    const extra = parsed.success ? extraProblem(merged) : null;
    if (extra) problems.push({ path: [], message: extra });
    for (const p of problems) ctx.addIssue({ code: 'custom', path: [...prefix, 'localized', key, ...p.path], message: p.message });
  }
}
