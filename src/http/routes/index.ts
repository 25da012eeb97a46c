import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpContext } from '../context.js';
import { audienceCountRoutes } from './audience-count.js';
import { audienceFilterRoutes } from './audience-filters.js';
import { deviceRoutes } from './devices.js';
import { keyRoutes } from './key.js';
import { notificationListRoutes } from './notification-list.js';
import { notificationPreviewRoutes } from './notification-preview.js';
import { statsRoutes } from './stats.js';
import { userRoutes } from './users.js';

/** Route modules beyond the core (devices, users, the console's lists and stats); each takes the app context. */
export const extraRoutes: ((ctx: HttpContext) => FastifyPluginAsyncZod)[] = [
  deviceRoutes,
  userRoutes,
  keyRoutes,
  notificationListRoutes,
  notificationPreviewRoutes,
  audienceCountRoutes,
  audienceFilterRoutes,
  statsRoutes,
];
