import { sql, type Transaction } from 'kysely';
import type { Db } from '../database.js';
import { jsonbArray } from '../pg-arrays.js';
import type { Actor, AuditAction, AuditDetails, AuditEntry } from '../../domain/audit.js';
import type { AuditLogRow, Database } from '../schema.js';

/** Which of an app's rows a page reads: at or after `since`, before `until`, of one action, of one notification. */
export interface AuditWindow {
  since?: Date | undefined;
  until?: Date | undefined;
  action?: AuditAction | undefined;
  notificationId?: string | undefined;
}

/** A row with its keyset position: its time to the microsecond, which a Date would cut to milliseconds. */
export type AuditRowAt = AuditLogRow & { position_at: string };

/** The audit log (migration 047): written beside each change it records, read newest first. */
export class AuditRepository {
  /** Records the entries; in the caller's transaction, so they commit or roll back with the change. */
  async record(db: Db, entries: AuditEntry[]): Promise<void> {
    if (!entries.length) return;
    // one array per column, so the statement's text is the same however many entries there are
    const column = <T>(f: (e: AuditEntry) => T) => entries.map(f);
    await sql`
      insert into audit_log (app_id, action, actor_key_id, actor_role, client_address, request_id, details)
      select * from unnest(
        ${column((e) => e.appId)}::uuid[], ${column((e) => e.action)}::text[], ${column((e) => e.actor.keyId)}::uuid[],
        ${column((e) => e.actor.role)}::text[], ${column((e) => e.actor.address)}::text[], ${column((e) => e.actor.requestId)}::text[],
        ${jsonbArray(column((e) => e.details))}::jsonb[])`.execute(db);
  }

  /**
   * Records one change in the transaction that makes it, so a change rolled back leaves no row and one committed
   * always has its row: `await audit.recordChange(trx, actor, appId, 'key.revoked', { key_id, role })`.
   */
  recordChange<A extends AuditAction>(
    trx: Transaction<Database>,
    actor: Actor,
    appId: string,
    action: A,
    details: AuditDetails[A],
  ): Promise<void> {
    return this.record(trx, [{ appId, action, actor, details } as AuditEntry]);
  }

  /** The app's rows in the window, newest first, after `after` (a position a page ended on). */
  async page(db: Db, appId: string, q: AuditWindow & { after: { at: string; id: string } | null; limit: number }): Promise<AuditRowAt[]> {
    return (
      db
        .selectFrom('audit_log')
        .selectAll()
        .select(sql<string>`to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`.as('position_at'))
        .where('app_id', '=', appId)
        .$if(!!q.since, (qb) => qb.where('at', '>=', q.since!))
        .$if(!!q.until, (qb) => qb.where('at', '<', q.until!))
        .$if(!!q.action, (qb) => qb.where('action', '=', q.action!))
        // both conditions, so the partial index of migration 057 answers it
        .$if(!!q.notificationId, (qb) =>
          qb.where(sql<boolean>`details ? 'notification_id' and details ->> 'notification_id' = ${q.notificationId!}`),
        )
        .$if(!!q.after, (qb) => qb.where(sql<boolean>`(at, id) < (${q.after!.at}::timestamptz, ${q.after!.id}::uuid)`))
        .orderBy('at', 'desc')
        .orderBy('id', 'desc')
        .limit(q.limit)
        .execute()
    );
  }

  /**
   * A notification's creation as the audit log would record it, read off its own row (migration 057), which a
   * notification to a few devices keeps instead of an audit row: undefined when it has no actor (nobody's request
   * made it) or its creation has a row in the log already.
   */
  async creationOnRow(db: Db, appId: string, notificationId: string): Promise<AuditRowAt | undefined> {
    const { rows } = await sql<AuditRowAt>`
      select n.id, n.created_at as at, n.app_id, 'notification.created' as action, n.actor_key_id, n.actor_role, n.client_address,
        n.request_id, to_char(n.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_at,
        jsonb_strip_nulls(jsonb_build_object(
          'notification_id', n.id,
          'audience_size', case when n.fanout_done then n.devices_targeted end,
          -- a transactional send stores its whole request, its notification's fields in it
          'transactional', case when n.request ? 'notification' then true end
        )) || case when n.fanout_done then '{}' else '{"audience_size": null}' end::jsonb as details
      from notifications n
      where n.id = ${notificationId}::uuid and n.app_id = ${appId}::uuid and n.actor_role is not null
        and not exists (
          select from audit_log a
          where a.details ? 'notification_id' and a.details ->> 'notification_id' = ${notificationId}
            and a.action = 'notification.created'
        )`.execute(db);
    return rows[0];
  }
}
