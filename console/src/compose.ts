import { ApiError, type Api, type Audience } from './api.js';
import {
  abSection,
  payloadSection,
  previewSection,
  targetSection,
  type AbSection,
  type ComposeForm,
  type PayloadSection,
  type Preview,
  type PreviewSection,
  type TargetSection,
} from './compose-sections.js';
import { whenSection, type WhenSection } from './compose-when.js';
import { debounce, h } from './dom.js';
import type { Page } from './page.js';
import { capsText, quietText, type AppSettings } from './settings.js';
import { storedTemplates } from './template-picker.js';

/** The form as checked, ready to send: the devices its target counts now. */
interface Ready {
  devices: number;
}

/** The compose page's sections and the state of its checks, as the checks and the send use them. */
interface Compose {
  readonly form: ComposeForm;
  readonly target: TargetSection;
  readonly payload: PayloadSection;
  readonly when: WhenSection;
  readonly ab: AbSection;
  readonly previews: PreviewSection;
  /** a message no field names */
  readonly general: HTMLElement;
  /** The payload is checked once the user has written in it or pressed Send, not on the empty form. */
  touched: boolean;
  /** a send is under way: Send stays off until it ends */
  sending: boolean;
  /** what the last check found keeps Send from going */
  blocked: boolean;
  /** the number of the latest check, and its answer: an older one that finishes answers the latest's */
  seq: number;
  newest: Promise<Ready | null>;
}

/** Compose: target, filters with a live device count, every payload field, the mapped pushes, send. */
export const composePage: Page = async ({ api, key }, main, params) => {
  const [{ audiences }, settings, templates] = await Promise.all([
    api.get<{ audiences: Audience[] }>('/v6/audiences?per=1000'),
    api.get<AppSettings>('/v6/app'),
    storedTemplates(api),
  ]);
  const update = debounce(() => void refresh(), 250);
  const form: ComposeForm = {
    fieldErrors: new Map(),
    send: h('button', { type: 'button', id: 'send', class: 'primary' }, 'Send'),
    update,
    editedPayload: () => ((c.touched = true), update()),
  };
  const c: Compose = {
    form,
    target: targetSection(api, form, audiences, params),
    payload: payloadSection(form, templates),
    when: whenSection(form, { quiet: quietText(settings.quiet_hours), caps: capsText(settings.frequency_caps) }),
    ab: abSection(),
    previews: previewSection(),
    general: h('p', { class: 'error', id: 'compose-error', role: 'alert' }),
    touched: false,
    sending: false,
    blocked: true,
    seq: 0,
    newest: Promise.resolve(null),
  };
  /** Counts the target and previews the payload, showing what is wrong; answers the count when all is well. */
  const refresh = (): Promise<Ready | null> => (c.newest = check(api, c, ++c.seq));
  const confirm = confirmDialog();
  sendOnConfirm(api, c, refresh, confirm.ask);
  main.append(
    h('h1', {}, 'Compose'),
    c.target.element,
    c.payload.element,
    c.when.element,
    c.ab.element,
    c.general,
    c.previews.element,
    key.role === 'write'
      ? h('p', {}, form.send)
      : h('p', { class: 'muted', id: 'read-only' }, 'This is a read key: it can preview but not send.'),
    ...(key.role === 'write' ? [confirm.element] : []),
  );
  await refresh();
};

/** The request as sent: the target, the template or the payload (or its variants), the timing and the limits. */
function requestBody(c: Compose): unknown {
  const templateId = c.payload.templateId();
  const content = templateId ? { template_id: templateId } : c.ab.content(c.payload.payload());
  return { notification: { to: c.target.to(), ...content, ...c.when.body() } };
}

