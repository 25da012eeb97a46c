import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { useHarness, type Harness } from '../helpers/harness.js';
import { runCli, type CliResult } from './run-cli.js';

/** HMS credentials: set with the CLI (another process), stored beside the app's others, announced to every process. */

const h = useHarness();
let cli: (...args: string[]) => Promise<CliResult>;
let app: Awaited<ReturnType<Harness['createApp']>>;

beforeAll(async () => {
  cli = (...args) => runCli(args, { DATABASE_URL: h.databaseUrl });
  app = await h.createApp();
});

/** The HMS credentials as stored, opened with the server's keys. */
const stored = async () => {
  const sealed = (await h.db.db.selectFrom('apps').select('hms_credentials').where('id', '=', app.app.id).executeTakeFirstOrThrow())
    .hms_credentials;
  return sealed && h.secrets.openJson(sealed, 'hms_credentials');
};

describe('pushd app set-hms', () => {
  it('stores the app id and client secret, prints the app id only, and announces the change to the other processes', async () => {
    const listener = new pg.Client({ connectionString: h.databaseUrl });
    await listener.connect();
    const announced: string[] = [];
    listener.on('notification', (n) => announced.push(n.payload ?? ''));
    await listener.query('LISTEN pushd_app_changes');
    try {
      const r = await cli('app', 'set-hms', '--app', app.app.id, '--hms-app-id', '104857600', '--client-secret', 'a1b2c3d4e5f6a7b8');
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual({ app: app.app.id, hms: { app_id: '104857600' } });
      expect(r.stdout).not.toContain('a1b2c3d4e5f6a7b8');
      expect(await stored()).toEqual({ app_id: '104857600', client_secret: 'a1b2c3d4e5f6a7b8' });
      for (let i = 0; i < 100 && announced.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(announced).toContain('apps');
    } finally {
      await listener.end();
    }
  });

  it("refuses an app id that is not AppGallery's, a short secret, or a missing option (exit 2, nothing changed)", async () => {
    const before = await stored();
    const badId = await cli('app', 'set-hms', '--app', app.app.id, '--hms-app-id', '../x', '--client-secret', 'a1b2c3d4e5f6a7b8');
    expect(badId.code).toBe(2);
    expect(badId.stderr).toMatch(/hms-app-id: must be the numeric AppGallery app id/);
    const badSecret = await cli('app', 'set-hms', '--app', app.app.id, '--hms-app-id', '104857600', '--client-secret', 'short');
    expect(badSecret.code).toBe(2);
    expect(badSecret.stderr).toMatch(/client-secret: /);
    const missing = await cli('app', 'set-hms', '--app', app.app.id, '--hms-app-id', '104857600');
    expect(missing.code).toBe(2);
    expect(await stored()).toEqual(before);
  });
});
