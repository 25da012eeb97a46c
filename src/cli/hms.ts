import { operatorServices } from '../app/runtime.js';
import { type Command, given, operator, secretOption, secretOptions, uuid } from './command.js';

/**
 * app set-hms --app ID --hms-app-id N --client-secret-file F: the app's Huawei Push Kit credentials, the app id and app
 * secret of AppGallery Connect (the OAuth client id and secret). The answer names the HMS app id, never the secret.
 */
export const hmsCommands: Record<string, Command> = {
  'app set-hms': {
    summary: "Sets an app's Huawei Push Kit credentials (AppGallery Connect app id and client secret).",
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      'hms-app-id': { value: 'N', help: 'the AppGallery Connect app id (the OAuth client id)', required: true },
      ...secretOptions('client-secret', 'S', 'its app secret (the OAuth client secret)', true),
    },
    run: async (a, rt) => {
      const set = await operatorServices(rt).apps.setHms(
        given(a, 'app'),
        {
          hmsAppId: given(a, 'hms-app-id'),
          clientSecret: await secretOption(a, 'client-secret', true),
        },
        operator(),
      );
      return { app: a.app, hms: set };
    },
  },
};