/** Check number `mine`: counts the target, previews the payload, shows what is wrong; the count when all is well. */
async function check(api: Api, c: Compose, mine: number): Promise<Ready | null> {
  const counting = JSON.stringify(c.target.to(), null, 2);
  const countCall = c.target.count();
  // The payload is previewed on its own ("*"), so filter problems (named by the count) and payload problems
  // (named by the preview) show at once, each under its own field; the send validates both together again.
  const templateId = c.payload.templateId();
  const unwritten = !c.touched && !templateId && Object.keys(c.payload.payload()).length === 0;
  const what = templateId ? { template_id: templateId } : { payload: c.payload.payload() };
  const previewCall = unwritten
    ? Promise.resolve(null)
    : api.post<Preview>('/v6/notifications/preview', { notification: { to: '*', ...what } });
  const [counted, previewed] = await Promise.allSettled([countCall, previewCall]);
  if (mine !== c.seq) return c.newest; // a newer edit is on its way: its answer is the one that counts
  const noFilters = c.target.unset();
  c.target.showCount(counted, counting, noFilters);
  c.general.textContent = '';
  c.target.builder.clearErrors();
  for (const slot of c.form.fieldErrors.values()) slot.textContent = '';
  if (counted.status === 'rejected') showError(c, counted.reason);
  if (previewed.status === 'rejected') showError(c, previewed.reason);
  else c.previews.show(previewed.value); // null: nothing written yet, nothing to preview
  c.blocked = noFilters || counted.status === 'rejected' || previewed.status === 'rejected';
  c.form.send.disabled = c.sending || c.blocked;
  return !noFilters && counted.status === 'fulfilled' && previewed.status === 'fulfilled' && previewed.value
    ? { devices: counted.value }
    : null;
}

/** "notification.payload.badge: must be …" goes under the badge field; filter errors under their filter. */
function showError(c: Compose, err: unknown): void {
  const message = err instanceof Error ? err.message : String(err);
  const m = /^([\w.[\]-]+): (.*)$/.exec(message);
  if (m && err instanceof ApiError && err.status === 400) {
    const [, path, text] = m as unknown as [string, string, string];
    const abField = /^notification\.(variants|test_fraction|holdout_fraction|winner)\b/.test(path) ? c.ab.error : undefined;
    if (abField) return void (abField.textContent = `${path.slice(13)}: ${text}`);
    const fieldErrors = c.form.fieldErrors;
    const field = fieldErrors.get(path) ?? (path.startsWith('notification.payload.') ? fieldErrors.get('custom') : undefined);
    if (field)
      return void (field.textContent =
        path.startsWith('notification.payload.') && !fieldErrors.has(path) ? `${path.slice(21)}: ${text}` : text);
    if (c.target.builder.showError(path, text)) return;
  }
  c.general.textContent = message;
}

/** Send checks the form now (the payload too, written or not), then asks, naming how many devices it goes to. */
function sendOnConfirm(
  api: Api,
  c: Compose,
  refresh: () => Promise<Ready | null>,
  confirmed: (text: string, verb: string) => Promise<boolean>,
): void {
  const send = c.form.send;
  send.addEventListener('click', async () => {
    c.touched = true;
    c.sending = true;
    send.disabled = true;
    try {
      const ready = await refresh();
      if (!ready) return;
      if (c.when.unscheduled()) return;
      if (!(await confirmed(c.when.question(ready.devices), c.when.verb()))) return;
      const created = await api.post<{ id: string }>('/v6/notifications', requestBody(c));
      location.hash = `#/notifications/${created.id}`;
    } catch (err) {
      showError(c, err);
    } finally {
      c.sending = false;
      send.disabled = c.blocked;
    }
  });
}

/** A modal dialog that asks; `ask` answers true only for its confirming button (Cancel and Escape answer false). */
function confirmDialog(): { element: HTMLDialogElement; ask(text: string, verb: string): Promise<boolean> } {
  const text = h('p', { id: 'confirm-text' });
  const confirm = h('button', { type: 'button', id: 'confirm-send', class: 'primary', onclick: () => box.close('send') });
  const box = h(
    'dialog',
    { id: 'confirm' },
    text,
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'button', id: 'confirm-cancel', onclick: () => box.close('cancel') }, 'Cancel'),
      confirm,
    ),
  );
  const ask = (question: string, verb: string) =>
    new Promise<boolean>((resolve) => {
      text.textContent = question;
      confirm.textContent = verb;
      box.returnValue = '';
      box.addEventListener('close', () => resolve(box.returnValue === 'send'), { once: true });
      box.showModal();
    });
  return { element: box, ask };
}
