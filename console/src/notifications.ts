import type { NotificationRecord } from './api.js';
import { pager } from './audiences.js';
import { line } from './charts.js';
import { describeTarget } from './describe.js';
import { fmt, h, replace, when } from './dom.js';
import { every, type Page } from './page.js';
import { quietText } from './settings.js';

const PER = 50;
const LIST_REFRESH_MS = 3_000;
const LIVE_POLL_MS = 500;

interface AbShareStats {
  sent: number;
  direct_opens: number;
  direct_open_rate: number;
  conversions: Record<string, number>;
}
/** A variant's test share, with its app opens in the window and its lift over the holdout (null: no baseline). */
interface AbVariantStats extends AbShareStats {
  variant: number;
  app_opened: number;
  app_open_rate: number;
  lift: { app_opens: number | null; conversions: Record<string, number | null> };
}
/** The holdout: sent nothing; its app opens and conversions in the same window. */
interface AbHoldoutStats {
  devices: number;
  app_opened: number;
  app_open_rate: number;
  conversions: Record<string, number>;
}
/** `ab_test` of GET /v6/stats/notifications/:id/events. */
interface AbTestStats {
  stage: 'test' | 'waiting' | 'rest';
  metric: string;
  winner_due_at: string | null;
  winner: number | null;
  winner_picked_at: string | null;
  test_fraction: number;
  holdout_fraction: number;
  window_hours: number;
  variants: AbVariantStats[];
  rest: AbShareStats & { variant: number | null };
  holdout: AbHoldoutStats;
}

const finished = (n: NotificationRecord) => n.state === 'sent' || n.state === 'failed' || n.state === 'canceled';
const payloadOf = (n: NotificationRecord): Record<string, unknown> =>
  n.notification?.payload ?? n.notification?.variants?.[0]?.payload ?? {};
/** What the device shows: the alert, else the title or subtitle, else the payload's keys (a background push). */
const textOf = (n: NotificationRecord): string => {
  const p = payloadOf(n);
  const shown = [p.alert, p.title, p.subtitle].find((v) => typeof v === 'string' && v !== '');
  return (shown as string | undefined) ?? (Object.keys(p).join(', ') || '(empty payload)');
};
const targetOf = (n: NotificationRecord) => describeTarget(n.notification?.to, n.notification?.extra_filters);
/** When it goes: now, at an instant, or at a wall time on each device's clock (send_at is then the first zone's). */
const timingOf = (n: NotificationRecord): string =>
  n.local_time ? 'local time' : n.send_at && n.state === 'scheduled' ? `at ${when(n.send_at)}` : '';

/** The app's notifications, newest first, with their state; refreshed while any is still going out. */
export const notificationsPage: Page = async ({ api }, main, [pageParam]) => {
  const page = Math.max(1, Number(pageParam) || 1);
  const body = h('tbody');
  const load = async () => {
    const { notifications } = await api.get<{ notifications: NotificationRecord[] }>(`/v6/notifications?per=${PER}&page=${page}`);
    replace(
      body,
      ...notifications.map((n) =>
        h(
          'tr',
          {},
          h('td', {}, h('a', { href: `#/notifications/${n.id}` }, when(n.created_at))),
          h('td', { class: 'to' }, targetOf(n).summary),
          h('td', { class: 'text' }, textOf(n)),
          h('td', {}, h('span', { class: `state ${n.state}` }, n.state), timingOf(n) && h('small', { class: 'timing' }, ` ${timingOf(n)}`)),
          h('td', { class: 'num' }, fmt(n.devices_targeted)),
          h('td', { class: 'num' }, fmt(n.pushes_succeeded)),
          h('td', { class: 'num' }, fmt(n.pushes_failed)),
        ),
      ),
      notifications.length === 0 && h('tr', {}, h('td', { colspan: 7 }, 'Nothing sent yet.')),
    );
    return notifications;
  };
  const first = await load();
  main.append(
    h('h1', {}, 'Notifications'),
    h(
      'table',
      { id: 'notifications' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'created'),
          h('th', {}, 'to'),
          h('th', {}, 'text'),
          h('th', {}, 'state'),
          h('th', { class: 'num' }, 'targeted'),
          h('th', { class: 'num' }, 'succeeded'),
          h('th', { class: 'num' }, 'failed'),
        ),
      ),
      body,
    ),
    pager('#/notifications', page, first.length === PER),
  );
  return every(LIST_REFRESH_MS, async () => void (await load()));
};

