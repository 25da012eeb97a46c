import { ValidationError } from '../domain/errors.js';
import { AppService } from '../services/apps.js';
import type { Command } from './index.js';

/**
 * app set-web-push --app ID --subject mailto:… [--public-key K --private-key P]: the app's VAPID key pair, generated
 * (P-256, node:crypto) unless a pair is given (both halves base64url, as the web-push package prints them). The
 * answer names the subject and the public key, never the private key.
 */
export const webPushCommands: Record<string, Command> = {
  'app set-web-push': async (a, rt) => {
    if (!a.app) throw new ValidationError('--app is required');
    if (!a.subject) throw new ValidationError('--subject is required (mailto:you@example.com or an https: URL)');
    const set = await new AppService(rt.handle.db).setWebPush(a.app, {
      subject: a.subject,
      publicKey: a['public-key'],
      privateKey: a['private-key'],
    });
    return { app: a.app, web_push: set };
  },
};
