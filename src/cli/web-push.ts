import { operatorServices } from '../app/runtime.js';
import { type Command, given, operator, secretOption, secretOptions, uuid } from './command.js';

/**
 * app set-web-push --app ID --subject mailto:… [--public-key K --private-key-file F]: the app's VAPID key pair, generated
 * (P-256, node:crypto) unless a pair is given (both halves base64url, as the web-push package prints them). The
 * answer names the subject and the public key, never the private key.
 */
export const webPushCommands: Record<string, Command> = {
  'app set-web-push': {
    summary: "Sets an app's VAPID key pair for Web Push: generated, or the pair given.",
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      subject: { value: 'mailto:…|https:…', help: 'who push services may contact about the pushes', required: true },
      'public-key': { value: 'K', help: 'a public key to use instead of a new pair (base64url, with --private-key-file)' },
      ...secretOptions('private-key', 'P', 'its private key (base64url)'),
    },
    run: async (a, rt) => {
      const set = await operatorServices(rt).apps.setWebPush(
        given(a, 'app'),
        {
          subject: given(a, 'subject'),
          publicKey: a['public-key'],
          privateKey: await secretOption(a, 'private-key'),
        },
        operator(),
      );
      return { app: a.app, web_push: set };
    },
  },
};
