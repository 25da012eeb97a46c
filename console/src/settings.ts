import { ApiError } from './api.js';
import { errorSlot, h, panel, replace } from './dom.js';
import { auditPanel } from './audit.js';
import type { Page } from './page.js';

export type CapWindow = 'minute' | 'hour' | 'day';
export interface QuietHours {
  start: string;
  end: string;
  then: 'hold' | 'drop';
}
/** `GET /v6/app`: what shapes the app's sends. */
export interface AppSettings {
  app_id: string;
  max_per_minute: number | null;
  default_time_zone: string | null;
  quiet_hours: QuietHours | null;
  frequency_caps: { limit: number; window: CapWindow }[] | null;
}

export const capsText = (caps: AppSettings['frequency_caps']): string =>
  caps?.length ? caps.map((c) => `${c.limit} a ${c.window}`).join(', ') : 'none';
export const quietText = (q: QuietHours | null | false | undefined): string =>
  q ? `${q.start}–${q.end} on each device's clock, ${q.then === 'drop' ? 'dropped' : 'held to the end'}` : 'none';

const WINDOWS: CapWindow[] = ['minute', 'hour', 'day'];

/** The "Frequency caps" panel: a row per cap, editable with a write key; `body` is its part of the PATCH. */
function capsPanel(now: AppSettings, writable: boolean, errors: Map<string, HTMLElement>) {
  const caps = (now.frequency_caps ?? []).map((c) => ({ ...c }));
  const list = h('div', { id: 'cap-list' });
  const render = () =>
    replace(
      list,
      ...caps.map((c, i) =>
        h(
          'div',
          { class: 'row', 'data-cap': i },
          h('input', {
            type: 'text',
            inputmode: 'numeric',
            'data-field': 'cap-limit',
            value: c.limit,
            disabled: !writable,
            oninput: (e: Event) => (c.limit = Number((e.target as HTMLInputElement).value)),
          }),
          ' pushes a ',
          h(
            'select',
            {
              'data-field': 'cap-window',
              disabled: !writable,
              onchange: (e: Event) => (c.window = (e.target as HTMLSelectElement).value as CapWindow),
            },
            ...WINDOWS.map((w) => h('option', { value: w, selected: w === c.window }, w)),
          ),
          writable && h('button', { type: 'button', class: 'remove', onclick: () => (caps.splice(i, 1), render()) }, '×'),
          errorSlot(errors, `frequency_caps[${i}].limit`),
          errorSlot(errors, `frequency_caps[${i}].window`),
        ),
      ),
    );
  render();
  const element = panel(
    'Frequency caps',
    h('p', { class: 'muted' }, 'At most this many pushes to one device in any rolling minute, hour or day, across all notifications.'),
    list,
    errorSlot(errors, 'frequency_caps'),
    writable && h('button', { type: 'button', id: 'add-cap', onclick: () => (caps.push({ limit: 3, window: 'day' }), render()) }, '+ cap'),
  );
  return { element, body: () => ({ frequency_caps: caps.length ? caps : null }) };
}

/** The "Quiet hours" panel, with the default time zone; `body` is its part of the PATCH. */
function quietPanel(now: AppSettings, writable: boolean, errors: Map<string, HTMLElement>) {
  const on = h('input', { type: 'checkbox', id: 'quiet-on', checked: now.quiet_hours !== null, disabled: !writable });
  const start = h('input', { type: 'time', id: 'quiet-start', value: now.quiet_hours?.start ?? '22:00', disabled: !writable });
  const end = h('input', { type: 'time', id: 'quiet-end', value: now.quiet_hours?.end ?? '08:00', disabled: !writable });
  const then = h(
    'select',
    { id: 'quiet-then', disabled: !writable },
    h('option', { value: 'hold', selected: now.quiet_hours?.then !== 'drop' }, 'held to the end'),
    h('option', { value: 'drop', selected: now.quiet_hours?.then === 'drop' }, 'dropped (counted)'),
  );
  const zone = h('input', {
    type: 'text',
    id: 'default-zone',
    value: now.default_time_zone ?? '',
    placeholder: 'UTC',
    disabled: !writable,
  });
  const element = panel(
    'Quiet hours',
    h('label', { class: 'inline' }, on, ' no push arrives between'),
    h('div', { class: 'row' }, start, ' and ', end, ' : ', then),
    errorSlot(errors, 'quiet_hours.start'),
    errorSlot(errors, 'quiet_hours.end'),
    errorSlot(errors, 'quiet_hours'),
    h(
      'label',
      { class: 'field' },
      h('span', {}, 'default time zone'),
      zone,
      h('small', {}, 'of devices that have none'),
      errorSlot(errors, 'default_time_zone'),
    ),
  );
  const body = () => ({
    quiet_hours: on.checked ? { start: start.value, end: end.value, then: then.value } : null,
    default_time_zone: zone.value.trim() || null,
  });
  return { element, body };
}

/**
 * App settings: the frequency caps and quiet hours every notification goes under, and the default time zone; a
 * write key changes them (`PATCH /v6/app`), a read key sees them. The operator's pushes a minute is shown only. A
 * write key also sees the app's audit log.
 */
export const settingsPage: Page = async ({ api, key }, main) => {
  let now = await api.get<AppSettings>('/v6/app');
  const writable = key.role === 'write';
  const audit = writable ? auditPanel(api) : null;
  const errors = new Map<string, HTMLElement>();
  const general = h('p', { class: 'error', id: 'settings-error', role: 'alert' });
  const saved = h('span', { class: 'muted', id: 'settings-saved' });
  const caps = capsPanel(now, writable, errors);
  const quiet = quietPanel(now, writable, errors);

  const save = h('button', { type: 'button', id: 'save-settings', class: 'primary' }, 'Save');
  save.addEventListener('click', async () => {
    save.disabled = true;
    general.textContent = saved.textContent = '';
    for (const slot of errors.values()) slot.textContent = '';
    try {
      now = await api.patch<AppSettings>('/v6/app', { ...caps.body(), ...quiet.body() });
      saved.textContent = ` saved: caps ${capsText(now.frequency_caps)}; quiet hours ${quietText(now.quiet_hours)}`;
      await audit?.refresh();
    } catch (err) {
      const m = err instanceof ApiError && err.status === 400 ? /^([\w.[\]]+): (.*)$/.exec(err.message) : null;
      const slot = m && (errors.get(m[1]!) ?? errors.get(m[1]!.replace(/\.\w+$/, '')));
      if (slot) slot.textContent = m[2]!;
      else general.textContent = err instanceof Error ? err.message : String(err);
    } finally {
      save.disabled = false;
    }
  });

  main.append(
    h('h1', {}, 'App settings'),
    caps.element,
    quiet.element,
    h(
      'p',
      { class: 'muted', id: 'max-per-minute' },
      `Pushes a minute at most (set by the operator): ${now.max_per_minute === null ? 'no ceiling' : now.max_per_minute}`,
    ),
    general,
    writable
      ? h('p', {}, save, saved)
      : h(
          'p',
          { class: 'muted', id: 'read-only' },
          'This is a read key: it shows the settings but cannot change them (nor read the audit log).',
        ),
  );
  if (audit) {
    main.append(audit.panel);
    await audit.refresh();
  }
};
