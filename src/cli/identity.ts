import { operatorServices } from '../app/runtime.js';
import { type Command, given, operator, UsageError, uuid } from './command.js';

const ACTIONS = ['on', 'off', 'rotate'] as const;

/**
 * app set-identity-verification --app ID (--on | --off | --rotate): whether the sdk key must prove the user ids and
 * e-mail addresses it binds devices to. `--on` and `--rotate` print the app's identity secret (the HMAC key the
 * backend makes the hashes with); `--off` keeps it stored without printing it.
 */
export const identityCommands: Record<string, Command> = {
  'app set-identity-verification': {
    summary: "Turns identity verification of the sdk key's user ids and e-mail addresses on or off, or rotates its secret.",
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      on: { help: 'verify (makes a secret if the app has none, and prints it)' },
      off: { help: 'stop verifying (the secret stays stored, not printed)' },
      rotate: { help: 'print a new secret (verification stays on or off as it was)' },
    },
    run: async (a, rt) => {
      const chosen = ACTIONS.filter((action) => a[action] !== undefined);
      if (chosen.length !== 1) throw new UsageError('give exactly one of --on, --off, --rotate');
      return operatorServices(rt).apps.setIdentityVerification(given(a, 'app'), chosen[0]!, operator());
    },
  },
};
