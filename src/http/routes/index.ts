import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { activityRoutes } from './activity.js';
import { audienceCountRoutes } from './audience-count.js';
import { audienceRoutes } from './audiences.js';
import { healthRoutes } from './health.js';
import { metricsRoutes } from './metrics.js';
import { notificationRoutes } from './notifications.js';
import { uninstalledRoutes } from './uninstalled.js';
import { audienceFilterRoutes } from './audience-filters.js';
import { deviceRoutes } from './devices.js';
import { keyRoutes } from './key.js';
import { messageStreamRoutes } from './message-streams.js';
import { messageRoutes } from './messages.js';
import { notificationListRoutes } from './notification-list.js';
import { notificationPreviewRoutes } from './notification-preview.js';
import { statsRoutes } from './stats.js';
import { transactionalRoutes } from './transactional.js';
import { userRoutes } from './users.js';
import { webPushRoutes } from './web-push.js';
import { webPushScriptRoutes } from './web-push-scripts.js';
import { liveActivityRoutes } from './live-activities.js';
import { appSettingsRoutes } from './app-settings.js';
import { auditRoutes } from './audit.js';
import { journeyRoutes } from './journeys.js';
import { webhookRoutes } from './webhooks.js';
import { templateRoutes } from './templates.js';

/** Every route module of the API, registered in this order by src/http/server.ts. */
export const routeModules: ((ctx: HttpContext) => FastifyPluginAsyncZod)[] = [
  healthRoutes,
  notificationRoutes,
  notificationListRoutes,
  notificationPreviewRoutes,
  transactionalRoutes,
  audienceRoutes,
  audienceCountRoutes,
  audienceFilterRoutes,
  uninstalledRoutes,
  metricsRoutes,
  deviceRoutes,
  userRoutes,
  keyRoutes,
  statsRoutes,
  activityRoutes,
  messageRoutes,
  messageStreamRoutes,
  webPushRoutes,
  webPushScriptRoutes,
  liveActivityRoutes,
  appSettingsRoutes,
  auditRoutes,
  journeyRoutes,
  webhookRoutes,
  templateRoutes,
];
