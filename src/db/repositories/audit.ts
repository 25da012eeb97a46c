import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../database.js';
import { jsonbArray } from '../pg-arrays.js';
import type { AuditAction, AuditEntry } from '../../domain/audit.js';
import type { AuditLogRow } from '../schema.js';

/** Which of an app's rows a page reads: at or after `since`, before `until`, of one action. */
export interface AuditWindow {
  since?: Date | undefined;
  until?: Date | undefined;
  action?: AuditAction | undefined;
}

/** A row with its keyset position: its time to the microsecond, which a Date would cut to milliseconds. */
export type AuditRowAt = AuditLogRow & { position_at: string };

/** The audit log (migration 047): written beside each change it records, read newest first. */
export class AuditRepository {
  /** Records the entries; in the caller's transaction, so they commit or roll back with the change. */
  async record(db: Db, entries: AuditEntry[]): Promise<void> {
    if (entries.length) await this.insertStatement(entries).execute(db);
  }

  /**
   * The statement of `record`, to run inside another (a group's insert of notifications, as a CTE). One array per
   * column, so its text is the same however many entries there are.
   */
  insertStatement(entries: AuditEntry[]): RawBuilder<unknown> {
    const column = <T>(f: (e: AuditEntry) => T) => entries.map(f);
    return sql`
      insert into audit_log (app_id, action, actor_key_id, actor_role, client_address, request_id, details)
      select * from unnest(
        ${column((e) => e.appId)}::uuid[], ${column((e) => e.action)}::text[], ${column((e) => e.actor.keyId)}::uuid[],
        ${column((e) => e.actor.role)}::text[], ${column((e) => e.actor.address)}::text[], ${column((e) => e.actor.requestId)}::text[],
        ${jsonbArray(column((e) => e.details))}::jsonb[])`;
  }

  /** The app's rows in the window, newest first, after `after` (a position a page ended on). */
  async page(db: Db, appId: string, q: AuditWindow & { after: { at: string; id: string } | null; limit: number }): Promise<AuditRowAt[]> {
    return db
      .selectFrom('audit_log')
      .selectAll()
      .select(sql<string>`to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`.as('position_at'))
      .where('app_id', '=', appId)
      .$if(!!q.since, (qb) => qb.where('at', '>=', q.since!))
      .$if(!!q.until, (qb) => qb.where('at', '<', q.until!))
      .$if(!!q.action, (qb) => qb.where('action', '=', q.action!))
      .$if(!!q.after, (qb) => qb.where(sql<boolean>`(at, id) < (${q.after!.at}::timestamptz, ${q.after!.id}::uuid)`))
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(q.limit)
      .execute();
  }
}
