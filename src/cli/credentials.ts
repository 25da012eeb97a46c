import { operatorServices } from '../app/runtime.js';
import { ValidationError } from '../domain/errors.js';
import { type Command, given, operator, readOptionFile, uuid } from './command.js';

/**
 * app set-apns / app set-fcm: gateway credentials per app, checked when set (a bad key is refused now,
 * not at send time). The answer names what was stored, never the key material.
 */
export const credentialCommands: Record<string, Command> = {
  'app set-apns': {
    summary: 'Stores APNs token credentials (a .p8 key) for an app.',
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      'key-file': { value: 'FILE', help: 'the AuthKey_XXXXXXXXXX.p8 file from Apple', required: true },
      'key-id': { value: 'K', help: "the key's 10-character id", required: true },
      'team-id': { value: 'T', help: 'your 10-character Apple team id', required: true },
      topic: { value: 'X', help: 'the apns-topic to send with; the bundle id when not given' },
    },
    run: async (a, rt) => {
      const keyPem = await readOptionFile(a, 'key-file');
      const raw = { keyPem, keyId: a['key-id'], teamId: a['team-id'], ...(a.topic ? { topic: a.topic } : {}) };
      const credentials = await operatorServices(rt).apps.setPushCredentials(given(a, 'app'), 'apns', raw, operator());
      return { app: a.app, apns: { key_id: credentials.keyId, team_id: credentials.teamId, topic: credentials.topic ?? null } };
    },
  },
  'app set-fcm': {
    summary: 'Stores an FCM service account for an app.',
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      'service-account': { value: 'FILE', help: "the Firebase project's service account JSON file", required: true },
    },
    run: async (a, rt) => {
      const text = await readOptionFile(a, 'service-account');
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new ValidationError('service-account: file is not valid JSON');
      }
      const account = await operatorServices(rt).apps.setPushCredentials(given(a, 'app'), 'fcm', json, operator());
      return { app: a.app, fcm: { project_id: account.project_id, client_email: account.client_email } };
    },
  },
};
