import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../app/context.js';
import { deviceRoutes } from './devices.js';
import { userRoutes } from './users.js';

/** Route modules beyond the core (devices, users, events, metrics); each takes the app context. */
export const extraRoutes: ((ctx: AppContext) => FastifyPluginAsyncZod)[] = [deviceRoutes, userRoutes];
