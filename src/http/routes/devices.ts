import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import type { DeviceAttributeRow } from '../../db/repositories/devices.js';
import type { DeviceEventRow } from '../../db/repositories/events.js';
import { ForbiddenError } from '../../domain/errors.js';
import type { Caller, DeviceDetails, Written } from '../../services/devices.js';
import { requirePermission } from '../auth.js';
import { iso } from '../serialize.js';

export const deviceBody = z.object(
  { device: z.record(z.string(), z.unknown(), { error: 'must be an object' }) },
  { error: 'body must be {"device": {...}}' },
);
export const eventsBody = z.object(
  { events: z.array(z.unknown(), { error: 'must be an array of {"name", "date"?}' }) },
  { error: 'body must be {"events": [...]}' },
);
const idParams = z.object({ id: z.string() });

export const callerOf = (request: FastifyRequest): Caller => ({ role: request.principal.role, ip: request.ip ?? null });

/**
 * The device API. Registering, updating and events take the `device` permission (the SDK key or a write key);
 * erasing takes `write`; reading takes `read` or `device`, since the SDKs read their own device back. An sdk
 * caller reaches a device only by its id (a random UUID, 122 bits), which only registering it answers: the id
 * is the device's capability, and no route an sdk key may call lists devices.
 */
export function deviceRoutes(ctx: HttpContext): FastifyPluginAsyncZod {
  return async (app) => {
    const device = requirePermission(ctx, 'device');
    const write = requirePermission(ctx, 'write');
    const read = requirePermission(ctx, 'read');
    const readOrDevice = async (request: FastifyRequest, reply: FastifyReply) => {
      try {
        await device(request, reply);
      } catch (err) {
        if (!(err instanceof ForbiddenError)) throw err;
        await read(request, reply);
      }
    };

    app.post(
      '/v6/devices',
      { onRequest: device, schema: { tags: ['devices'], summary: 'Register a device (upsert on its push token)', body: deviceBody } },
      async (request, reply) => {
        const r = await ctx.services.devices.register(request.principal.appId, request.body.device, callerOf(request));
        if (r.kind === 'nothing-valid') return reply.status(422).send({ error: 'nothing valid to store', dropped: r.dropped });
        // A token the app already has: the caller proved only that it knows the token, not that the record is its own.
        if (!r.created) return reply.status(200).send({ device: writtenView(r.details, r.written), dropped: r.dropped });
        return reply.status(201).send({ device: deviceView(r.details), dropped: r.dropped });
      },
    );

    app.put(
      '/v6/devices/:id',
      { onRequest: device, schema: { tags: ['devices'], summary: 'Update a device (merge)', params: idParams, body: deviceBody } },
      async (request, reply) => {
        const r = await ctx.services.devices.update(request.principal.appId, request.params.id, request.body.device, callerOf(request));
        if (r.kind === 'nothing-valid') return reply.status(422).send({ error: 'nothing valid to store', dropped: r.dropped });
        return { device: deviceView(r.details), dropped: r.dropped };
      },
    );

    app.get(
      '/v6/devices/:id',
      { onRequest: readOrDevice, schema: { tags: ['devices'], summary: 'Read a device with its attributes and events', params: idParams } },
      async (request) => ({ device: deviceView(await ctx.services.devices.get(request.principal.appId, request.params.id)) }),
    );

    app.post(
      '/v6/devices/:id/erase',
      { onRequest: write, schema: { tags: ['devices'], summary: 'Erase a device (its data is emptied)', params: idParams } },
      async (request) => ({ device: deviceView(await ctx.services.devices.erase(request.principal.appId, request.params.id)) }),
    );

    app.post(
      '/v6/devices/:id/events',
      { onRequest: device, schema: { tags: ['devices'], summary: 'Record events of a device', params: idParams, body: eventsBody } },
      async (request, reply) => {
        await ctx.services.devices.recordEvents(request.principal.appId, request.params.id, request.body, callerOf(request));
        return reply.status(202).send({});
      },
    );
  };
}

/** The device as the API shows it: our field names plus the public API's (push_token, user_attributes, ...). */
export function deviceView({ device: d, attributes, events }: DeviceDetails) {
  const custom = customView(attributes);
  const gps = d.sdk_latitude !== null && d.sdk_longitude !== null ? { latitude: d.sdk_latitude, longitude: d.sdk_longitude } : null;
  const ipLocation = d.ip_latitude !== null && d.ip_longitude !== null ? { latitude: d.ip_latitude, longitude: d.ip_longitude } : null;
  return {
    id: d.id,
    platform: d.platform,
    token: d.token,
    push_token: d.token,
    development: d.development,
    locale: d.locale,
    time_zone: d.time_zone,
    os_name: d.os_name,
    os_version: d.os_version,
    app_version: d.app_version,
    sdk_version: d.sdk_version,
    marketing_name: d.marketing_name,
    badge: d.badge,
    user_id: d.user_id,
    user_email: d.user_email,
    tags: d.tags,
    country: d.country,
    notifications_allowed: d.notifications_allowed,
    push_enabled: d.notifications_allowed === 'Enabled',
    // `location` is what the location filter tests: GPS when there is a fix, else GeoIP.
    location: gps ?? ipLocation,
    sdk_location: gps,
    custom,
    user_attributes: custom,
    user_events: eventsView(events),
    created_at: iso(d.created_at),
    installed_at: iso(d.created_at),
    registered_at: iso(d.registered_at),
    erased_at: iso(d.erased_at),
    token_invalidated_at: iso(d.token_invalidated_at),
  };
}

/** The keys of deviceView that show a device field, where they are not the field's own name. */
const VIEW_KEYS: Partial<Record<Written['fields'][number], string[]>> = {
  token: ['token', 'push_token'],
  notifications_allowed: ['notifications_allowed', 'push_enabled'],
  sdk_latitude: ['location', 'sdk_location'],
  sdk_longitude: ['location', 'sdk_location'],
};

/**
 * The answer to registering a token the app already has: the device's id, its platform and what this request
 * wrote, as stored; nothing else of the existing record (its e-mail, location, other attributes, events).
 */
export function writtenView(details: DeviceDetails, written: Written): Partial<ReturnType<typeof deviceView>> {
  const custom = new Set(written.custom);
  const view = deviceView({ ...details, attributes: details.attributes.filter((a) => custom.has(a.name)), events: [] });
  const shown = new Set([
    'id',
    'platform',
    ...written.fields.flatMap((f) => VIEW_KEYS[f] ?? [f]),
    ...(custom.size > 0 ? ['custom', 'user_attributes'] : []),
  ]);
  return Object.fromEntries(Object.entries(view).filter(([key]) => shown.has(key)));
}

type CustomView = Record<string, { type: string; value: unknown }>;

function customView(rows: DeviceAttributeRow[]): CustomView {
  const out: CustomView = {};
  for (const r of rows) {
    const value = r.str_value ?? r.num_value ?? (r.date_value ? iso(r.date_value) : null) ?? r.bool_value;
    const entry = (out[r.name] ??= { type: r.type, value: r.is_array ? [] : value });
    if (r.is_array) (entry.value as unknown[]).push(value);
  }
  return out;
}

/** Keyed as in filter names without `events.`: `<name>` for SDK events, `<source>.<name>` otherwise. */
function eventsView(rows: DeviceEventRow[]) {
  return Object.fromEntries(
    rows.map((e) => [
      e.source ? `${e.source}.${e.name}` : e.name,
      { count: Number(e.count), first_happened_at: iso(e.first_happened_at), last_happened_at: iso(e.last_happened_at) },
    ]),
  );
}
