import { readFile } from 'node:fs/promises';
import { ValidationError } from '../domain/errors.js';
import { AppService } from '../services/apps.js';
import type { Command } from './index.js';

/**
 * app set-apns / app set-fcm: gateway credentials per app, checked when set (a bad key is refused now,
 * not at send time). The answer names what was stored, never the key material.
 */
export const credentialCommands: Record<string, Command> = {
  'app set-apns': async (a, rt) => {
    const keyPem = await readRequiredFile(a['key-file'], 'key-file');
    const raw = { keyPem, keyId: a['key-id'], teamId: a['team-id'], ...(a.topic ? { topic: a.topic } : {}) };
    const credentials = await new AppService(rt.handle.db).setPushCredentials(requiredApp(a), 'apns', raw);
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
    const account = await new AppService(rt.handle.db).setPushCredentials(requiredApp(a), 'fcm', json);
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

function requiredApp(args: Record<string, string | undefined>): string {
  if (!args.app) throw new ValidationError('--app is required');
  return args.app;
}
