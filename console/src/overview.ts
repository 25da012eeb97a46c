import { stackedBars, type Series } from './charts.js';
import { fmt, h, pct } from './dom.js';
import type { Page } from './page.js';

interface DeviceStats {
  total: number;
  push_enabled: number;
  with_token: number;
  uninstalled_last_30_days: number;
  groups: { platform: string; environment: string; devices: number; push_enabled: number; with_token: number }[];
}
interface PushDays {
  days: { date: string; succeeded: number; failed: number; invalidated: number }[];
}

const OUTCOMES: Series[] = [
  { label: 'succeeded', className: 'succeeded' },
  { label: 'failed', className: 'failed' },
  { label: 'invalidated', className: 'invalidated' },
];

export const overviewPage: Page = async ({ api }, main) => {
  const [devices, pushes] = await Promise.all([api.get<DeviceStats>('/v6/stats/devices'), api.get<PushDays>('/v6/stats/pushes?days=30')]);
  const card = (label: string, value: string, note = '') =>
    h(
      'div',
      { class: 'card' },
      h('div', { class: 'value', 'data-stat': label }, value),
      h('div', { class: 'label' }, label),
      note && h('small', {}, note),
    );
  const sent = pushes.days.reduce((n, d) => n + d.succeeded + d.failed + d.invalidated, 0);
  main.append(
    h('h1', {}, 'Overview'),
    h(
      'div',
      { class: 'cards' },
      card('devices', fmt(devices.total)),
      card('push enabled', pct(devices.push_enabled, devices.total), `${fmt(devices.push_enabled)} devices`),
      card('with a live token', fmt(devices.with_token)),
      card('uninstalled (30 days)', fmt(devices.uninstalled_last_30_days), 'tokens the gateways rejected'),
    ),
    h('h2', {}, 'Devices by platform and environment'),
    h(
      'table',
      { id: 'device-groups' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'platform'),
          h('th', {}, 'environment'),
          h('th', { class: 'num' }, 'devices'),
          h('th', { class: 'num' }, 'push enabled'),
          h('th', { class: 'num' }, 'live token'),
        ),
      ),
      h(
        'tbody',
        {},
        ...devices.groups.map((g) =>
          h(
            'tr',
            {},
            h('td', {}, g.platform),
            h('td', {}, g.environment),
            h('td', { class: 'num' }, fmt(g.devices)),
            h('td', { class: 'num' }, pct(g.push_enabled, g.devices)),
            h('td', { class: 'num' }, fmt(g.with_token)),
          ),
        ),
        devices.groups.length === 0 && h('tr', {}, h('td', { colspan: 5 }, 'No devices yet.')),
      ),
    ),
    h('h2', {}, `Pushes per day, last 30 days (${fmt(sent)} in all)`),
    stackedBars(
      pushes.days.map((d) => d.date),
      pushes.days.map((d) => [d.succeeded, d.failed, d.invalidated]),
      OUTCOMES,
      'pushes per day by outcome',
    ),
    h('div', { class: 'legend' }, ...OUTCOMES.map((o) => h('span', { class: `key ${o.className}` }, o.label))),
  );
};
