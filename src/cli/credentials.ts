import { readFile } from 'node:fs/promises';
import { AppsRepository } from '../db/repositories/apps.js';
import { NotFoundError, ValidationError } from '../domain/errors.js';
import { parseApnsCredentials, parseFcmServiceAccount } from '../gateways/credentials.js';
import type { Command } from './index.js';

/**
 * app set-apns / app set-fcm: gateway credentials per app, checked when set (a bad key is refused now,
 * not at send time). The answer names what was stored, never the key material.
 */
export const credentialCommands: Record<string, Command> = {
  'app set-apns': async (a, rt) => {
    const keyPem = await readRequiredFile(a['key-file'], 'key-file');
    const credentials = parseApnsCredentials({ keyPem, keyId: a['key-id'], teamId: a['team-id'], ...(a.topic ? { topic: a.topic } : {}) });
    await store(rt.handle.db, a.app, 'apns', { ...credentials });
    return { app: a.app, apns: { key_id: credentials.keyId, team_id: credentials.teamId, topic: credentials.topic ?? null } };
  },
  'app set-fcm': async (a, rt) => {
    const text = await readRequiredFile(a['service-account'], 'service-account');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ValidationError('service-account: file is not valid JSON');
    }
    const account = parseFcmServiceAccount(json);
    await store(rt.handle.db, a.app, 'fcm', { ...account });
    return { app: a.app, fcm: { project_id: account.project_id, client_email: account.client_email } };
  },
};

async function readRequiredFile(path: string | undefined, option: string): Promise<string> {
  if (!path) throw new ValidationError(`--${option} is required`);
  try {
    return await readFile(path, 'utf8');
  } catch {
    throw new ValidationError(`--${option}: cannot read ${path}`);
  }
}

async function store(
  db: ConstructorParameters<typeof AppsRepository>[0],
  appId: string | undefined,
  platform: 'apns' | 'fcm',
  credentials: Record<string, unknown>,
) {
  if (!appId) throw new ValidationError('--app is required');
  const apps = new AppsRepository(db);
  const found = await apps.findById(appId).catch(() => undefined);
  if (!found) throw new NotFoundError('app');
  await apps.setCredentials(appId, platform, credentials);
}
