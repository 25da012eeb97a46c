import type { Audience } from './api.js';
import { debounce, fmt, h, panel, radioChoice, replace, requestPreview, when } from './dom.js';
import { FilterBuilder } from './filter-builder.js';
import { errorBox, every, type Page } from './page.js';

const POLL_MS = 500;

interface ApnsPreview {
  apns: { headers: Record<string, unknown>; body: unknown; bytes: number; max_bytes: number };
}

export interface LiveActivityRecord {
  id: string;
  created_at: string;
  state: 'scheduled' | 'sending' | 'sent' | 'failed' | 'canceled';
  event: 'start' | 'update' | 'end';
  activity_type: string | null;
  activity_id: string | null;
  channel: string | null;
  live_activity: Record<string, unknown>;
  devices_targeted: number;
  pushes_succeeded: number;
  pushes_failed: number;
  tokens_invalidated: number;
  pushes_expired: number;
  finished_at: string | null;
  failure_reason: string | null;
}

/** JSON where the text parses, else the text itself, so the API's own message names what is wrong. */
const jsonOr = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};
/** A datetime-local value as an instant in this browser's zone; what does not parse goes as typed. */
const instant = (local: string): string => (Number.isNaN(new Date(local).getTime()) ? local : new Date(local).toISOString());

/** The Live Activity form as the user sets it: what its request is made from. */
interface LiveActivityDraft {
  event: 'start' | 'update' | 'end';
  /** update and end: one activity by its id, or a broadcast channel */
  by: 'activity' | 'channel';
  /** start: to whom */
  target: 'all' | 'audience' | 'filters';
  /** each field's text by name: priority, audience, channel, activity_id, content_state, alert_title, … */
  v: Record<string, string>;
}

interface Channel {
  id: string;
  development: boolean;
}

/** The request a draft makes: the one place the form's fields become a `live_activity`. */
function requestOf(d: LiveActivityDraft, builder: FilterBuilder): { live_activity: Record<string, unknown> } {
  const { event, v } = d;
  const la: Record<string, unknown> = { event };
  const set = (k: string, value: unknown) => void (la[k] = value);
  if (event === 'start') {
    set('to', d.target === 'all' ? '*' : d.target === 'audience' ? { audience: v.audience } : builder.filters());
    set('activity_type', v.activity_type ?? '');
    set('attributes', jsonOr(v.attributes ?? ''));
  } else if (d.by === 'channel') set('channel', v.channel);
  else set('activity_id', v.activity_id ?? '');
  if (v.content_state) set('content_state', jsonOr(v.content_state));
  const alert = Object.fromEntries(['title', 'body', 'sound'].filter((k) => v[`alert_${k}`]).map((k) => [k, v[`alert_${k}`]]));
  if (Object.keys(alert).length > 0) set('alert', alert);
  if (v.stale_date) set('stale_date', instant(v.stale_date));
  if (event === 'end' && v.dismissal_date) set('dismissal_date', instant(v.dismissal_date));
  set('priority', v.priority);
  return { live_activity: la };
}

/** The form's controls, bound to a draft: an edit writes `d.v` and checks the form again; a radio also redraws it. */
function controls(d: LiveActivityDraft, edited: () => void, redraw: () => void) {
  const { v } = d;
  const field = (k: string, label: string, note = '', type = 'text') =>
    h(
      'label',
      { class: 'field' },
      h('span', {}, label),
      type === 'textarea'
        ? h('textarea', { name: k, rows: 3, oninput: (e: Event) => ((v[k] = (e.target as HTMLTextAreaElement).value), edited()) })
        : h('input', { name: k, type, oninput: (e: Event) => ((v[k] = (e.target as HTMLInputElement).value.trim()), edited()) }),
      note && h('small', {}, note),
    );
  const choose = (k: string, options: [string, string][]) =>
    h(
      'select',
      { name: k, onchange: (e: Event) => ((v[k] = (e.target as HTMLSelectElement).value), edited()) },
      ...options.map(([value, label]) => h('option', { value, selected: v[k] === value }, label)),
    );
  // a choice of the draft's `key` (its radio group is named after it): the form redraws, as the choice reshapes it
  const radio = <K extends 'event' | 'by' | 'target'>(key: K, value: LiveActivityDraft[K], label: string) =>
    radioChoice(`la-${key}`, value, label, d[key] === value, () => ((d[key] = value), redraw(), edited()));
  return { field, choose, radio };
}
type Controls = ReturnType<typeof controls>;

