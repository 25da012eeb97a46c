import pg from 'pg';
import type { Logger } from '../platform/logger.js';

/** The channel the triggers of migrations 015, 016 and 019 announce each committed change to API keys and apps on. */
export const APP_CHANGES_CHANNEL = 'pushd_app_changes';

/** The longest a value is served from a cache whatever is heard: a backstop for a connection that died unnoticed. */
const MAX_AGE_MS = 60_000;
/** Values one cache holds at most (it is emptied when full): the keys and apps in use are few. */
const MAX_ENTRIES = 10_000;
const RECONNECT_MS = 1_000;
/**
 * How often its connection is asked to answer: a connection that a NAT or a firewall dropped without a word delivers
 * no announcement and no error, so only a question shows it is gone. An answer may take half of it (a connection
 * attempt a whole one): a silent connection is given up within one and a half heartbeats.
 */
const HEARTBEAT_MS = 10_000;
/** How long closing waits for the server to see the connection end: one that died unnoticed never answers. */
const CLOSE_WAIT_MS = 1_000;
/**
 * How its connection shows in pg_stat_activity: the name the URL gives its process's connections (the embedded
 * PostgreSQL's name pushd-<pid>), else "pushd", then "app changes". A name in the URL would win over the client's.
 */
export function appChangesApplicationName(url: string): string {
  return `${new URL(url).searchParams.get('application_name') ?? 'pushd'} app changes`;
}

/** Values read from the database, kept while the changes to them are followed (`AppChanges`). */
export interface FollowedCache<K, V> {
  /** The value kept for `key`, else what `load` reads: kept unless undefined or a change was heard meanwhile. */
  get(key: K, load: (key: K) => Promise<V | undefined>): Promise<V | undefined>;
  /** `get` for several keys: those not kept are read with one `load` (which answers the ones it found). */
  getMany(keys: K[], load: (missing: K[]) => Promise<Map<K, V>>): Promise<Map<K, V>>;
}

/**
 * Follows the committed changes to API keys and apps (credentials, limits), for caches of what every request or batch
 * reads and almost never changes. A connection of its own LISTENs on the channel the tables' triggers announce on
 * (migrations 015, 016 and 019); each announcement empties every cache made here, and so does losing that connection: a value is
 * served from a cache only while a change to it would be heard. Until the connection listens, and while it
 * reconnects, every read goes to the database.
 */
export class AppChanges {
  private client: pg.Client | null = null;
  private listening = false;
  private closed = false;
  /** whether the loss being reconnected from was logged: once per loss, not per failed attempt */
  private lossLogged = false;
  private reconnect: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  /** bumped each time the caches are emptied: a read that began before does not keep what it read */
  private epoch = 0;
  private readonly caches: Map<unknown, { value: unknown; at: number }>[] = [];

  constructor(
    private readonly url: string,
    private readonly log: Logger,
    private readonly heartbeatMs = HEARTBEAT_MS,
  ) {}

  /** Connects and listens; a failure is logged and retried in the background, reading from the database meanwhile. */
  start(): Promise<void> {
    return this.connect();
  }

  /** Whether changes are followed now (values are cached). */
  get following(): boolean {
    return this.listening;
  }

  /** Empties the caches: at once, after this process committed a change (its announcement comes a moment later). */
  changed(): void {
    this.epoch += 1;
    for (const entries of this.caches) entries.clear();
  }

  cache<K, V>(): FollowedCache<K, V> {
    const entries = new Map<K, { value: V; at: number }>();
    this.caches.push(entries as Map<unknown, { value: unknown; at: number }>);
    const kept = (key: K): V | undefined => {
      const entry = entries.get(key);
      return entry && this.listening && Date.now() - entry.at < MAX_AGE_MS ? entry.value : undefined;
    };
    /** keeps what was read since `epoch`, unless a change was heard meanwhile */
    const keep = (epoch: number, key: K, value: V) => {
      if (!this.listening || this.epoch !== epoch) return;
      if (entries.size >= MAX_ENTRIES) entries.clear();
      entries.set(key, { value, at: Date.now() });
    };
    return {
      get: async (key, load) => {
        const found = kept(key);
        if (found !== undefined) return found;
        const epoch = this.epoch;
        const value = await load(key);
        if (value !== undefined) keep(epoch, key, value);
        return value;
      },
      getMany: async (keys, load) => {
        const found = new Map<K, V>();
        const missing: K[] = [];
        for (const key of new Set(keys)) {
          const value = kept(key);
          if (value === undefined) missing.push(key);
          else found.set(key, value);
        }
        if (!missing.length) return found;
        const epoch = this.epoch;
        for (const [key, value] of await load(missing)) {
          keep(epoch, key, value);
          found.set(key, value);
        }
        return found;
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnect);
    clearInterval(this.heartbeat);
    const client = this.client;
    this.client = null;
    this.listening = false;
    this.changed();
    if (!client) return;
    const waited = new Promise((resolve) => setTimeout(resolve, CLOSE_WAIT_MS).unref());
    await Promise.race([client.end().catch(() => undefined), waited]);
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({
      connectionString: withApplicationName(this.url, appChangesApplicationName(this.url)),
      keepAlive: true,
      keepAliveInitialDelayMillis: this.heartbeatMs,
      connectionTimeoutMillis: this.heartbeatMs,
      query_timeout: this.heartbeatMs / 2,
    });
    client.on('notification', () => this.changed());
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${APP_CHANGES_CHANNEL}`);
      if (this.client !== client) return; // lost or closed meanwhile
      // what was read before now was read unheard
      this.changed();
      this.listening = true;
      this.heartbeat = setInterval(() => void this.probe(client), this.heartbeatMs);
      this.heartbeat.unref();
      if (this.lossLogged) this.log.info('following app changes again');
      this.lossLogged = false;
    } catch (err) {
      this.lost(client, err);
    }
  }

  /** Gives the connection up unless it answers within half a heartbeat (its `query_timeout`). */
  private async probe(client: pg.Client): Promise<void> {
    try {
      await client.query('select 1');
    } catch (err) {
      this.lost(client, err);
    }
  }

  private lost(client: pg.Client, err?: unknown): void {
    if (this.client !== client) return;
    clearInterval(this.heartbeat);
    this.client = null;
    this.listening = false;
    this.changed();
    client.end().catch(() => undefined);
    if (this.closed) return;
    if (!this.lossLogged)
      this.log.warn({ err }, 'not following app changes: keys, credentials and limits are read from the database until reconnected');
    this.lossLogged = true;
    this.reconnect = setTimeout(() => void this.connect(), RECONNECT_MS);
    this.reconnect.unref();
  }
}

function withApplicationName(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set('application_name', name);
  return u.toString();
}
