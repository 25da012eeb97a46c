import { errorSlot, fmt, h, panel, radioChoice } from './dom.js';
import type { ComposeForm } from './compose-sections.js';

/** The "When" panel: when and how fast it goes, under which quiet hours, and whether the app's caps apply. */
export interface WhenSection {
  readonly element: HTMLElement;
  /** send_at, local_time, throttle, quiet_hours and cap, as the request takes them */
  body(): Record<string, unknown>;
  /** what Send does: 'Send' now, else 'Schedule' */
  verb(): 'Send' | 'Schedule';
  /** the question asked before it goes to `devices` devices */
  question(devices: number): string;
  /** a time is to be chosen and none is: says so under the field */
  unscheduled(): boolean;
}

/** The app's own limits in words, as the choices that keep them name them. */
export interface AppLimits {
  quiet: string;
  caps: string;
}

/** Builds the "When" panel: now, as fast as possible, under the app's quiet hours and caps until changed. */
export function whenSection(form: ComposeForm, app: AppLimits): WhenSection {
  const timing = timingFields(form);
  const limits = limitFields(form, app);
  return {
    element: panel('When', ...timing.elements, ...limits.elements),
    body: () => ({ ...timing.body(), ...limits.body() }),
    verb: timing.verb,
    question: timing.question,
    unscheduled: timing.unscheduled,
  };
}

const devicesIn = (n: number) => `${fmt(n)} device${n === 1 ? '' : 's'}`;

/** When and how fast: now, at an instant (the browser's own offset), or at a wall time on each device's clock. */
function timingFields(form: ComposeForm): Omit<WhenSection, 'element'> & { elements: HTMLElement[] } {
  let when: 'now' | 'at' | 'local' = 'now';
  let sendAt = '';
  let perMinute = '';
  const whenErr = errorSlot(form.fieldErrors, 'notification.send_at');
  const paceErr = errorSlot(form.fieldErrors, 'notification.throttle.per_minute');
  form.fieldErrors.set('notification.throttle', paceErr);
  const sendAtInput = h('input', {
    type: 'datetime-local',
    id: 'send-at',
    disabled: true,
    oninput: (e: Event) => (sendAt = (e.target as HTMLInputElement).value),
  });
  const verb = () => (when === 'now' ? 'Send' : 'Schedule');
  const choice = (value: typeof when, label: string) =>
    radioChoice('when', value, label, when === value, () => {
      when = value;
      sendAtInput.disabled = value === 'now';
      form.send.textContent = verb();
    });
  const elements = [
    h(
      'div',
      { class: 'row' },
      choice('now', 'now'),
      choice('at', 'at a time (this browser’s zone)'),
      choice('local', "at this time on each device's clock"),
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
  ];
  return {
    elements,
    body: () => ({
      ...(when === 'at' && sendAt ? { send_at: new Date(sendAt).toISOString() } : {}),
      ...(when === 'local' && sendAt ? { send_at: sendAt, local_time: true } : {}),
      ...(when !== 'now' && !sendAt ? { send_at: '' } : {}),
      ...(perMinute ? { throttle: { per_minute: Number(perMinute) } } : {}),
    }),
    verb,
    question: (devices) => {
      if (when === 'now') return `Send this notification now to ${devicesIn(devices)}?`;
      const at = `${sendAt.replace('T', ' ')} ${when === 'local' ? "on each device's clock" : '(this browser’s time)'}`;
      return `Schedule this notification for ${at}? Its target counts ${devicesIn(devices)} now; it is counted again when it goes out.`;
    },
    unscheduled: () => {
      if (when === 'now' || sendAt) return false;
      whenErr.textContent = 'choose a date and time';
      return true;
    },
  };
}

/** The app's quiet hours and caps, or this notification's own quiet hours, none, or no caps. */
function limitFields(form: ComposeForm, app: AppLimits): { elements: HTMLElement[]; body: () => Record<string, unknown> } {
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
  const quietErr = errorSlot(form.fieldErrors, 'notification.quiet_hours');
  for (const path of ['.start', '.end', '.then']) form.fieldErrors.set(`notification.quiet_hours${path}`, quietErr);
  const choice = (value: typeof quiet, label: string) =>
    radioChoice('quiet', value, label, quiet === value, () => {
      quiet = value;
      for (const input of [quietStart, quietEnd, quietThen]) input.disabled = value !== 'own';
    });
  const elements = [
    h('h3', {}, 'Quiet hours'),
    h(
      'div',
      { class: 'row', id: 'quiet-choice' },
      choice('app', `the app's (${app.quiet})`),
      choice('none', 'none for this one'),
      choice('own', 'these:'),
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
      ` apply the app's caps (${app.caps}); unticked, it goes to devices at a cap and takes no slot`,
    ),
  ];
  const body = () => ({
    ...(quiet === 'none' ? { quiet_hours: false } : {}),
    ...(quiet === 'own' ? { quiet_hours: { start: quietStart.value, end: quietEnd.value, then: quietThen.value } } : {}),
    ...(capped ? {} : { cap: false }),
  });
  return { elements, body };
}
