import { ApiError, type Api } from './api.js';
import { errorSlot, fmt, h, replace, when } from './dom.js';
import type { Page } from './page.js';
import { storedTemplates, templateSelect, type StoredTemplate } from './template-picker.js';

type StepType = 'delay' | 'wait_for' | 'branch' | 'send' | 'webhook' | 'digest';
interface StepCount {
  id: string;
  type: string;
  entered: number;
  waiting: number;
  passed: number;
  sent: number;
  failed: number;
  converted: number;
  exited: number;
}
/** `GET /v6/journeys/:id`, the fields the console shows. */
export interface JourneyRecord {
  id: string;
  name: string;
  state: 'active' | 'paused' | 'archived';
  /** archived, and its entrants are still leaving (the workers exit them in batches) */
  exiting: boolean;
  version: number;
  trigger: { event?: string; api?: true };
  exit_on: string[];
  steps: Record<string, unknown>[];
  updated_at: string;
  counts: { trigger: { entered: number; skipped: number; filtered: number; converted: number }; steps: StepCount[] };
}

const COUNTS = ['entered', 'waiting', 'passed', 'sent', 'failed', 'converted', 'exited'] as const;
const stateText = (j: JourneyRecord) => (j.exiting ? 'archived, entrants leaving' : j.state);
const triggerText = (j: JourneyRecord) => (j.trigger.api ? 'entered through the API' : `on event ${j.trigger.event}`);

/** One step as the form edits it: its type and the text of each field. */
interface DraftStep {
  type: StepType;
  id: string;
  /** delay: "2h", "09:00" (until that local time) or "best time"; wait_for, digest: the event; send: the alert; webhook: its URL */
  main: string;
  /** wait_for: the timeout; digest: the window */
  extra: string;
  /** send: the stored template sent in place of the text */
  template?: string;
}
const STEP_LABELS: Record<StepType, [string, string | null]> = {
  delay: ['wait for (90s, 10m, 2h, 3d), until (HH:MM local) or "best time" (within a day)', null],
  wait_for: ['event', 'timeout'],
  branch: ['country (ISO code) to go on; others end', null],
  send: ['push text', null],
  webhook: ['URL (https) to POST the entrant to', null],
  digest: ['event to count', 'window'],
};

/** The API's step for a draft: the one place the form's fields become a definition. */
function stepOf(d: DraftStep): Record<string, unknown> {
  const base = { id: d.id, type: d.type };
  switch (d.type) {
    case 'delay':
      if (/^best[ _]time$/i.test(d.main.trim())) return { ...base, until: 'best_time' };
      return /^\d\d:\d\d$/.test(d.main) ? { ...base, until_local_time: d.main } : { ...base, duration: d.main };
    case 'wait_for':
      return { ...base, event: d.main, timeout: d.extra };
    case 'branch':
      return { ...base, filters: [{ name: 'country', criteria: [d.main] }], else: 'end' };
    case 'send':
      return { ...base, notification: d.template ? { template_id: d.template } : { payload: { alert: d.main } } };
    case 'webhook':
      return { ...base, url: d.main };
    case 'digest':
      return { ...base, event: d.main, window: d.extra };
  }
}

/** The list of the app's journeys with their counters, and (with a write key) the form that makes one. */
export const journeysPage: Page = async ({ api, key }, main) => {
  const { journeys } = await api.get<{ journeys: JourneyRecord[] }>('/v6/journeys?per=100');
  const writable = key.role === 'write';
  main.append(
    h('h1', {}, 'Journeys'),
    journeys.length === 0
      ? h('p', { class: 'muted', id: 'no-journeys' }, 'No journey yet.')
      : h(
          'table',
          { id: 'journeys' },
          h(
            'thead',
            {},
            h('tr', {}, ...['Name', 'Trigger', 'State', 'Version', 'Entered', 'Inside', 'Converted'].map((t) => h('th', {}, t))),
          ),
          h(
            'tbody',
            {},
            ...journeys.map((j) =>
              h(
                'tr',
                { 'data-journey': j.id },
                h('td', {}, h('a', { href: `#/journeys/${j.id}` }, j.name)),
                h('td', {}, triggerText(j)),
                h('td', { 'data-field': 'state' }, stateText(j)),
                h('td', {}, j.version),
                h('td', { 'data-field': 'entered' }, fmt(j.counts.trigger.entered)),
                h('td', { 'data-field': 'waiting' }, fmt(j.counts.steps.reduce((n, s) => n + s.waiting, 0))),
                h('td', { 'data-field': 'converted' }, fmt(j.counts.trigger.converted)),
              ),
            ),
          ),
        ),
    writable
      ? journeyForm(api, await storedTemplates(api))
      : h('p', { class: 'muted', id: 'read-only' }, 'This is a read key: it shows journeys but cannot make them.'),
  );
};