/** The delivery at a glance: its state and progress, a bar of succeeded / failed / invalidated, and their counts. */
function progressView(n: NotificationRecord): HTMLElement[] {
  const invalidated = n.tokens_invalidated;
  const failed = n.pushes_failed - invalidated;
  const done = n.pushes_succeeded + n.pushes_failed;
  const whole = Math.max(n.devices_targeted, done, 1);
  const share = (v: number) => `${((v / whole) * 100).toFixed(2)}%`;
  const progress = n.devices_targeted === 0 ? (finished(n) ? 100 : 0) : Math.min(100, Math.floor((done / n.devices_targeted) * 100));
  return [
    h(
      'p',
      {},
      h('span', { class: `state ${n.state}`, id: 'state' }, n.state),
      ' ',
      h('strong', { id: 'progress' }, `${progress} %`),
      ` of ${fmt(n.devices_targeted)} devices targeted`,
      n.devices_not_allowed
        ? h('span', { id: 'not-allowed' }, ` (${fmt(n.devices_not_allowed)} more with notifications Disabled: not sent)`)
        : null,
    ),
    h(
      'div',
      { class: 'progress', role: 'progressbar', 'aria-valuenow': progress, 'aria-valuemin': 0, 'aria-valuemax': 100 },
      h('div', { class: 'succeeded', style: { width: share(n.pushes_succeeded) } }),
      h('div', { class: 'failed', style: { width: share(failed) } }),
      h('div', { class: 'invalidated', style: { width: share(invalidated) } }),
    ),
    h(
      'div',
      { class: 'legend' },
      h('span', { class: 'key succeeded', id: 'succeeded' }, `${fmt(n.pushes_succeeded)} succeeded`),
      h('span', { class: 'key failed', id: 'failed' }, `${fmt(failed)} failed`),
      h('span', { class: 'key invalidated', id: 'invalidated' }, `${fmt(invalidated)} invalidated`),
    ),
  ];
}

/** How it was sent: when, under which quiet hours, caps and pace, how it ended, and to whom. */
function deliveryDetails(n: NotificationRecord): HTMLElement {
  return h(
    'dl',
    {},
    h('dt', {}, 'created'),
    h('dd', {}, when(n.created_at)),
    h('dt', {}, 'published'),
    h('dd', {}, when(n.published_at)),
    n.send_at && h('dt', {}, n.local_time ? 'first zone at' : 'send at'),
    n.send_at && h('dd', { id: 'send-at' }, when(n.send_at)),
    n.local_time && h('dt', {}, 'skipped (time already past)'),
    n.local_time && h('dd', {}, fmt(n.skipped_past_local_time)),
    h('dt', {}, 'quiet hours'),
    h(
      'dd',
      { id: 'quiet-hours' },
      n.notification.quiet_hours === undefined ? "the app's, if any" : quietText(n.notification.quiet_hours),
      n.skipped_quiet_hours ? ` (${fmt(n.skipped_quiet_hours)} dropped)` : '',
    ),
    h('dt', {}, 'frequency caps'),
    h('dd', { id: 'capped' }, n.notification.cap === false ? 'not applied' : `${fmt(n.pushes_capped ?? 0)} devices at a cap, not sent to`),
    n.throttle && h('dt', {}, 'pace'),
    n.throttle && h('dd', {}, `${fmt(n.throttle.per_minute)} a minute`),
    n.estimated_finish_at && h('dt', {}, 'estimated finish'),
    n.estimated_finish_at && h('dd', {}, when(n.estimated_finish_at)),
    h('dt', {}, n.state === 'canceled' ? 'canceled' : 'finished'),
    h('dd', {}, when(n.finished_at)),
    n.failure_reason && h('dt', {}, 'failure'),
    n.failure_reason && h('dd', {}, n.failure_reason),
    h('dt', {}, 'to'),
    h('dd', { id: 'notification-to' }, targetOf(n).summary),
    n.group && h('dt', {}, 'group'),
    n.group && h('dd', { id: 'notification-group' }, n.group),
    // a transactional send stores no audience
    n.to?.id && h('dt', {}, 'audience'),
    n.to?.id && h('dd', {}, h('a', { href: `#/audiences/${n.to.id}` }, n.to.id)),
  );
}

