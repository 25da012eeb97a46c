import type { Command } from './index.js';

/** app set-apns / app set-fcm: gateway credentials per app (delivery issue). */
export const credentialCommands: Record<string, Command> = {};
