import type { Api } from './api.js';
import { h, replace, when } from './dom.js';

/** `GET /v6/audit`: one change of consequence to the app, who made it and from where. */
export interface AuditEntry {
  id: string;
  at: string;
  action: string;
  actor: { key_id: string | null; role: 'read' | 'write' | 'sdk' | 'cli' | 'system' };
  client_address: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
}

const detailText = (details: Record<string, unknown>): string =>
  Object.entries(details)
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)}`)
    .join('; ');

/**
 * The app's audit log, its latest changes first (a write key reads it); `refresh` reads it again, after a change the
 * page made.
 */
export function auditPanel(api: Api): { panel: HTMLElement; refresh: () => Promise<void> } {
  const body = h('tbody', { id: 'audit-rows' });
  const error = h('p', { class: 'error', id: 'audit-error', role: 'alert' });
  const refresh = async () => {
    try {
      const { entries } = await api.get<{ entries: AuditEntry[] }>('/v6/audit?per=50');
      error.textContent = '';
      replace(
        body,
        ...entries.map((e) =>
          h(
            'tr',
            { 'data-action': e.action },
            h('td', {}, when(e.at)),
            h('td', {}, e.action),
            h(
              'td',
              {},
              e.actor.role === 'cli'
                ? 'command line'
                : e.actor.role === 'system'
                  ? 'pushd'
                  : `${e.actor.role} key ${e.actor.key_id?.slice(0, 8) ?? ''}`,
            ),
            h('td', {}, e.client_address ?? '—'),
            h('td', { class: 'details' }, detailText(e.details)),
          ),
        ),
        entries.length === 0 && h('tr', {}, h('td', { colspan: 5 }, 'Nothing recorded yet.')),
      );
    } catch (err) {
      error.textContent = err instanceof Error ? err.message : String(err);
    }
  };
  const panel = h(
    'section',
    { class: 'panel', id: 'audit' },
    h('h2', {}, 'Audit log'),
    h('p', { class: 'muted' }, 'The latest changes to this app: keys, credentials, settings and notifications, by whom and from where.'),
    error,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h('tr', {}, h('th', {}, 'when'), h('th', {}, 'change'), h('th', {}, 'by'), h('th', {}, 'from'), h('th', {}, 'details')),
      ),
      body,
    ),
  );
  return { panel, refresh };
}
