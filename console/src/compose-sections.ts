import { INTERRUPTION_LEVELS } from '../../src/domain/vocabulary.js';
import type { Api, Audience } from './api.js';
import { errorSlot, fmt, h, panel, radioChoice, replace, requestPreview } from './dom.js';
import { FilterBuilder } from './filter-builder.js';
import { templateSelect, type StoredTemplate } from './template-picker.js';

/**
 * The sections of the compose page (compose.ts; its "When" panel is in compose-when.ts): each builds its panel and
 * answers its part of the request body. They share one `ComposeForm`, so an edit anywhere checks the whole form
 * again and each error finds its field.
 */
export interface ComposeForm {
  /** the slot under a field for each error path the API names (`notification.payload.badge`) */
  readonly fieldErrors: Map<string, HTMLElement>;
  /** the Send button: its text follows the timing chosen */
  readonly send: HTMLButtonElement;
  /** counts the target and previews the payload again once the edits pause */
  readonly update: () => void;
  /** as `update`, and from now on the payload is checked even when nothing is written */
  readonly editedPayload: () => void;
}

type FieldKind = 'text' | 'number' | 'checkbox' | 'select';
type PayloadField = [key: string, kind: FieldKind, note: string];
const PAYLOAD_FIELDS: PayloadField[] = [
  ['alert', 'text', 'the text shown'],
  ['title', 'text', ''],
  ['subtitle', 'text', 'iOS'],
  ['sound', 'text', ''],
  ['badge', 'number', 'integer ≥ 0'],
  ['category', 'text', 'action set (iOS) / click action (Android)'],
  ['_channel_id', 'text', 'Android channel'],
  ['collapse_key', 'text', 'a later send with the same key replaces this notification'],
  ['content_available', 'checkbox', 'background update (iOS)'],
  ['mutable_content', 'checkbox', 'lets a service extension change it (iOS)'],
  ['interruption_level', 'select', 'iOS'],
  ['relevance_score', 'number', '0 to 1, two decimals (iOS)'],
];

/** `POST /v6/notifications/preview`: the request each gateway would get. */
export interface Preview {
  apns: { headers: Record<string, unknown>; body: unknown; bytes: number; max_bytes: number };
  fcm: { body: unknown };
  web: { headers: Record<string, unknown>; document: unknown; bytes: number; max_bytes: number };
  hms: { message: unknown };
}

