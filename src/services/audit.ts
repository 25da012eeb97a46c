import type { Db } from '../db/database.js';
import type { AuditRepository, AuditRowAt, AuditWindow } from '../db/repositories/audit.js';
import { decodeTimeCursor, encodeCursor, FIRST_ID, isUuid } from '../domain/cursor.js';
import { NotFoundError } from '../domain/errors.js';
import type { ServiceDeps } from './deps.js';

const LISTING = 'audit';

/** Reads an app's audit log: `GET /v6/audit` and `pushd audit`. */
export class AuditService {
  private readonly db: Db;
  /** a replica while it keeps up: the log is a list, which need not see the caller's own writes */
  private readonly readDb: Db;
  private readonly audit: AuditRepository;

  constructor(deps: Pick<ServiceDeps, 'db' | 'readDb' | 'repos'>) {
    this.db = deps.db;
    this.readDb = deps.readDb;
    this.audit = deps.repos.audit;
  }

  /**
   * The app's rows in the window, newest first, in keyset pages. Every page has a cursor; an empty one keeps the
   * position it was asked for. A cursor that does not decode is a 404, as an unknown one.
   */
  async page(
    appId: string,
    q: AuditWindow & { cursor?: string | undefined; per: number },
  ): Promise<{ entries: AuditRowAt[]; cursor: string }> {
    const after = q.cursor ? decodeTimeCursor(q.cursor, LISTING) : null;
    if (q.cursor && !after) throw new NotFoundError('cursor');
    const window = { since: q.since, until: q.until, action: q.action, notificationId: q.notificationId };
    const entries = await this.audit.page(this.readDb, appId, { ...window, after, limit: q.per });
    if (q.notificationId) entries.push(...(await this.creationOnRow(appId, { ...window, notificationId: q.notificationId }, after)));
    entries.sort(newestFirst).splice(q.per);
    const last = entries.at(-1);
    const position = last ? { at: last.position_at, id: last.id } : (after ?? { at: '9999-12-31T23:59:59.999999Z', id: LAST_ID });
    return { entries, cursor: encodeCursor(LISTING, [position.at, position.id]) };
  }

  /** A notification's creation kept on its row instead of the log, as a row of the page when it falls in the window. */
  private async creationOnRow(
    appId: string,
    q: AuditWindow & { notificationId: string },
    after: { at: string; id: string } | null,
  ): Promise<AuditRowAt[]> {
    if (!isUuid(q.notificationId) || (q.action && q.action !== 'notification.created')) return [];
    // by id: the primary, as a read by id is
    const row = await this.audit.creationOnRow(this.db, appId, q.notificationId);
    const inWindow =
      row &&
      (!q.since || row.at >= q.since) &&
      (!q.until || row.at < q.until) &&
      (!after || newestFirst(row, { position_at: after.at, id: after.id }) > 0);
    return inWindow ? [row] : [];
  }

  /** Every row of the app in the window, newest first (the command line's one document). */
  async all(appId: string, q: AuditWindow): Promise<AuditRowAt[]> {
    const rows: AuditRowAt[] = [];
    for (let cursor: string | undefined; ;) {
      const page = await this.page(appId, { ...q, cursor, per: 1000 });
      rows.push(...page.entries);
      if (page.entries.length < 1000) return rows;
      cursor = page.cursor;
    }
  }
}

/** The listing's order: newest first by the time to the microsecond (its text sorts as it does), then by id. */
function newestFirst(a: Pick<AuditRowAt, 'position_at' | 'id'>, b: Pick<AuditRowAt, 'position_at' | 'id'>): number {
  if (a.position_at !== b.position_at) return a.position_at < b.position_at ? 1 : -1;
  return a.id === b.id ? 0 : a.id < b.id ? 1 : -1;
}

/** The position after every id, newest first: where the listing starts. */
const LAST_ID = FIRST_ID.replaceAll('0', 'f');
