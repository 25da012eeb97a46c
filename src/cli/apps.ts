import { operatorServices } from '../app/runtime.js';
import { type Command, given, oneOf, operator, secretOption, secretOptions, UsageError, uuid } from './command.js';

/** migrate, app create / list, key create / list / revoke: an app, its keys, and the schema they live in. */
export const appCommands: Record<string, Command> = {
  // opening the database applies the pending migrations; nothing is left to do
  migrate: { summary: 'Applies pending migrations (the server also does this at start-up).', run: async () => ({ migrated: true }) },
  'app create': {
    summary: 'Creates an app with a read, a write and an sdk key (shown once).',
    options: {
      'bundle-id': { value: 'ID', help: "the app's bundle id (iOS) or package name (Android)", required: true },
      name: { value: 'NAME', help: 'a display name; the bundle id when not given' },
    },
    run: async (a, rt) => operatorServices(rt).apps.createApp(given(a, 'bundle-id'), a.name, operator()),
  },
  'app list': {
    summary: 'Lists apps (never keys).',
    run: async (_a, rt) => ({ apps: await operatorServices(rt).apps.listApps() }),
  },
  'key create': {
    summary: 'Issues another key for an app.',
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      role: { value: 'ROLE', help: 'read, write or sdk', required: true, check: oneOf('read', 'write', 'sdk') },
    },
    run: async (a, rt) => operatorServices(rt).apps.createKey(given(a, 'app'), given(a, 'role'), operator()),
  },
  'key list': {
    summary: "Lists an app's keys: id, role, first characters, when created, last used (to 5 minutes) and revoked; never a key.",
    options: { app: { value: 'ID', help: "the app's id", required: true, check: uuid } },
    run: async (a, rt) => ({
      app_id: a.app,
      keys: (await operatorServices(rt).apps.listKeys(given(a, 'app'))).map((k) => ({
        id: k.id,
        role: k.role,
        starts_with: k.key_hint,
        created_at: k.created_at.toISOString(),
        last_used_at: k.last_used_at?.toISOString() ?? null,
        revoked_at: k.revoked_at?.toISOString() ?? null,
      })),
    }),
  },
  'key revoke': {
    summary: 'Revokes a key, named by its id (`key list`) or by its value; it answers 401 from then on.',
    options: {
      id: { value: 'ID', help: "the key's id, as key list shows it", check: uuid },
      ...secretOptions('key', 'KEY', 'the key'),
    },
    run: async (a, rt) => {
      const named = [a.id, a.key, a['key-file']].filter((v) => v !== undefined).length;
      if (named !== 1) throw new UsageError('give one of --id, --key-file, --key');
      const key = a.id === undefined ? await secretOption(a, 'key', true) : { id: a.id };
      await operatorServices(rt).apps.revokeKey(key, operator());
      return { revoked: true };
    },
  },
};
