import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { NotFoundError } from '../../domain/errors.js';
import { parseIsoDate } from '../../domain/date-math.js';
import { decodeCursor, encodeCursor, isUuid } from '../../domain/cursor.js';
import { requirePermission } from '../auth.js';
import { authErrors, errorResponse } from '../schemas.js';
import { iso } from '../serialize.js';

const isoDate = z
  .string()
  .refine((s) => parseIsoDate(s) !== null, 'must be an ISO 8601 date')
  .transform((s) => parseIsoDate(s)!);

/** Devices whose token a gateway rejected, in cursor pages, oldest invalidation first. */
export function uninstalledRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v6/devices/uninstalled',
      {
        onRequest: requirePermission(ctx, 'read'),
        schema: {
          tags: ['devices'],
          summary: 'Devices whose push token the gateways rejected',
          querystring: z.object({
            cursor: z.string().optional(),
            from: isoDate.optional(),
            to: isoDate.optional(),
            per: z.coerce.number().int().min(1).max(1000).default(100),
          }),
          response: {
            200: z.object({
              meta: z.object({ cursor: z.string().nullable() }),
              devices: z.array(
                z.object({
                  id: z.string(),
                  platform: z.enum(['ios', 'android']),
                  push_token: z.string().nullable(),
                  uninstalled_at: z.string().nullable(),
                  reason: z.string().nullable(),
                }),
              ),
            }),
            400: errorResponse,
            404: errorResponse,
            ...authErrors,
          },
        },
      },
      async (request) => {
        const { cursor, from, to, per } = request.query;
        const after = cursor ? decodeUninstalledCursor(cursor) : null;
        if (cursor && !after) throw new NotFoundError('cursor');
        const rows = await ctx.services.stats.uninstalledPage(request.principal.appId, { after, from, to, limit: per });
        const last = rows.length === per ? rows[rows.length - 1]! : null;
        return {
          meta: { cursor: last ? encodeCursor('uninstalled', [last.token_invalidated_at.toISOString(), last.id]) : null },
          devices: rows.map((d) => ({
            id: d.id,
            platform: d.platform,
            push_token: d.token,
            uninstalled_at: iso(d.token_invalidated_at),
            reason: d.token_invalid_reason,
          })),
        };
      },
    );
  };
}

/** The uninstalled listing's position: when the token was rejected, and the device id (ties). */
function decodeUninstalledCursor(cursor: string): { at: Date; id: string } | null {
  const [at, id] = decodeCursor(cursor, 'uninstalled', 2) ?? [];
  const date = at ? parseIsoDate(at) : null;
  return date && id && isUuid(id) ? { at: date, id } : null;
}