/** The form that makes a journey: its name, trigger, exit events and steps, and the button that creates it. */
function journeyForm(api: Api, templates: StoredTemplate[]): HTMLElement {
  const drafts: DraftStep[] = [{ type: 'delay', id: 'step1', main: '1h', extra: '' }];
  const name = h('input', { type: 'text', id: 'journey-name', placeholder: 'Cart reminder' });
  const trigger = h('input', { type: 'text', id: 'journey-trigger', placeholder: 'cart_abandoned' });
  const exitOn = h('input', { type: 'text', id: 'journey-exit', placeholder: 'purchase' });
  const list = h('ol', { id: 'step-list' });
  const error = h('p', { class: 'error', id: 'journey-error', role: 'alert' });
  const errors = new Map<string, HTMLElement>();
  const render = () => renderSteps(list, drafts, templates, errors);
  render();
  const add = h('button', { type: 'button', id: 'add-step' }, '+ step');
  add.addEventListener('click', () => {
    drafts.push({ type: 'send', id: `step${drafts.length + 1}`, main: '', extra: '' });
    render();
  });
  const save = h('button', { type: 'button', id: 'save-journey', class: 'primary' }, 'Create journey');
  save.addEventListener('click', async () => {
    save.disabled = true;
    try {
      await createJourney(
        api,
        {
          name: name.value,
          trigger: trigger.value.trim() ? { event: trigger.value.trim() } : { api: true },
          exit_on: exitOn.value.trim() ? exitOn.value.split(',').map((e) => e.trim()) : [],
          steps: drafts.map(stepOf),
        },
        error,
        errors,
      );
    } finally {
      save.disabled = false;
    }
  });
  return h(
    'section',
    { class: 'panel', id: 'new-journey' },
    h('h2', {}, 'New journey'),
    h('label', { class: 'field' }, h('span', {}, 'name'), name),
    h('label', { class: 'field' }, h('span', {}, 'trigger event'), trigger, h('small', {}, 'empty: entered through the API')),
    h('label', { class: 'field' }, h('span', {}, 'exits on (converted)'), exitOn, h('small', {}, 'event names, comma separated')),
    h('h3', {}, 'Steps, in order'),
    list,
    h('p', {}, add),
    error,
    h('p', {}, save),
  );
}

/** The steps as written, a row each: its type, its fields, a template for a send, and the slot for its errors. */
function renderSteps(list: HTMLElement, drafts: DraftStep[], templates: StoredTemplate[], errors: Map<string, HTMLElement>): void {
  const render = () => renderSteps(list, drafts, templates, errors);
  replace(
    list,
    ...drafts.map((d, i) => {
      const [mainLabel, extraLabel] = STEP_LABELS[d.type];
      const input = (field: 'main' | 'extra', label: string) =>
        h(
          'label',
          { class: 'field' },
          h('span', {}, label),
          h('input', {
            type: 'text',
            'data-field': field,
            value: d[field],
            oninput: (e: Event) => (d[field] = (e.target as HTMLInputElement).value),
          }),
        );
      return h(
        'li',
        { 'data-step': i },
        h(
          'select',
          { 'data-field': 'type', onchange: (e: Event) => ((d.type = (e.target as HTMLSelectElement).value as StepType), render()) },
          ...(Object.keys(STEP_LABELS) as StepType[]).map((t) => h('option', { value: t, selected: t === d.type }, t)),
        ),
        input('main', mainLabel),
        extraLabel && input('extra', extraLabel),
        d.type === 'send' &&
          templates.length > 0 &&
          templateSelect(templates, d.template ?? '', (id) => (d.template = id), { 'data-field': 'template' }),
        h('button', { type: 'button', class: 'remove', onclick: () => (drafts.splice(i, 1), render()) }, '×'),
        errorSlot(errors, `journey.steps[${i}]`),
      );
    }),
  );
}

/** Creates the journey: shows its webhook secret once, else opens it; an error goes under the step it names. */
async function createJourney(api: Api, journey: Record<string, unknown>, error: HTMLElement, errors: Map<string, HTMLElement>) {
  error.textContent = '';
  for (const el of errors.values()) el.textContent = '';
  try {
    const created = await api.post<{ journey: JourneyRecord & { webhook_secret?: string } }>('/v6/journeys', { journey });
    const { id, webhook_secret: secret } = created.journey;
    // the webhook steps' signing secret is answered once: shown here until the user goes on
    if (secret)
      replace(
        error,
        h('span', { id: 'journey-secret' }, `Webhook signing secret (shown once): ${secret} `),
        h('a', { href: `#/journeys/${id}` }, 'open the journey'),
      );
    else location.hash = `#/journeys/${id}`;
  } catch (err) {
    // "journey.steps[1].duration: must be at least 1 second" goes under step 1, in words
    const m = err instanceof ApiError && err.status === 400 ? /^journey\.steps\[(\d+)\]\.?([\w.[\]]*): (.*)$/.exec(err.message) : null;
    const at = m && errors.get(`journey.steps[${m[1]}]`);
    if (at) at.textContent = `${m![2] ? `${m![2]}: ` : ''}${m![3]}`;
    else error.textContent = err instanceof Error ? err.message : String(err);
  }
}