/** What the push goes to: for a start, the devices and the type and attributes; else the activity or channel. */
function drawWho(who: HTMLElement, d: LiveActivityDraft, c: Controls, audiences: Audience[], channels: Channel[], builder: FilterBuilder) {
  if (d.event === 'start') {
    const detail =
      d.target === 'filters'
        ? builder.element
        : d.target === 'audience'
          ? c.choose(
              'audience',
              audiences.map((a) => [a.id, a.name]),
            )
          : h('p', {}, 'Every device with a push-to-start token for the type.');
    return replace(
      who,
      h('h2', {}, 'To'),
      h(
        'div',
        { class: 'row' },
        c.radio('target', 'all', 'all devices'),
        audiences.length > 0 && c.radio('target', 'audience', 'a stored audience'),
        c.radio('target', 'filters', 'devices matching filters'),
      ),
      detail,
      c.field('activity_type', 'activity type', 'the ActivityAttributes type, e.g. DeliveryAttributes'),
      c.field('attributes', 'attributes', 'JSON object', 'textarea'),
    );
  }
  replace(
    who,
    h('h2', {}, 'Activity'),
    h(
      'div',
      { class: 'row' },
      c.radio('by', 'activity', 'one activity (its id)'),
      channels.length > 0 && c.radio('by', 'channel', 'a broadcast channel'),
    ),
    d.by === 'channel'
      ? c.choose(
          'channel',
          channels.map((ch) => [ch.id, `${ch.id}${ch.development ? ' (sandbox)' : ''}`]),
        )
      : c.field('activity_id', 'activity id', "ActivityKit's Activity.id (a UUID)"),
  );
}

/** The panels that do not change with the event: which event, and the content (`dismissal`: the end's own field). */
function eventAndContent(d: LiveActivityDraft, c: Controls, dismissal: HTMLElement): { event: HTMLElement; content: HTMLElement } {
  const event = panel('Event', h('div', { class: 'row' }, ...(['start', 'update', 'end'] as const).map((e) => c.radio('event', e, e))));
  const content = panel(
    'Content',
    h(
      'div',
      { class: 'fields' },
      c.field('content_state', 'content state', 'JSON object: the ContentState (start and update need one)', 'textarea'),
      c.field('alert_title', 'alert title'),
      c.field('alert_body', 'alert body'),
      c.field('alert_sound', 'alert sound'),
      c.field('stale_date', 'stale date', 'when iOS shows it as out of date', 'datetime-local'),
      dismissal,
      h(
        'label',
        { class: 'field' },
        h('span', {}, 'priority'),
        c.choose('priority', [
          ['high', 'high (10)'],
          ['normal', 'normal (5)'],
        ]),
      ),
    ),
  );
  return { event, content };
}

