import type { Filter } from '../../src/domain/filters.js';
import type { Audience } from './api.js';
import { describeFilter } from './describe.js';
import { fmt, h, replace, when } from './dom.js';
import { every, type Page } from './page.js';

const PER = 50;
const COUNT_REFRESH_MS = 10_000;

/** The app's audiences with their live device counts, refreshed while the page is open. */
export const audiencesPage: Page = async ({ api }, main, [pageParam]) => {
  const page = Math.max(1, Number(pageParam) || 1);
  const { audiences } = await api.get<{ audiences: Audience[] }>(`/v6/audiences?per=${PER}&page=${page}`);
  const counts = new Map<string, HTMLElement>();
  const refresh = async () => {
    await Promise.all(
      audiences.map(async (a) => {
        const { audience } = await api.get<{ audience: { device_count: number } }>(`/v6/audiences/${a.id}`);
        counts.get(a.id)!.textContent = fmt(audience.device_count);
      }),
    );
  };
  main.append(
    h('h1', {}, 'Audiences'),
    h(
      'table',
      { id: 'audiences' },
      h('thead', {}, h('tr', {}, h('th', {}, 'name'), h('th', {}, 'created'), h('th', { class: 'num' }, 'devices now'))),
      h(
        'tbody',
        {},
        ...audiences.map((a) => {
          const cell = h('td', { class: 'num', 'data-count': a.id }, '…');
          counts.set(a.id, cell);
          return h('tr', {}, h('td', {}, h('a', { href: `#/audiences/${a.id}` }, a.name)), h('td', {}, when(a.created_at)), cell);
        }),
        audiences.length === 0 && h('tr', {}, h('td', { colspan: 3 }, 'No audiences yet: sending to filters stores one.')),
      ),
    ),
    pager('#/audiences', page, audiences.length === PER),
  );
  await refresh();
  return every(COUNT_REFRESH_MS, refresh);
};

export function pager(base: string, page: number, more: boolean): HTMLElement {
  return h(
    'nav',
    { class: 'pager' },
    page > 1 && h('a', { href: `${base}/page/${page - 1}` }, '← previous'),
    h('span', {}, `page ${page}`),
    more && h('a', { href: `${base}/page/${page + 1}` }, 'next →'),
  );
}

interface DevicePage {
  meta: { cursor: string; total: number };
  devices: { id: string; platform: string; push_enabled: boolean; user_id: string | null; installed_at?: string; locale?: string | null }[];
}

/** One audience: its count, its filters in words, its devices in cursor pages. */
export const audiencePage: Page = async ({ api }, main, [id]) => {
  const [{ audience }, definition] = await Promise.all([
    api.get<{ audience: Audience & { device_count: number } }>(`/v6/audiences/${id}`),
    api.get<{ kind: 'all' | 'filters'; filters: Filter[] | null }>(`/v6/audiences/${id}/filters`),
  ]);
  const devices = h('div', { id: 'audience-devices' });
  const cursors: (string | null)[] = [null];
  const per = 20;
  const show = async (index: number) => {
    const cursor = cursors[index];
    const q = `per=${per}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const pageOf = await api.get<DevicePage>(`/v6/audiences/${id}/devices?${q}`);
    cursors[index + 1] = pageOf.meta.cursor;
    replace(
      devices,
      h(
        'table',
        {},
        h('thead', {}, h('tr', {}, h('th', {}, 'device'), h('th', {}, 'platform'), h('th', {}, 'user'), h('th', {}, 'push enabled'))),
        h(
          'tbody',
          {},
          ...pageOf.devices.map((d) =>
            h(
              'tr',
              {},
              h('td', { class: 'mono' }, d.id),
              h('td', {}, d.platform),
              h('td', {}, d.user_id ?? '—'),
              h('td', {}, d.push_enabled ? 'yes' : 'no'),
            ),
          ),
        ),
      ),
      h(
        'nav',
        { class: 'pager' },
        index > 0 && h('button', { type: 'button', onclick: () => show(index - 1) }, '← previous'),
        h('span', {}, `page ${index + 1} of ${Math.max(1, Math.ceil(pageOf.meta.total / per))}`),
        // every page has a cursor, the last one too: there is more while the pages so far hold fewer than the total
        (index + 1) * per < pageOf.meta.total && h('button', { type: 'button', onclick: () => show(index + 1) }, 'next →'),
      ),
    );
  };
  main.append(
    h('p', {}, h('a', { href: '#/audiences' }, '← audiences')),
    h('h1', {}, audience.name),
    h('p', {}, h('strong', { id: 'audience-count' }, fmt(audience.device_count)), ' devices now · created ', when(audience.created_at)),
    h('h2', {}, 'Who is in it'),
    definition.filters === null
      ? h('p', {}, 'Every device of the app.')
      : h('ul', { class: 'filters', id: 'audience-filters' }, ...definition.filters.map((f) => h('li', {}, describeFilter(f)))),
    h('p', {}, h('a', { href: `#/compose/audience/${audience.id}` }, 'Compose a notification to this audience')),
    h('h2', {}, 'Devices'),
    devices,
  );
  await show(0);
};