// a rate of the test's figures, to two decimals (dom's `pct` is a part of a whole, to one)
const percent = (r: number) => `${(r * 100).toFixed(2)} %`;
const signed = (r: number | null) => (r === null ? '—' : `${r >= 0 ? '+' : ''}${(r * 100).toFixed(2)} %`);
const letter = (i: number) => String.fromCharCode(65 + i);
const conversionsText = (c: Record<string, number>) =>
  Object.entries(c)
    .map(([k, v]) => `${k}: ${fmt(v)}`)
    .join(', ') || '—';
const liftText = (v: AbVariantStats) =>
  [`app opens ${signed(v.lift.app_opens)}`, ...Object.entries(v.lift.conversions).map(([k, r]) => `${k} ${signed(r)}`)].join(', ');
const appOpens = (opened: number, rate: number) => `${fmt(opened)} (${percent(rate)})`;

/** One share of the test (a variant, or the rest) as a row; a variant's also has its app opens and lift. */
const abRow = (label: string, attrs: Record<string, string>, s: AbShareStats, pick: HTMLElement | null = null, v?: AbVariantStats) =>
  h(
    'tr',
    attrs,
    h('td', {}, label),
    h('td', { class: 'num' }, fmt(s.sent)),
    h('td', { class: 'num' }, fmt(s.direct_opens)),
    h('td', { class: 'num' }, percent(s.direct_open_rate)),
    h('td', { class: 'num' }, v ? appOpens(v.app_opened, v.app_open_rate) : '—'),
    h('td', {}, conversionsText(s.conversions)),
    h('td', { class: 'lift' }, v ? liftText(v) : '—'),
    h('td', {}, pick),
  );

// the baseline: sent nothing, so no opens of a push; its app opens and conversions in the same window
const holdoutRow = (ab: AbTestStats) =>
  h(
    'tr',
    { 'data-variant': 'holdout' },
    h('td', {}, `holdout (${percent(ab.holdout_fraction)}, sent nothing)`),
    h('td', { class: 'num' }, `${fmt(ab.holdout.devices)} devices`),
    h('td', { class: 'num' }, '—'),
    h('td', { class: 'num' }, '—'),
    h('td', { class: 'num' }, appOpens(ab.holdout.app_opened, ab.holdout.app_open_rate)),
    h('td', {}, conversionsText(ab.holdout.conversions)),
    h('td', { class: 'lift' }, 'baseline'),
    h('td', {}, null),
  );

/** Where the test stands, in words: its test share going out, waiting for a winner, or the winner going to the rest. */
const abStage = (ab: AbTestStats) =>
  ab.stage === 'test'
    ? 'sending the test share'
    : ab.stage === 'waiting'
      ? ab.winner_due_at
        ? `waiting: the winner by ${ab.metric} is picked at ${when(ab.winner_due_at)}`
        : 'waiting for a winner to be picked'
      : `variant ${letter(ab.winner ?? 0)} won (${when(ab.winner_picked_at)}) and goes to the rest`;

/** An A/B test's figures per variant, the rest and the holdout; `pickButton` (null: none) picks a variant as the winner. */
function abTestView(ab: AbTestStats, pickButton: ((variant: number) => HTMLElement) | null): HTMLElement[] {
  return [
    h('h2', {}, 'A/B test'),
    h('p', { id: 'ab-stage' }, abStage(ab)),
    h(
      'table',
      { id: 'ab-variants' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'variant'),
          ...['sent', 'direct opens', 'open rate', `app opens in ${ab.window_hours} h`].map((t) => h('th', { class: 'num' }, t)),
          ...['conversions', 'lift over the holdout', ''].map((t) => h('th', {}, t)),
        ),
      ),
      h(
        'tbody',
        {},
        ...ab.variants.map((v) =>
          abRow(
            `${letter(v.variant)} (test, ${percent(ab.test_fraction / ab.variants.length)})`,
            { 'data-variant': String(v.variant) },
            v,
            pickButton ? pickButton(v.variant) : null,
            v,
          ),
        ),
        abRow(`rest${ab.rest.variant === null ? '' : `: ${letter(ab.rest.variant)}`}`, { 'data-variant': 'rest' }, ab.rest),
        holdoutRow(ab),
      ),
    ),
    h(
      'p',
      { class: 'muted', id: 'ab-holdout' },
      `holdout: ${fmt(ab.holdout.devices)} devices sent nothing (${percent(ab.holdout_fraction)}); app opens and conversions ` +
        `count within ${ab.window_hours} h of the push, or, for the holdout, of when the test met it`,
    ),
  ];
}