/** Custom key values: JSON where the text is JSON (3, true, {"a":1}), else the text. */
function customValue(text: string): unknown {
  try {
    return /^\s*([[{"]|-?\d|true\b|false\b|null\b)/.test(text) ? JSON.parse(text) : text;
  } catch {
    return text;
  }
}

/** The "To" panel: filters (with a live builder), all devices, or a stored audience, and the count of devices. */
export interface TargetSection {
  readonly element: HTMLElement;
  readonly builder: FilterBuilder;
  /** `notification.to` as the API takes it */
  to(): unknown;
  /** the devices the target counts now */
  count(): Promise<number>;
  /** filters chosen and none written yet: nothing to count or send */
  unset(): boolean;
  /** shows what the count answered, and the target it counted (as JSON) */
  showCount(counted: PromiseSettledResult<number>, counting: string, noFilters: boolean): void;
}

/** Builds the "To" panel, filters first unless the route names an audience; its count asks `api`. */
export function targetSection(api: Api, form: ComposeForm, audiences: Audience[], params: string[]): TargetSection {
  let target: 'all' | 'filters' | 'audience' = params[0] === 'audience' ? 'audience' : 'filters';
  let audienceId = params[1] ?? audiences[0]?.id ?? '';
  const builder = new FilterBuilder(() => form.update());
  const count = h('strong', { id: 'device-count' }, '…');
  const countNote = h('span', { class: 'muted', id: 'count-note' });
  // the target as the API gets it, to copy into an API call; updated with the count it goes with
  const toJson = h('pre', { id: 'to-json' });
  const detail = h('div', { id: 'target-detail' });
  const renderDetail = () => {
    if (target === 'filters') return replace(detail, builder.element);
    if (target === 'all') return replace(detail, h('p', {}, 'Every device of the app.'));
    replace(
      detail,
      h(
        'select',
        { id: 'audience-select', onchange: (e: Event) => ((audienceId = (e.target as HTMLSelectElement).value), form.update()) },
        ...audiences.map((a) => h('option', { value: a.id, selected: a.id === audienceId }, a.name)),
      ),
    );
  };
  const choice = (value: typeof target, label: string) =>
    radioChoice('target', value, label, target === value, () => ((target = value), renderDetail(), form.update()));
  renderDetail();
  const element = panel(
    'To',
    h(
      'div',
      { class: 'row' },
      choice('filters', 'devices matching filters'),
      choice('all', 'all devices'),
      audiences.length > 0 && choice('audience', 'a stored audience'),
    ),
    detail,
    h('p', { class: 'count' }, count, ' devices', countNote),
    h('details', {}, h('summary', {}, 'as JSON (notification.to)'), toJson),
  );
  return {
    element,
    builder,
    to: () => (target === 'all' ? '*' : target === 'audience' ? { audience: audienceId } : builder.filters()),
    count: () =>
      target === 'audience'
        ? api.get<{ audience: { device_count: number } }>(`/v6/audiences/${audienceId}`).then((r) => r.audience.device_count)
        : api
            .post<{ device_count: number }>('/v6/audiences/count', { filters: target === 'all' ? [] : builder.filters() })
            .then((r) => r.device_count),
    unset: () => target === 'filters' && builder.filters().length === 0,
    showCount(counted, counting, noFilters) {
      count.textContent = counted.status === 'fulfilled' ? fmt(counted.value) : '—';
      toJson.textContent = counting;
      countNote.textContent = noFilters
        ? ' (no filter yet: add one, or choose all devices)'
        : counted.status === 'fulfilled'
          ? ''
          : ' (fix the filters to count)';
    },
  };
}

/** The "Payload" panel: a stored template, or every payload field and custom keys. */
export interface PayloadSection {
  readonly element: HTMLElement;
  /** the stored template sent in place of the payload fields ('' for none) */
  templateId(): string;
  /** the payload as written: the fields set, then the custom keys */
  payload(): Record<string, unknown>;
}

/** Builds the "Payload" panel, the stored templates offered when there are any. */
export function payloadSection(form: ComposeForm, templates: StoredTemplate[]): PayloadSection {
  let templateId = '';
  const values: Record<string, string | boolean> = { alert: '' };
  const customs = customKeys(form);
  const element = panel(
    'Payload',
    templates.length > 0 &&
      h(
        'label',
        { class: 'field' },
        h('span', {}, 'stored template'),
        templateSelect(templates, templateId, (id) => ((templateId = id), form.editedPayload()), { id: 'template-select' }),
        h('small', {}, 'sent in place of the fields below'),
      ),
    // what is wrong with the payload as a whole ("must not be empty")
    errorSlot(form.fieldErrors, 'notification.payload'),
    h('div', { class: 'fields' }, ...PAYLOAD_FIELDS.map((field) => payloadField(form, values, field))),
    h('h3', {}, 'Custom keys'),
    ...customs.elements,
  );
  const payload = (): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [k, kind] of PAYLOAD_FIELDS) {
      const v = values[k];
      if (v === undefined || v === '' || v === false) continue;
      out[k] = kind === 'number' ? (Number.isFinite(Number(v)) ? Number(v) : v) : v;
    }
    for (const c of customs.entries) if (c.key) out[c.key] = customValue(c.value);
    return out;
  };
  return { element, templateId: () => templateId, payload };
}

/** One payload field, its note and the slot for the API's message about it; an edit writes `values[key]`. */
function payloadField(form: ComposeForm, values: Record<string, string | boolean>, [k, kind, note]: PayloadField): HTMLElement {
  const err = errorSlot(form.fieldErrors, `notification.payload.${k}`);
  const onEdit = (e: Event) => {
    const t = e.target as HTMLInputElement;
    values[k] = kind === 'checkbox' ? t.checked : t.value;
    form.editedPayload();
  };
  const control =
    kind === 'checkbox'
      ? h('input', { type: 'checkbox', name: k, onchange: onEdit })
      : kind === 'select'
        ? h(
            'select',
            { name: k, onchange: onEdit },
            h('option', { value: '' }, '(not set)'),
            ...INTERRUPTION_LEVELS.map((l) => h('option', { value: l }, l)),
          )
        : h('input', {
            name: k,
            type: 'text',
            inputmode: kind === 'number' ? 'decimal' : undefined,
            value: values[k] as string | undefined,
            oninput: onEdit,
          });
  return h('label', { class: 'field' }, h('span', {}, k), control, note && h('small', {}, note), err);
}

/** The custom keys of the payload: a row each, a button that adds one, and the slot for their errors. */
function customKeys(form: ComposeForm): { elements: HTMLElement[]; entries: { key: string; value: string }[] } {
  const entries: { key: string; value: string }[] = [];
  const list = h('div', { id: 'custom-keys' });
  const edit = (c: { key: string; value: string }, k: 'key' | 'value') => (e: Event) => (
    (c[k] = (e.target as HTMLInputElement).value),
    form.editedPayload()
  );
  const render = () =>
    replace(
      list,
      ...entries.map((c, i) =>
        h(
          'div',
          { class: 'row' },
          h('input', { placeholder: 'key', value: c.key, 'data-field': 'custom-key', oninput: edit(c, 'key') }),
          h('input', { placeholder: 'value (text, or JSON)', value: c.value, 'data-field': 'custom-value', oninput: edit(c, 'value') }),
          h('button', { type: 'button', class: 'remove', onclick: () => (entries.splice(i, 1), render(), form.editedPayload()) }, '×'),
        ),
      ),
    );
  render();
  const add = h(
    'button',
    { type: 'button', id: 'add-custom', onclick: () => (entries.push({ key: '', value: '' }), render()) },
    '+ custom key',
  );
  return { elements: [list, add, errorSlot(form.fieldErrors, 'custom')], entries };
}

/** The "A/B test" panel: the payload above is variant A; B (and C, when written) are it with another alert. */
export interface AbSection {
  readonly element: HTMLElement;
  /** where the API's messages about the variants, shares and winner go (only a send names them: a check leaves it) */
  readonly error: HTMLElement;
  /** the content of the request: the payload alone, or, with the test on, its variants, shares and winner */
  content(payload: Record<string, unknown>): Record<string, unknown>;
}

/** Builds the "A/B test" panel, off and its fields hidden until ticked. */
export function abSection(): AbSection {
  const ab = { on: false, alerts: ['', ''], test: '20', holdout: '', winner: 'direct_opens', after: '4h' };
  const input = (id: string, label: string, k: 'test' | 'holdout' | 'after', note: string) =>
    h(
      'label',
      { class: 'field' },
      h('span', {}, label),
      h('input', { type: 'text', id, value: ab[k], oninput: (e: Event) => (ab[k] = (e.target as HTMLInputElement).value.trim()) }),
      h('small', {}, note),
    );
  const alert = (i: number) =>
    h(
      'label',
      { class: 'field' },
      h('span', {}, `variant ${String.fromCharCode(65 + i)} alert`),
      h('input', { type: 'text', id: `ab-alert-${i}`, oninput: (e: Event) => (ab.alerts[i - 1] = (e.target as HTMLInputElement).value) }),
      h('small', {}, i === 1 ? 'the payload above with this alert' : 'optional'),
    );
  const fields = h(
    'div',
    { id: 'ab-fields', hidden: true },
    ...[1, 2].map(alert),
    input('ab-test', 'test share', 'test', '% of the target, split evenly among the variants'),
    input('ab-holdout', 'holdout', 'holdout', '% sent nothing (the baseline)'),
    h(
      'label',
      { class: 'field' },
      h('span', {}, 'winner'),
      h(
        'select',
        { id: 'ab-winner', onchange: (e: Event) => (ab.winner = (e.target as HTMLSelectElement).value) },
        h('option', { value: 'direct_opens' }, 'the most direct opens'),
        h('option', { value: 'manual' }, 'picked by hand'),
      ),
    ),
    input('ab-after', 'after', 'after', 'e.g. 30m, 4h, 2d: then the winner goes to the rest'),
  );
  const error = h('div', { class: 'field-error', 'data-error': 'notification.variants' });
  const on = h('input', {
    type: 'checkbox',
    id: 'ab-on',
    onchange: (e: Event) => ((ab.on = (e.target as HTMLInputElement).checked), (fields.hidden = !ab.on)),
  });
  return {
    element: panel(
      'A/B test',
      h('label', { class: 'inline' }, on, ' test this payload (A) against other alerts; the winner goes to the rest'),
      fields,
      error,
    ),
    error,
    content: (payload) => {
      if (!ab.on) return { payload };
      const others = ab.alerts.filter((a) => a !== '').map((alert) => ({ ...payload, alert }));
      return {
        variants: [payload, ...others].map((p) => ({ payload: p })),
        test_fraction: Number(ab.test) / 100,
        ...(ab.holdout ? { holdout_fraction: Number(ab.holdout) / 100 } : {}),
        winner: ab.winner === 'manual' ? 'manual' : { metric: ab.winner, after: ab.after },
      };
    },
  };
}

/** The mapped pushes: the request APNs, FCM, Web Push and Huawei would get. */
export interface PreviewSection {
  readonly element: HTMLElement;
  /** shows a preview's requests; null (nothing written yet) empties them */
  show(p: Preview | null): void;
}

/** Builds the previews, empty until a preview is shown. */
export function previewSection(): PreviewSection {
  const apns = h('pre', { id: 'preview-apns' });
  const fcm = h('pre', { id: 'preview-fcm' });
  const web = h('pre', { id: 'preview-web' });
  const hms = h('pre', { id: 'preview-hms' });
  return {
    element: h(
      'section',
      { class: 'panel previews' },
      h('div', {}, h('h2', {}, 'APNs'), apns),
      h('div', {}, h('h2', {}, 'FCM HTTP v1'), fcm),
      h('div', {}, h('h2', {}, 'Web Push'), web),
      h('div', {}, h('h2', {}, 'Huawei Push Kit'), hms),
    ),
    show(p) {
      apns.textContent = p ? requestPreview(p.apns.headers, p.apns.body, `${fmt(p.apns.bytes)} of ${fmt(p.apns.max_bytes)} bytes`) : '';
      fcm.textContent = p ? JSON.stringify(p.fcm.body, null, 2) : '';
      web.textContent = p
        ? requestPreview(p.web.headers, p.web.document, `${fmt(p.web.bytes)} of ${fmt(p.web.max_bytes)} bytes once encrypted`)
        : '';
      hms.textContent = p ? JSON.stringify(p.hms.message, null, 2) : '';
    },
  };
}
