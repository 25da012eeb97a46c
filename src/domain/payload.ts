import { z } from 'zod';
import { INTERRUPTION_LEVELS } from './vocabulary.js';
import { gatewaySizeProblem } from './push-mapping.js';
import { templateProblems } from './templates.js';

/**
 * Payload rules of the contract. Known keys are typed; reserved keys are refused; every other key is a
 * custom key and passes through untouched. A payload that maps to more than APNs or FCM accepts is refused.
 */

/** Keys the gateways or this service own. FCM refuses data keys from/notification/message_type and google.*, gcm.*. */
const RESERVED_KEYS = new Set(['available', 'from', 'gcm', 'notification', 'message_type', 'aps', '_nid']);
const RESERVED_PREFIXES = ['google.', 'gcm.'];

export function reservedKeyProblem(key: string): string | null {
  if (RESERVED_KEYS.has(key)) return 'is a reserved key and cannot be set';
  if (RESERVED_PREFIXES.some((p) => key.startsWith(p))) return `is reserved (keys beginning google. or gcm. belong to the push gateway)`;
  return null;
}

const str = () => z.string({ error: 'must be a string' });
const flag = () => z.boolean({ error: 'must be a boolean' }).optional();
/** An address the browser loads or opens: absolute http(s), or a path on the page's own origin. */
const link = () =>
  str()
    .max(2048, 'must be at most 2048 characters')
    // a template's tags may hold spaces: the address is checked with each tag standing for what it renders
    .refine(
      (v) => /^(https?:\/\/[^\s]+|\/[^\s]*)$/.test(v.replace(/\{\{.*?\}\}|\{%.*?%\}/gs, 'x')),
      'must be an http(s) URL or a path beginning with /',
    )
    .optional();

/** The browser-only fields of a push (the `web` object): what showNotification takes, and the page a click opens. */
export const webSchema = z.strictObject(
  {
    icon: link(),
    image: link(),
    badge: link(),
    url: link(),
    actions: z
      .array(
        z.strictObject(
          {
            action: str().min(1, 'must not be empty').max(64, 'must be at most 64 characters'),
            title: str().max(255),
            icon: link(),
            url: link(),
          },
          { error: 'must be {action, title, icon?, url?}' },
        ),
        { error: 'must be an array of {action, title, icon?, url?}' },
      )
      .max(4, 'at most 4 actions')
      .optional(),
    require_interaction: flag(),
    silent: flag(),
    renotify: flag(),
    dir: z.enum(['auto', 'ltr', 'rtl'], { error: 'must be auto, ltr or rtl' }).optional(),
    lang: str().max(35, 'must be at most 35 characters').optional(),
  },
  {
    error: 'must be an object of browser-only fields (icon, image, badge, url, actions, require_interaction, silent, renotify, dir, lang)',
  },
);

export const payloadSchema = z
  .looseObject(
    {
      alert: str().optional(),
      title: str().optional(),
      subtitle: str().optional(),
      sound: str().optional(),
      category: str().optional(),
      _channel_id: str().optional(),
      collapse_key: str().min(1, 'must not be empty').max(64, 'must be at most 64 characters').optional(),
      badge: z
        .number({ error: 'must be an integer >= 0' })
        .int('must be an integer >= 0')
        .min(0, 'must be an integer >= 0')
        .max(2147483647, 'must be at most 2147483647')
        .optional(),
      content_available: z.boolean({ error: 'must be a boolean' }).optional(),
      mutable_content: z.boolean({ error: 'must be a boolean' }).optional(),
      interruption_level: z.enum(INTERRUPTION_LEVELS, { error: `must be one of ${INTERRUPTION_LEVELS.join(', ')}` }).optional(),
      relevance_score: z
        .number({ error: 'must be a number from 0 to 1' })
        .min(0, 'must be a number from 0 to 1')
        .max(1, 'must be a number from 0 to 1')
        // Exact: a JSON number with at most two decimals is the double nearest to its two-decimal rendering.
        // (An absolute tolerance let tiny values such as 1e-12 through.)
        .refine((v) => Number(v.toFixed(2)) === v, 'may have at most two decimal places')
        .optional(),
      web: webSchema.optional(),
    },
    { error: 'must be an object' },
  )
  .superRefine((payload, ctx) => {
    for (const key of Object.keys(payload)) {
      const problem = reservedKeyProblem(key);
      if (problem) ctx.addIssue({ code: 'custom', path: [key], message: problem });
    }
    // a browser refuses renotify without a tag (showNotification throws), so the push would show nothing
    if (payload.web?.renotify === true && payload.collapse_key === undefined)
      ctx.addIssue({ code: 'custom', path: ['web', 'renotify'], message: 'needs collapse_key (the notification tag it renotifies)' });
    if (Object.keys(payload).length === 0) ctx.addIssue({ code: 'custom', path: [], message: 'must not be empty' });
    for (const { path, message } of templateProblems(payload)) ctx.addIssue({ code: 'custom', path, message });
    const tooLarge = gatewaySizeProblem(payload);
    if (tooLarge) ctx.addIssue({ code: 'custom', path: [], message: tooLarge });
  });

export type Payload = z.infer<typeof payloadSchema>;
