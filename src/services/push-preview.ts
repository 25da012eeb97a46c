import type { Db } from '../db/database.js';
import type { AudiencesRepository } from '../db/repositories/audiences.js';
import type { DevicesRepository } from '../db/repositories/devices.js';
import type { Device } from '../db/schema.js';
import { expiryOf, resolveDeliveryOptions } from '../domain/delivery-options.js';
import { NotFoundError, ValidationError } from '../domain/errors.js';
import { localeVariant, localizedPayload } from '../domain/localized.js';
import { targetOf, type NotificationRequest } from '../domain/notification-request.js';
import type { Payload } from '../domain/payload.js';
import {
  fcmSendBody,
  toApnsRequest,
  toFcmMessage,
  toHmsMessage,
  toWebPushMessage,
  type ApnsRequest,
  type FcmSendBody,
  type HmsMessageTemplate,
  type WebPushMessage,
} from '../domain/push-mapping.js';
import { deviceData, deviceVariables, templateDataOf } from '../domain/template-data.js';
import { compilePayload, renderPayload } from '../domain/templates.js';
import type { Clock } from '../platform/clock.js';

type TemplateDataFields = Parameters<typeof templateDataOf>[0];

/** Stands for the id a notification gets when it is created; the same length, so the previewed sizes are exact. */
export const PREVIEW_NOTIFICATION_ID = '00000000-0000-0000-0000-000000000000';
export const PREVIEW_DEVICE_TOKEN = '<device token>';
/** A user's devices a preview shows at most. */
export const PREVIEW_USER_DEVICES = 50;

export interface PushPreview {
  apns: ApnsRequest;
  fcm: FcmSendBody;
  web: WebPushMessage;
  hms: HmsMessageTemplate;
}

/** What a preview reads: the device it is for, the audience it names, the time it is sent at. */
export interface PreviewDeps {
  db: Db;
  devices: DevicesRepository;
  audiences: AudiencesRepository;
  clock: Clock;
}

/** A preview's requests, and the language entry (`localized`'s key) it was made in. */
export type PushPreviewed = PushPreview & { variant: string | null };

/**
 * What `create` would send, without storing or sending anything: the mapped APNs, FCM, Web Push and HMS requests, as if
 * sent now (a ttl counts from now, and FCM's ttl is the time left), to a device of `locale` when given.
 */
export async function previewPush(
  deps: PreviewDeps,
  appId: string,
  request: NotificationRequest,
  at: { locale?: string; deviceId?: string } = {},
): Promise<PushPreviewed> {
  const device = at.deviceId !== undefined ? await deps.devices.findForApp(deps.db, appId, at.deviceId) : undefined;
  if (at.deviceId !== undefined && !device) throw new NotFoundError('device');
  const target = targetOf(request.notification.to);
  if (target.kind === 'audience' && !(await deps.audiences.findForApp(deps.db, appId, target.audienceId)))
    throw new NotFoundError('audience');
  return previewFor(deps, request, device, at.locale);
}

/** A user's device and what it would receive, or why its render fails (as its send would fail alone). */
export interface UserPreview {
  device: Device;
  preview: PushPreviewed | { error: string };
}

/** `previewPush` for each of a user's devices (the first PREVIEW_USER_DEVICES by id), its templates rendered for it. */
export async function previewPushForUser(
  deps: PreviewDeps,
  appId: string,
  request: NotificationRequest,
  at: { userId: string; locale?: string | undefined },
): Promise<UserPreview[]> {
  const devices = await deps.devices.userDevicesUpTo(deps.db, appId, at.userId, PREVIEW_USER_DEVICES);
  if (!devices.length) throw new NotFoundError('user');
  const out: UserPreview[] = [];
  for (const device of devices) {
    try {
      out.push({ device, preview: await previewFor(deps, request, device, at.locale) });
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      out.push({ device, preview: { error: err.message } });
    }
  }
  return out;
}

/** The mapped requests for one device (or none), as if sent now. */
async function previewFor(
  deps: PreviewDeps,
  request: NotificationRequest,
  device: Device | undefined,
  locale?: string,
): Promise<PushPreviewed> {
  const { localized } = request.notification;
  // a device of this locale gets its language's entry, as a send picks it (else the payload as it is)
  const variant = localeVariant(localized, locale ?? device?.locale);
  const content = variant === null ? request.notification.payload : localizedPayload(request.notification.payload, localized![variant]);
  const payload = await rendered(deps, content, request.notification, device);
  const now = deps.clock.now();
  const options = resolveDeliveryOptions(request.notification, now);
  const push = { expiresAt: expiryOf(options, now), priority: options.priority };
  return {
    apns: toApnsRequest(payload, PREVIEW_NOTIFICATION_ID, push),
    fcm: fcmSendBody(toFcmMessage(payload, PREVIEW_NOTIFICATION_ID, { ...push, now }), PREVIEW_DEVICE_TOKEN),
    web: toWebPushMessage(payload, PREVIEW_NOTIFICATION_ID, { ...push, now }),
    hms: toHmsMessage(payload, PREVIEW_NOTIFICATION_ID, { ...push, now }),
    variant,
  };
}

/** The payload's templates rendered as a send would for this device (none: with the send's data alone). */
async function rendered(deps: PreviewDeps, payload: Payload, fields: TemplateDataFields, device: Device | undefined): Promise<Payload> {
  const compiled = compilePayload(payload);
  if (!compiled) return payload;
  const attributes = device ? await deps.devices.attributesOf(deps.db, [device.id]) : [];
  const variables = {
    ...(device && deviceVariables(device, attributes)),
    ...deviceData(templateDataOf(fields), { id: device?.id ?? '', userId: device?.user_id ?? null }),
  };
  try {
    return renderPayload(compiled, variables) as Payload;
  } catch (err) {
    throw new ValidationError(`${device ? 'device_id' : 'notification.payload'}: does not render: ${(err as Error).message}`);
  }
}
