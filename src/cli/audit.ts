import { operatorServices } from '../app/runtime.js';
import { auditRecord } from '../domain/audit.js';
import { parseIsoDate } from '../domain/date-math.js';
import { given, uuid, type Command } from './command.js';

/** audit --app ID [--since ISO] [--json]: the app's audit log, newest first: a table on a terminal, else one document. */
export const auditCommands: Record<string, Command> = {
  audit: {
    summary: "Prints an app's audit log, newest first: who changed what, when and from where.",
    options: {
      app: { value: 'ID', help: "the app's id", required: true, check: uuid },
      json: { help: 'one JSON document even on a terminal (where a table is printed otherwise; piped, JSON)' },
      since: {
        value: 'ISO',
        help: 'only the changes at or after this instant, e.g. 2026-11-01T00:00:00Z',
        check: (v) => (parseIsoDate(v) ? undefined : 'must be an ISO 8601 date'),
      },
    },
    run: async (a, rt) => {
      const since = a.since === undefined ? undefined : parseIsoDate(a.since)!;
      const rows = await operatorServices(rt).audit.all(given(a, 'app'), { since });
      return { app_id: a.app, entries: rows.map(auditRecord) };
    },
    render: (result) => auditTable((result as { entries: ReturnType<typeof auditRecord>[] }).entries),
  },
};

/** The rows as a person reads them: one line each, in columns, the details as compact JSON. */
function auditTable(entries: ReturnType<typeof auditRecord>[]): string {
  if (entries.length === 0) return 'No changes recorded.\n';
  const rows = [
    ['AT', 'ACTION', 'BY', 'FROM', 'REQUEST', 'DETAILS'],
    ...entries.map((e) => [
      e.at.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
      e.action,
      e.actor.key_id ? `${e.actor.role} key ${e.actor.key_id.slice(0, 8)}` : e.actor.role,
      e.client_address ?? '-',
      e.request_id ?? '-',
      JSON.stringify(e.details),
    ]),
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ')).join('\n') + '\n';
}