/** One journey: its definition in words, its counters per step, and pause, resume and archive. */
export const journeyPage: Page = async ({ api, key }, main, [id]) => {
  let { journey: j } = await api.get<{ journey: JourneyRecord }>(`/v6/journeys/${id}`);
  const body = h('div', {});
  const error = h('p', { class: 'error', id: 'journey-action-error', role: 'alert' });
  const action = (name: 'pause' | 'resume' | 'archive', label: string) =>
    h(
      'button',
      {
        type: 'button',
        id: `journey-${name}`,
        onclick: async () => {
          error.textContent = '';
          try {
            ({ journey: j } = await api.post<{ journey: JourneyRecord }>(`/v6/journeys/${j.id}/${name}`, {}));
            draw();
          } catch (err) {
            error.textContent = err instanceof Error ? err.message : String(err);
          }
        },
      },
      label,
    );
  const draw = () =>
    replace(
      body,
      h('h1', {}, j.name),
      h(
        'p',
        { id: 'journey-summary' },
        `${triggerText(j)} · ${stateText(j)} · version ${j.version} · changed ${when(j.updated_at)}`,
        j.exit_on.length ? ` · exits on ${j.exit_on.join(', ')}` : '',
      ),
      h(
        'p',
        { id: 'trigger-counts', class: 'muted' },
        `${fmt(j.counts.trigger.entered)} entered, ${fmt(j.counts.trigger.converted)} converted, ` +
          `${fmt(j.counts.trigger.filtered)} filtered out, ${fmt(j.counts.trigger.skipped)} skipped`,
      ),
      h(
        'table',
        { id: 'step-counts' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Step'), h('th', {}, 'Type'), ...COUNTS.map((c) => h('th', {}, c)))),
        h(
          'tbody',
          {},
          ...j.counts.steps.map((s) =>
            h(
              'tr',
              { 'data-step': s.id },
              h('td', {}, s.id),
              h('td', {}, s.type),
              ...COUNTS.map((c) => h('td', { 'data-count': c }, fmt(s[c]))),
            ),
          ),
        ),
      ),
      entrantLookup(api, j.id),
      key.role === 'write' &&
        j.state !== 'archived' &&
        h('p', {}, j.state === 'active' ? action('pause', 'Pause') : action('resume', 'Resume'), ' ', action('archive', 'Archive')),
      error,
    );
  draw();
  main.append(body);
};

/** `GET /v6/journeys/:id/entrants/:key`: one entry, the fields the console shows. */
interface EntrantEntry {
  entered_at: string;
  version: number;
  step: string;
  phase: string;
  outcome: string | null;
  history: ({ at: string; step: string; what: string } & Record<string, unknown>)[];
}

/** An entrant's history: each step it took, when and why, newest entry first. */
function entrantLookup(api: Api, journeyId: string): HTMLElement {
  const input = h('input', { type: 'text', id: 'entrant-key', placeholder: 'device:<id> or user:<id>' });
  const out = h('div', { id: 'entrant-history' });
  const show = h('button', { type: 'button', id: 'entrant-show' }, 'Show history');
  show.addEventListener('click', async () => {
    try {
      const { entrants } = await api.get<{ entrants: EntrantEntry[] }>(
        `/v6/journeys/${journeyId}/entrants/${encodeURIComponent(input.value.trim())}`,
      );
      replace(out, ...(entrants.length ? entrants.map(entryTable) : [h('p', { class: 'muted' }, 'It never entered this journey.')]));
    } catch (err) {
      replace(out, h('p', { class: 'error' }, err instanceof Error ? err.message : String(err)));
    }
  });
  return h('section', { class: 'panel', id: 'entrant' }, h('h2', {}, 'An entrant’s history'), input, ' ', show, out);
}

/** The details of a history entry in words: what it read, where it led, what it sent. */
const DETAILS = ['event', 'until', 'to', 'matched', 'path', 'notification_id', 'status', 'attempt', 'count', 'error'] as const;

function entryTable(e: EntrantEntry): HTMLElement {
  return h(
    'div',
    { class: 'entrant-entry' },
    h('p', {}, `Entered ${when(e.entered_at)} (version ${e.version}) · ${e.outcome ?? `${e.phase} at ${e.step}`}`),
    h(
      'table',
      { class: 'entrant-history' },
      h('thead', {}, h('tr', {}, ...['At', 'Step', 'What', 'Details'].map((t) => h('th', {}, t)))),
      h(
        'tbody',
        {},
        ...e.history.map((x) =>
          h(
            'tr',
            { 'data-what': x.what },
            h('td', {}, when(x.at)),
            h('td', {}, x.step),
            h('td', {}, x.what),
            h(
              'td',
              {},
              DETAILS.filter((k) => x[k] !== undefined)
                .map((k) => `${k} ${String(x[k])}`)
                .join(' · '),
            ),
          ),
        ),
      ),
    ),
  );
}
