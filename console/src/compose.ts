import { INTERRUPTION_LEVELS } from '../../src/domain/vocabulary.js';
import { ApiError, type Audience } from './api.js';
import { debounce, fmt, h, replace, requestPreview } from './dom.js';
import { FilterBuilder } from './filter-builder.js';
import type { Page } from './page.js';
import { capsText, quietText, type AppSettings } from './settings.js';
import { storedTemplates, templateSelect } from './template-picker.js';

type FieldKind = 'text' | 'number' | 'checkbox' | 'select';
const PAYLOAD_FIELDS: [key: string, kind: FieldKind, note: string][] = [
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

interface Preview {
  apns: { headers: Record<string, unknown>; body: unknown; bytes: number; max_bytes: number };
  fcm: { body: unknown };
  web: { headers: Record<string, unknown>; document: unknown; bytes: number; max_bytes: number };
  hms: { message: unknown };
}

/** The form as checked, ready to send: the devices its target counts now. */
interface Ready {
  devices: number;
}

/** Custom key values: JSON where the text is JSON (3, true, {"a":1}), else the text. */
function customValue(text: string): unknown {
  try {
    return /^\s*([[{"]|-?\d|true\b|false\b|null\b)/.test(text) ? JSON.parse(text) : text;
  } catch {
    return text;
  }
}

/** Compose: target, filters with a live device count, every payload field, the mapped pushes, send. */
export const composePage: Page = async ({ api, key }, main, params) => {
  const [{ audiences }, settings, templates] = await Promise.all([
    api.get<{ audiences: Audience[] }>('/v6/audiences?per=1000'),
    api.get<AppSettings>('/v6/app'),
    storedTemplates(api),
  ]);
  // a stored template sent in place of the payload fields (none: '')
  let templateId = '';
  let target: 'all' | 'filters' | 'audience' = params[0] === 'audience' ? 'audience' : 'filters';
  let audienceId = params[1] ?? audiences[0]?.id ?? '';
  const values: Record<string, string | boolean> = { alert: '' };
  const customs: { key: string; value: string }[] = [];

  const count = h('strong', { id: 'device-count' }, '…');
  const countNote = h('span', { class: 'muted', id: 'count-note' });
  // the target as the API gets it, to copy into an API call; updated with the count it goes with
  const toJson = h('pre', { id: 'to-json' });
  const general = h('p', { class: 'error', id: 'compose-error', role: 'alert' });
  const apnsOut = h('pre', { id: 'preview-apns' });
  const fcmOut = h('pre', { id: 'preview-fcm' });
  const webOut = h('pre', { id: 'preview-web' });
  const hmsOut = h('pre', { id: 'preview-hms' });
  const fieldErrors = new Map<string, HTMLElement>();
  const builder = new FilterBuilder(() => update());

  const to = (): unknown => (target === 'all' ? '*' : target === 'audience' ? { audience: audienceId } : builder.filters());
  const payload = (): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [k, kind] of PAYLOAD_FIELDS) {
      const v = values[k];
      if (v === undefined || v === '' || v === false) continue;
      out[k] = kind === 'number' ? (Number.isFinite(Number(v)) ? Number(v) : v) : v;
    }
    for (const c of customs) if (c.key) out[c.key] = customValue(c.value);
    return out;
  };
  // when and how fast: now, at an instant (the browser's own offset), or at a wall time on each device's clock
  let when: 'now' | 'at' | 'local' = 'now';
  let sendAt = '';
  let perMinute = '';
  const timing = (): Record<string, unknown> => ({
    ...(when === 'at' && sendAt ? { send_at: new Date(sendAt).toISOString() } : {}),
    ...(when === 'local' && sendAt ? { send_at: sendAt, local_time: true } : {}),
    ...(when !== 'now' && !sendAt ? { send_at: '' } : {}),
    ...(perMinute ? { throttle: { per_minute: Number(perMinute) } } : {}),
  });
  // an A/B test: the payload above is variant A; B (and C, when written) are it with another alert
  const ab = { on: false, alerts: ['', ''], test: '20', holdout: '', winner: 'direct_opens', after: '4h' };
  const content = (): Record<string, unknown> => {
    if (templateId) return { template_id: templateId };
    if (!ab.on) return { payload: payload() };
    const others = ab.alerts.filter((a) => a !== '').map((alert) => ({ ...payload(), alert }));
    return {
      variants: [payload(), ...others].map((p) => ({ payload: p })),
      test_fraction: Number(ab.test) / 100,
      ...(ab.holdout ? { holdout_fraction: Number(ab.holdout) / 100 } : {}),
      winner: ab.winner === 'manual' ? 'manual' : { metric: ab.winner, after: ab.after },
    };
  };
  // the app's quiet hours and caps, or this notification's own quiet hours, none, or no caps
  let quiet: 'app' | 'none' | 'own' = 'app';
  let capped = true;
  const quietStart = h('input', { type: 'time', id: 'quiet-start', value: '22:00', disabled: true });
  const quietEnd = h('input', { type: 'time', id: 'quiet-end', value: '08:00', disabled: true });
  const quietThen = h(
    'select',
    { id: 'quiet-then', disabled: true },
    h('option', { value: 'hold' }, 'held to the end'),
    h('option', { value: 'drop' }, 'dropped (counted)'),
  );
  const limits = (): Record<string, unknown> => ({
    ...(quiet === 'none' ? { quiet_hours: false } : {}),
    ...(quiet === 'own' ? { quiet_hours: { start: quietStart.value, end: quietEnd.value, then: quietThen.value } } : {}),
    ...(capped ? {} : { cap: false }),
  });
  const body = () => ({ notification: { to: to(), ...content(), ...timing(), ...limits() } });

  // The payload is checked once the user has written in it or pressed Send, not on the empty form.
  let touched = false;
  let sending = false;
  let blocked = true; // what the last check found keeps Send from going
  let seq = 0;
  let newest: Promise<Ready | null> = Promise.resolve(null);
  /** Counts the target and previews the payload, showing what is wrong; answers the count when all is well. */
  const refresh = (): Promise<Ready | null> => (newest = check(++seq));
  const check = async (mine: number): Promise<Ready | null> => {
    const counting = JSON.stringify(to(), null, 2);
    const countCall =
      target === 'audience'
        ? api.get<{ audience: { device_count: number } }>(`/v6/audiences/${audienceId}`).then((r) => r.audience.device_count)
        : api
            .post<{ device_count: number }>('/v6/audiences/count', { filters: target === 'all' ? [] : builder.filters() })
            .then((r) => r.device_count);
    // The payload is previewed on its own ("*"), so filter problems (named by the count) and payload problems
    // (named by the preview) show at once, each under its own field; the send validates both together again.
    const unwritten = !touched && !templateId && Object.keys(payload()).length === 0;
    const what = templateId ? { template_id: templateId } : { payload: payload() };
    const previewCall = unwritten
      ? Promise.resolve(null)
      : api.post<Preview>('/v6/notifications/preview', { notification: { to: '*', ...what } });
    const [counted, previewed] = await Promise.allSettled([countCall, previewCall]);
    if (mine !== seq) return newest; // a newer edit is on its way: its answer is the one that counts
    const noFilters = target === 'filters' && builder.filters().length === 0;
    count.textContent = counted.status === 'fulfilled' ? fmt(counted.value) : '—';
    toJson.textContent = counting;
    countNote.textContent = noFilters
      ? ' (no filter yet: add one, or choose all devices)'
      : counted.status === 'fulfilled'
        ? ''
        : ' (fix the filters to count)';
    general.textContent = '';
    builder.clearErrors();
    for (const slot of fieldErrors.values()) slot.textContent = '';
    if (counted.status === 'rejected') showError(counted.reason);
    if (previewed.status === 'rejected') showError(previewed.reason);
    else {
      const p = previewed.value; // null: nothing written yet, nothing to preview
      apnsOut.textContent = p ? requestPreview(p.apns.headers, p.apns.body, `${fmt(p.apns.bytes)} of ${fmt(p.apns.max_bytes)} bytes`) : '';
      fcmOut.textContent = p ? JSON.stringify(p.fcm.body, null, 2) : '';
      webOut.textContent = p
        ? requestPreview(p.web.headers, p.web.document, `${fmt(p.web.bytes)} of ${fmt(p.web.max_bytes)} bytes once encrypted`)
        : '';
      hmsOut.textContent = p ? JSON.stringify(p.hms.message, null, 2) : '';
    }
    blocked = noFilters || counted.status === 'rejected' || previewed.status === 'rejected';
    send.disabled = sending || blocked;
    return !noFilters && counted.status === 'fulfilled' && previewed.status === 'fulfilled' && previewed.value
      ? { devices: counted.value }
      : null;
  };
  const update = debounce(() => void refresh(), 250);
  const editedPayload = () => ((touched = true), update());

  /** "notification.payload.badge: must be …" goes under the badge field; filter errors under their filter. */
  function showError(err: unknown) {
    const message = err instanceof Error ? err.message : String(err);
    const m = /^([\w.[\]-]+): (.*)$/.exec(message);
    if (m && err instanceof ApiError && err.status === 400) {
      const [, path, text] = m as unknown as [string, string, string];
      const abField = /^notification\.(variants|test_fraction|holdout_fraction|winner)\b/.test(path) ? abErr : undefined;
      if (abField) return void (abField.textContent = `${path.slice(13)}: ${text}`);
      const field = fieldErrors.get(path) ?? (path.startsWith('notification.payload.') ? fieldErrors.get('custom') : undefined);
      if (field)
        return void (field.textContent =
          path.startsWith('notification.payload.') && !fieldErrors.has(path) ? `${path.slice(21)}: ${text}` : text);
      if (builder.showError(path, text)) return;
    }
    general.textContent = message;
  }

  const field = ([k, kind, note]: (typeof PAYLOAD_FIELDS)[number]) => {
    const err = h('div', { class: 'field-error', 'data-error': `notification.payload.${k}` });
    fieldErrors.set(`notification.payload.${k}`, err);
    const onEdit = (e: Event) => {
      const t = e.target as HTMLInputElement;
      values[k] = kind === 'checkbox' ? t.checked : t.value;
      editedPayload();
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
  };

  // what is wrong with the payload as a whole ("must not be empty")
  const payloadErr = h('div', { class: 'field-error', 'data-error': 'notification.payload' });
  fieldErrors.set('notification.payload', payloadErr);
  const customList = h('div', { id: 'custom-keys' });
  const customErr = h('div', { class: 'field-error', 'data-error': 'custom' });
  fieldErrors.set('custom', customErr);
  const renderCustoms = () =>
    replace(
      customList,
      ...customs.map((c, i) =>
        h(
          'div',
          { class: 'row' },
          h('input', {
            placeholder: 'key',
            value: c.key,
            'data-field': 'custom-key',
            oninput: (e: Event) => ((c.key = (e.target as HTMLInputElement).value), editedPayload()),
          }),
          h('input', {
            placeholder: 'value (text, or JSON)',
            value: c.value,
            'data-field': 'custom-value',
            oninput: (e: Event) => ((c.value = (e.target as HTMLInputElement).value), editedPayload()),
          }),
          h('button', { type: 'button', class: 'remove', onclick: () => (customs.splice(i, 1), renderCustoms(), editedPayload()) }, '×'),
        ),
      ),
    );

  const send = h('button', { type: 'button', id: 'send', class: 'primary' }, 'Send');
  const whenErr = h('div', { class: 'field-error', 'data-error': 'notification.send_at' });
  const paceErr = h('div', { class: 'field-error', 'data-error': 'notification.throttle.per_minute' });
  fieldErrors.set('notification.send_at', whenErr);
  fieldErrors.set('notification.throttle.per_minute', paceErr);
  fieldErrors.set('notification.throttle', paceErr);
  const quietErr = h('div', { class: 'field-error', 'data-error': 'notification.quiet_hours' });
  for (const path of ['', '.start', '.end', '.then']) fieldErrors.set(`notification.quiet_hours${path}`, quietErr);
  const quietChoice = (value: typeof quiet, label: string) =>
    h(
      'label',
      { class: 'inline' },
      h('input', {
        type: 'radio',
        name: 'quiet',
        value,
        checked: quiet === value,
        onchange: () => {
          quiet = value;
          for (const input of [quietStart, quietEnd, quietThen]) input.disabled = value !== 'own';
        },
      }),
      ` ${label}`,
    );
  const sendAtInput = h('input', {
    type: 'datetime-local',
    id: 'send-at',
    disabled: true,
    oninput: (e: Event) => (sendAt = (e.target as HTMLInputElement).value),
  });
  const whenChoice = (value: typeof when, label: string) =>
    h(
      'label',
      { class: 'inline' },
      h('input', {
        type: 'radio',
        name: 'when',
        value,
        checked: when === value,
        onchange: () => {
          when = value;
          sendAtInput.disabled = value === 'now';
          send.textContent = value === 'now' ? 'Send' : 'Schedule';
        },
      }),
      ` ${label}`,
    );
  // Send checks the form now (the payload too, written or not), then asks, naming how many devices it goes to.
  send.addEventListener('click', async () => {
    touched = true;
    sending = true;
    send.disabled = true;
    try {
      const ready = await refresh();
      if (!ready) return;
      if (when !== 'now' && !sendAt) return void (whenErr.textContent = 'choose a date and time');
      if (!(await confirmed(question(ready.devices)))) return;
      const created = await api.post<{ id: string }>('/v6/notifications', body());
      location.hash = `#/notifications/${created.id}`;
    } catch (err) {
      showError(err);
    } finally {
      sending = false;
      send.disabled = blocked;
    }
  });
  const devicesIn = (n: number) => `${fmt(n)} device${n === 1 ? '' : 's'}`;
  const question = (devices: number) => {
    if (when === 'now') return `Send this notification now to ${devicesIn(devices)}?`;
    const at = `${sendAt.replace('T', ' ')} ${when === 'local' ? "on each device's clock" : '(this browser’s time)'}`;
    return `Schedule this notification for ${at}? Its target counts ${devicesIn(devices)} now; it is counted again when it goes out.`;
  };
  const confirmText = h('p', { id: 'confirm-text' });
  const confirmSend = h('button', { type: 'button', id: 'confirm-send', class: 'primary', onclick: () => confirmBox.close('send') });
  const confirmBox = h(
    'dialog',
    { id: 'confirm' },
    confirmText,
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'button', id: 'confirm-cancel', onclick: () => confirmBox.close('cancel') }, 'Cancel'),
      confirmSend,
    ),
  );
  /** Asks in a modal dialog; true only for its Send button (Cancel and Escape answer false). */
  const confirmed = (text: string) =>
    new Promise<boolean>((resolve) => {
      confirmText.textContent = text;
      confirmSend.textContent = when === 'now' ? 'Send' : 'Schedule';
      confirmBox.returnValue = '';
      confirmBox.addEventListener('close', () => resolve(confirmBox.returnValue === 'send'), { once: true });
      confirmBox.showModal();
    });

  const abErr = h('div', { class: 'field-error', 'data-error': 'notification.variants' });
  const abInput = (id: string, label: string, k: 'test' | 'holdout' | 'after', note: string) =>
    h(
      'label',
      { class: 'field' },
      h('span', {}, label),
      h('input', { type: 'text', id, value: ab[k], oninput: (e: Event) => (ab[k] = (e.target as HTMLInputElement).value.trim()) }),
      h('small', {}, note),
    );
  const abFields = h(
    'div',
    { id: 'ab-fields', hidden: true },
    ...[1, 2].map((i) =>
      h(
        'label',
        { class: 'field' },
        h('span', {}, `variant ${String.fromCharCode(65 + i)} alert`),
        h('input', {
          type: 'text',
          id: `ab-alert-${i}`,
          oninput: (e: Event) => (ab.alerts[i - 1] = (e.target as HTMLInputElement).value),
        }),
        h('small', {}, i === 1 ? 'the payload above with this alert' : 'optional'),
      ),
    ),
    abInput('ab-test', 'test share', 'test', '% of the target, split evenly among the variants'),
    abInput('ab-holdout', 'holdout', 'holdout', '% sent nothing (the baseline)'),
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
    abInput('ab-after', 'after', 'after', 'e.g. 30m, 4h, 2d: then the winner goes to the rest'),
  );
  const targetBox = h('div', { id: 'target-detail' });
  const renderTarget = () => {
    if (target === 'filters') return replace(targetBox, builder.element);
    if (target === 'all') return replace(targetBox, h('p', {}, 'Every device of the app.'));
    replace(
      targetBox,
      h(
        'select',
        { id: 'audience-select', onchange: (e: Event) => ((audienceId = (e.target as HTMLSelectElement).value), update()) },
        ...audiences.map((a) => h('option', { value: a.id, selected: a.id === audienceId }, a.name)),
      ),
    );
  };
  const targetChoice = (value: typeof target, label: string) =>
    h(
      'label',
      { class: 'inline' },
      h('input', {
        type: 'radio',
        name: 'target',
        value,
        checked: target === value,
        onchange: () => ((target = value), renderTarget(), update()),
      }),
      ` ${label}`,
    );

  renderTarget();
  renderCustoms();
  main.append(
    h('h1', {}, 'Compose'),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'To'),
      h(
        'div',
        { class: 'row' },
        targetChoice('filters', 'devices matching filters'),
        targetChoice('all', 'all devices'),
        audiences.length > 0 && targetChoice('audience', 'a stored audience'),
      ),
      targetBox,
      h('p', { class: 'count' }, count, ' devices', countNote),
      h('details', {}, h('summary', {}, 'as JSON (notification.to)'), toJson),
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Payload'),
      templates.length > 0 &&
        h(
          'label',
          { class: 'field' },
          h('span', {}, 'stored template'),
          templateSelect(templates, templateId, (id) => ((templateId = id), editedPayload()), { id: 'template-select' }),
          h('small', {}, 'sent in place of the fields below'),
        ),
      payloadErr,
      h('div', { class: 'fields' }, ...PAYLOAD_FIELDS.map(field)),
      h('h3', {}, 'Custom keys'),
      customList,
      h(
        'button',
        { type: 'button', id: 'add-custom', onclick: () => (customs.push({ key: '', value: '' }), renderCustoms()) },
        '+ custom key',
      ),
      customErr,
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'When'),
      h(
        'div',
        { class: 'row' },
        whenChoice('now', 'now'),
        whenChoice('at', 'at a time (this browser’s zone)'),
        whenChoice('local', "at this time on each device's clock"),
      ),
      h('label', { class: 'field' }, h('span', {}, 'send at'), sendAtInput, whenErr),
      h(
        'label',
        { class: 'field' },
        h('span', {}, 'pace'),
        h('input', {
          type: 'text',
          inputmode: 'numeric',
          id: 'per-minute',
          placeholder: 'as fast as possible',
          oninput: (e: Event) => (perMinute = (e.target as HTMLInputElement).value.trim()),
        }),
        h('small', {}, 'pushes a minute, spread evenly'),
        paceErr,
      ),
      h('h3', {}, 'Quiet hours'),
      h(
        'div',
        { class: 'row', id: 'quiet-choice' },
        quietChoice('app', `the app's (${quietText(settings.quiet_hours)})`),
        quietChoice('none', 'none for this one'),
        quietChoice('own', 'these:'),
        quietStart,
        '–',
        quietEnd,
        quietThen,
      ),
      quietErr,
      h('h3', {}, 'Frequency caps'),
      h(
        'label',
        { class: 'inline' },
        h('input', {
          type: 'checkbox',
          id: 'apply-caps',
          checked: capped,
          onchange: (e: Event) => (capped = (e.target as HTMLInputElement).checked),
        }),
        ` apply the app's caps (${capsText(settings.frequency_caps)}); unticked, it goes to devices at a cap and takes no slot`,
      ),
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'A/B test'),
      h(
        'label',
        { class: 'inline' },
        h('input', {
          type: 'checkbox',
          id: 'ab-on',
          onchange: (e: Event) => ((ab.on = (e.target as HTMLInputElement).checked), (abFields.hidden = !ab.on)),
        }),
        ' test this payload (A) against other alerts; the winner goes to the rest',
      ),
      abFields,
      abErr,
    ),
    general,
    h(
      'section',
      { class: 'panel previews' },
      h('div', {}, h('h2', {}, 'APNs'), apnsOut),
      h('div', {}, h('h2', {}, 'FCM HTTP v1'), fcmOut),
      h('div', {}, h('h2', {}, 'Web Push'), webOut),
      h('div', {}, h('h2', {}, 'Huawei Push Kit'), hmsOut),
    ),
    key.role === 'write'
      ? h('p', {}, send)
      : h('p', { class: 'muted', id: 'read-only' }, 'This is a read key: it can preview but not send.'),
    ...(key.role === 'write' ? [confirmBox] : []),
  );
  await refresh();
};
