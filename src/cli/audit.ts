import { auditRecord } from '../domain/audit.js';
import { parseIsoDate } from '../domain/date-math.js';
import { AuditService } from '../services/audit.js';
import { given, uuid, type Command } from './command.js';

/** audit --app ID [--since ISO]: the app's audit log, newest first, as one document. */
export const auditCommands: Record<string, Command> = {
  audit: {
    summary: "Prints an app's audit log, newest first: who changed what, when and from where.",
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      since: {
        value: 'ISO',
        help: 'only the changes at or after this instant, e.g. 2026-11-01T00:00:00Z',
        check: (v) => (parseIsoDate(v) ? undefined : 'must be an ISO 8601 date'),
      },
    },
    run: async (a, rt) => {
      const since = a.since === undefined ? undefined : parseIsoDate(a.since)!;
      const rows = await new AuditService(rt.handle.db).all(given(a, 'app'), { since });
      return { app_id: a.app, entries: rows.map(auditRecord) };
    },
  },
};
