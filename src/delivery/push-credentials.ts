import type { Db } from '../db/database.js';
import type { AppChanges } from '../db/app-changes.js';
import type { AppsRepository } from '../db/repositories/apps.js';
import type { Sealed, SecretColumn, SecretsKeyring } from '../domain/secrets.js';
import type { AppPushCredentials } from '../gateways/pool.js';
import type { CredentialsLookup } from '../gateways/runtime/create-provider.js';
import { GroupRunner } from '../platform/group-runner.js';

export interface PushCredentialsDeps {
  db: Db;
  apps: AppsRepository;
  /** opens the sealed credentials (`SECRET_COLUMNS`) */
  secrets: SecretsKeyring;
  /** the changes to apps this process follows: a read is kept until its app changes */
  changes: AppChanges;
}

/**
 * The apps' push credentials the gateways send with, read for every batch: opened here and kept while the changes to
 * them are followed, so a change applies to the next batch, and each batch of an app gets the same object until
 * then (what the gateways key their connections and threads by). The reads of concurrent batches are one
 * statement: those asked while one runs go in the next, so each still sees what was stored when it asked.
 */
export class PushCredentials {
  private readonly reads: GroupRunner<string, AppPushCredentials | null>;
  private readonly kept;

  constructor(private readonly deps: PushCredentialsDeps) {
    this.reads = new GroupRunner((ids) => this.readGroup(ids), { maxInFlight: 1, maxGroup: 100 });
    this.kept = deps.changes.cache<string, AppPushCredentials>();
  }

  /** What the gateways ask for each batch: the app's credentials, null for an unknown app. */
  readonly lookup: CredentialsLookup = async (appId) =>
    (await this.kept.get(appId, async () => (await this.reads.submit(appId)) ?? undefined)) ?? null;

  private async readGroup(ids: string[]): Promise<PromiseSettledResult<AppPushCredentials | null>[]> {
    const found = await this.deps.apps.pushCredentialsOf(this.deps.db, [...new Set(ids)]);
    const open = (sealed: Sealed | null, column: SecretColumn) => sealed && this.deps.secrets.openJson(sealed, column);
    return ids.map((id) => {
      const app = found.get(id);
      try {
        const value = app
          ? {
              id: app.id,
              bundleId: app.bundle_id,
              apnsCredentials: open(app.apns_credentials, 'apns_credentials'),
              fcmCredentials: open(app.fcm_credentials, 'fcm_credentials'),
              webPushCredentials: open(app.web_push_credentials, 'web_push_credentials'),
              hmsCredentials: open(app.hms_credentials, 'hms_credentials'),
            }
          : null;
        return { status: 'fulfilled', value };
      } catch (err) {
        // a value this process cannot open (sealed under a key it was not given): no send, never one with garbage
        return { status: 'rejected', reason: err };
      }
    });
  }
}
