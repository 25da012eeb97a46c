import { AppService } from '../services/apps.js';
import { given, oneOf, uuid, type Command } from './command.js';

/** migrate, app create / list, key create / revoke: an app, its keys, and the schema they live in. */
export const appCommands: Record<string, Command> = {
  // opening the database applies the pending migrations; nothing is left to do
  migrate: { summary: 'Applies pending migrations (the server also does this at start-up).', run: async () => ({ migrated: true }) },
  'app create': {
    summary: 'Creates an app with a read, a write and an sdk key (shown once).',
    options: {
      'bundle-id': { value: 'ID', help: "the app's bundle id (iOS) or package name (Android)", required: true },
      name: { value: 'NAME', help: 'a display name; the bundle id when not given' },
    },
    run: async (a, rt) => new AppService(rt.handle.db, rt.secrets.keyring).createApp(given(a, 'bundle-id'), a.name),
  },
  'app list': {
    summary: 'Lists apps (never keys).',
    run: async (_a, rt) => ({ apps: await new AppService(rt.handle.db, rt.secrets.keyring).listApps() }),
  },
  'key create': {
    summary: 'Issues another key for an app.',
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      role: { value: 'ROLE', help: 'read, write or sdk', required: true, check: oneOf('read', 'write', 'sdk') },
    },
    run: async (a, rt) => new AppService(rt.handle.db, rt.secrets.keyring).createKey(given(a, 'app'), given(a, 'role')),
  },
  'key revoke': {
    summary: 'Revokes a key; it answers 401 from then on.',
    options: { key: { value: 'KEY', help: 'the key to revoke', required: true } },
    run: async (a, rt) => {
      await new AppService(rt.handle.db, rt.secrets.keyring).revokeKey(given(a, 'key'));
      return { revoked: true };
    },
  },
};
