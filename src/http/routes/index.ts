import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../context.js';

/** Route modules beyond the core (devices, users, events, metrics); each takes the app context. */
export const extraRoutes: ((ctx: AppContext) => FastifyPluginAsyncZod)[] = [];