/** Pushes per second as a line, with its peak; with no rate yet, a note why. */
function rateView(rates: { t: number; v: number }[], firstSeenFinished: boolean): Node[] {
  if (rates.length === 0) {
    const note = firstSeenFinished
      ? 'It had finished before this page opened: the rate is drawn only while a delivery is watched.'
      : 'Waiting for pushes…';
    return [h('p', { class: 'muted' }, note)];
  }
  const peak = Math.max(...rates.map((r) => r.v));
  return [line(rates, 'pushes per second'), h('p', { class: 'muted' }, `peak ${fmt(Math.round(peak))} pushes/s`)];
}

/**
 * One notification's delivery, live: a progress bar of succeeded / failed / invalidated against targeted, and
 * pushes per second (from the counters between two polls), polled until the notification finishes.
 */
export const notificationPage: Page = async ({ api, key }, main, [id]) => {
  const status = h('div', { id: 'delivery' });
  const abBox = h('div', { id: 'ab-test' });
  const rateBox = h('div', { id: 'rate' });
  const samples: { t: number; done: number }[] = [];
  const rates: { t: number; v: number }[] = [];
  let firstSeenFinished = false;

  const draw = (n: NotificationRecord) =>
    replace(
      status,
      ...progressView(n),
      deliveryDetails(n),
      key.role === 'write' && !finished(n) ? h('p', {}, cancel) : null,
      h('h2', {}, 'Payload'),
      h('p', { id: 'notification-text' }, textOf(n)),
      h('pre', { id: 'payload' }, JSON.stringify(payloadOf(n), null, 2)),
    );
  const cancel = h('button', { type: 'button', id: 'cancel' }, 'Cancel');
  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    draw(
      await api
        .delete<NotificationRecord>(`/v6/notifications/${id}`)
        .catch((err) => (alert(String(err)), api.get(`/v6/notifications/${id}`))),
    );
  });

  /** An A/B test's figures per variant, and (write key, while it waits) a button to pick each as the winner. */
  const drawAbTest = async (n: NotificationRecord) => {
    const ab = (await api.get<{ ab_test?: AbTestStats }>(`/v6/stats/notifications/${id}/events`)).ab_test;
    if (!ab) return;
    const canPick = key.role === 'write' && ab.stage === 'waiting' && !finished(n);
    const pickButton = (i: number) => {
      const b = h('button', { type: 'button', 'data-pick': String(i) }, `Send ${letter(i)} to the rest`);
      b.addEventListener('click', async () => {
        b.disabled = true;
        await api.post(`/v6/notifications/${id}/winner`, { variant: i }).catch((err) => alert(String(err)));
        void poll();
      });
      return b;
    };
    replace(abBox, ...abTestView(ab, canPick ? pickButton : null));
  };

  const poll = async () => {
    const n = await api.get<NotificationRecord>(`/v6/notifications/${id}`);
    if (n.notification?.variants) await drawAbTest(n);
    const now = performance.now();
    const done = n.pushes_succeeded + n.pushes_failed;
    const last = samples[samples.length - 1];
    if (samples.length === 0 && finished(n)) firstSeenFinished = true;
    if (last) rates.push({ t: now - samples[0]!.t, v: ((done - last.done) * 1000) / Math.max(1, now - last.t) });
    else if (!firstSeenFinished) rates.push({ t: 0, v: 0 });
    samples.push({ t: now, done });
    draw(n);
    replace(rateBox, ...rateView(rates, firstSeenFinished));
    return !finished(n);
  };

  main.append(
    h('p', {}, h('a', { href: '#/notifications' }, '← notifications')),
    h('h1', {}, `Notification ${id}`),
    status,
    abBox,
    h('h2', {}, 'Pushes per second'),
    rateBox,
  );
  if (!(await poll())) return;
  return every(LIVE_POLL_MS, poll);
};