/** Compose a Live Activity start, update, end or channel broadcast, with the APNs request it becomes. */
export const liveActivityComposePage: Page = async ({ api, key }, main) => {
  const [{ audiences }, { channels }] = await Promise.all([
    api.get<{ audiences: Audience[] }>('/v6/audiences?per=1000'),
    api.get<{ channels: Channel[] }>('/v6/live-activities/channels'),
  ]);
  const d: LiveActivityDraft = {
    event: 'update',
    by: 'activity',
    target: 'all',
    v: { priority: 'high', audience: audiences[0]?.id ?? '', channel: channels[0]?.id ?? '' },
  };
  const builder = new FilterBuilder(() => update());
  const preview = h('pre', { id: 'la-preview' });
  const error = h('p', { class: 'error', id: 'la-error', role: 'alert' });
  const send = h('button', { type: 'button', id: 'la-send', class: 'primary' }, 'Send');
  let touched = false;
  let seq = 0;
  // nothing is checked before the user writes: an empty form is not an error
  const check = async () => {
    if (!touched) return;
    const mine = ++seq;
    const answer = await api.post<ApnsPreview>('/v6/live-activities/preview', requestOf(d, builder)).then(
      (p) => ({ p }),
      (err: unknown) => ({ err }),
    );
    if (mine !== seq) return;
    error.textContent = 'err' in answer ? String((answer.err as Error).message) : '';
    preview.textContent =
      'p' in answer
        ? requestPreview(answer.p.apns.headers, answer.p.apns.body, `${fmt(answer.p.apns.bytes)} of ${fmt(answer.p.apns.max_bytes)} bytes`)
        : '';
  };
  const update = debounce(() => void check(), 250);
  const edited = () => ((touched = true), update());
  const c = controls(d, edited, () => render());
  const who = h('section', { class: 'panel', id: 'la-to' });
  const dismissal = c.field('dismissal_date', 'dismissal date', 'end only: when iOS removes it', 'datetime-local');
  const render = () => {
    dismissal.hidden = d.event !== 'end';
    drawWho(who, d, c, audiences, channels, builder);
  };

  send.addEventListener('click', async () => {
    touched = true;
    send.disabled = true;
    try {
      const { live_activity } = await api.post<{ live_activity: LiveActivityRecord }>('/v6/live-activities', requestOf(d, builder));
      location.hash = `#/live-activities/${live_activity.id}`;
    } catch (err) {
      error.textContent = err instanceof Error ? err.message : String(err);
    } finally {
      send.disabled = false;
    }
  });

  render();
  const { event, content } = eventAndContent(d, c, dismissal);
  main.append(
    h('h1', {}, 'Live Activity'),
    event,
    who,
    content,
    error,
    h('section', { class: 'panel previews' }, h('div', {}, h('h2', {}, 'APNs'), preview)),
    key.role === 'write' ? h('p', {}, send) : h('p', { class: 'muted' }, 'This is a read key: it can preview but not send.'),
  );
};

/** One Live Activity push: its state and counters, polled until it is finished. */
export const liveActivityPage: Page = async ({ api }, main, [id]) => {
  const read = () => api.get<{ live_activity: LiveActivityRecord }>(`/v6/live-activities/${id}`).then((r) => r.live_activity);
  const status = h('dl', { id: 'la-status' });
  const request = h('pre', { id: 'la-request' });
  const draw = (n: LiveActivityRecord) => {
    const row = (label: string, value: string, key = label.replace(/ /g, '_')) => [
      h('dt', {}, label),
      h('dd', { 'data-field': key }, value),
    ];
    replace(
      status,
      ...row('state', n.state),
      ...row('event', n.event),
      ...row(n.channel ? 'channel' : n.activity_id ? 'activity id' : 'activity type', n.channel ?? n.activity_id ?? n.activity_type ?? ''),
      ...row('devices targeted', fmt(n.devices_targeted)),
      ...row('pushes succeeded', fmt(n.pushes_succeeded)),
      ...row('pushes failed', fmt(n.pushes_failed)),
      ...row('tokens invalidated', fmt(n.tokens_invalidated)),
      ...row('pushes expired', fmt(n.pushes_expired)),
      ...row('created', when(n.created_at)),
      ...row('finished', when(n.finished_at)),
      ...(n.failure_reason !== null ? row('failure reason', n.failure_reason) : []),
    );
    request.textContent = JSON.stringify({ live_activity: n.live_activity }, null, 2);
    return !['sent', 'failed', 'canceled'].includes(n.state);
  };
  draw(await read());
  main.append(
    h('h1', {}, 'Live Activity push'),
    h('section', { class: 'panel' }, status),
    h('section', { class: 'panel' }, h('h2', {}, 'Request'), request),
    h('p', {}, h('a', { href: '#/live-activities' }, 'Compose another')),
  );
  const errors = h('div');
  main.append(errors);
  return every(POLL_MS, async () => {
    try {
      return draw(await read());
    } catch (err) {
      replace(errors, errorBox(err));
      return false;
    }
  });
};
