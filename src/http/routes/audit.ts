import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { AUDIT_ACTION_NAMES } from '../../domain/audit.js';
import { requirePermission } from '../auth.js';
import { auditEntryRecord, authErrors, errorResponse, isoDateQuery } from '../schemas.js';
import { auditEntryView } from '../serialize.js';

/** The app's audit log, newest first, in cursor pages: a write key reads its own app's. */
export function auditRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v6/audit',
      {
        onRequest: requirePermission(ctx, 'write'),
        schema: {
          tags: ['apps'],
          summary: "The app's audit log, newest first: repeat with the cursor until a page has no entries",
          security: [{ basic: [] }],
          querystring: z.object({
            since: isoDateQuery.optional().describe('changes at or after this instant'),
            until: isoDateQuery.optional().describe('changes before this instant'),
            action: z.enum(AUDIT_ACTION_NAMES, { error: `must be one of ${AUDIT_ACTION_NAMES.join(', ')}` }).optional(),
            notification_id: z
              .string()
              .max(64)
              .optional()
              .describe("one notification's rows: who created it (from its own row when it went to a few devices), canceled it, …"),
            cursor: z.string().max(512).optional(),
            per: z.coerce.number().int().min(1).max(1000).default(100),
          }),
          response: {
            200: z.object({ meta: z.object({ cursor: z.string() }), entries: z.array(auditEntryRecord) }),
            400: errorResponse,
            404: errorResponse,
            ...authErrors,
          },
        },
      },
      async (request) => {
        const { notification_id, ...window } = request.query;
        const page = await ctx.services.audit.page(request.principal.appId, { ...window, notificationId: notification_id });
        return { meta: { cursor: page.cursor }, entries: page.entries.map(auditEntryView) };
      },
    );
  };
}
