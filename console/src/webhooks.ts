import { fmt, h, replace, when } from './dom.js';
import { errorBox, type Page } from './page.js';

/** `GET /v6/webhooks`: an endpoint as the API shows it (never its secret). */
interface Webhook {
  id: string;
  url: string;
  events: string[];
  description: string;
  enabled: boolean;
  /** why pushd disabled it (a 410, failing for 3 days); null when a key did, or it is enabled */
  disabled_reason: string | null;
  failing_since: string | null;
}

/** `GET /v6/webhooks/:id/attempts`: one request sent to the endpoint. */
interface Attempt {
  at: string;
  events: number;
  status: number | null;
  latency_ms: number;
  error: string | null;
  snippet: string | null;
}

/** Attempts shown an endpoint: the latest. */
const SHOWN = 20;

/** What the endpoint's state says at a glance: disabled (by whom and why), failing since when, or fine. */
function stateOf(w: Webhook): HTMLElement {
  if (!w.enabled)
    return h(
      'p',
      { class: 'error', role: 'status', 'data-field': 'disabled' },
      w.disabled_reason
        ? `pushd disabled this endpoint: ${w.disabled_reason}. ` +
            'No event is recorded for it until it is enabled again (PATCH with {"enabled": true}).'
        : 'Disabled with a write key: no event is recorded for it.',
    );
  if (w.failing_since)
    return h(
      'p',
      { class: 'error', role: 'status', 'data-field': 'failing' },
      `Failing since ${when(w.failing_since)}: its events wait and are retried; after 3 days in a row pushd disables it.`,
    );
  return h('p', { class: 'muted', 'data-field': 'ok' }, 'Enabled and answering.');
}

const attemptRow = (a: Attempt) =>
  h(
    'tr',
    {},
    h('td', {}, when(a.at)),
    h('td', { class: 'num' }, fmt(a.events)),
    h('td', { 'data-field': 'status' }, a.status === null ? 'no answer' : String(a.status)),
    h('td', { class: 'num' }, `${fmt(a.latency_ms)} ms`),
    h('td', { class: 'details' }, a.error ?? a.snippet ?? ''),
  );

function endpointPanel(w: Webhook, attempts: Attempt[]): HTMLElement {
  return h(
    'section',
    { class: 'panel', 'data-webhook': w.id },
    h('h2', {}, w.url),
    stateOf(w),
    h(
      'dl',
      {},
      h('dt', {}, 'events'),
      h('dd', { 'data-field': 'events' }, w.events.join(', ')),
      w.description && h('dt', {}, 'description'),
      w.description && h('dd', {}, w.description),
      h('dt', {}, 'id'),
      h('dd', {}, w.id),
    ),
    h('h3', {}, 'Recent requests'),
    h(
      'table',
      { class: 'attempts' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'when'),
          h('th', { class: 'num' }, 'events'),
          h('th', {}, 'status'),
          h('th', { class: 'num' }, 'latency'),
          h('th', {}, 'answer'),
        ),
      ),
      h(
        'tbody',
        {},
        ...attempts.slice(0, SHOWN).map(attemptRow),
        attempts.length === 0 && h('tr', {}, h('td', { colspan: 5 }, 'No request sent yet.')),
      ),
    ),
  );
}

/** The app's webhook endpoints, each with its state (a notice when pushd disabled it) and its latest requests. */
export const webhooksPage: Page = async ({ api }, main) => {
  const { webhooks } = await api.get<{ webhooks: Webhook[] }>('/v6/webhooks');
  const list = h('div', { id: 'webhooks' });
  main.append(
    h('h1', {}, 'Webhooks'),
    h(
      'p',
      { class: 'muted' },
      'Where pushd sends what happened (pushes delivered or failed, dead tokens, opens, conversions, journeys), signed. ' +
        'Endpoints are made with a write key through the API or the command line (pushd webhook create).',
    ),
    list,
  );
  if (webhooks.length === 0) return void list.append(h('p', { id: 'no-webhooks' }, 'No webhook endpoint yet.'));
  const panels = await Promise.all(
    webhooks.map(async (w) => {
      try {
        const { attempts } = await api.get<{ attempts: Attempt[] }>(`/v6/webhooks/${w.id}/attempts`);
        return endpointPanel(w, attempts);
      } catch (err) {
        return h('section', { class: 'panel', 'data-webhook': w.id }, h('h2', {}, w.url), errorBox(err));
      }
    }),
  );
  replace(list, ...panels);
};
