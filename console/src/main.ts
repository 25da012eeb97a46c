import { Api, ApiError, type KeyInfo } from './api.js';
import { audiencePage, audiencesPage } from './audiences.js';
import { composePage } from './compose.js';
import { h, replace } from './dom.js';
import { notificationPage, notificationsPage } from './notifications.js';
import { overviewPage } from './overview.js';
import { errorBox, type Page, type Session } from './page.js';

// The key lives in this tab only: sessionStorage is dropped when the tab closes and is not shared with other tabs.
const KEY_STORAGE = 'pushd.console.key';

const ROUTES: [RegExp, Page][] = [
  [/^#\/overview$/, overviewPage],
  [/^#\/audiences(?:\/page\/(\d+))?$/, audiencesPage],
  [/^#\/audiences\/([\w-]+)$/, audiencePage],
  [/^#\/compose(?:\/(audience)\/([\w-]+))?$/, composePage],
  [/^#\/notifications(?:\/page\/(\d+))?$/, notificationsPage],
  [/^#\/notifications\/([\w-]+)$/, notificationPage],
];

const NAV: [string, string][] = [
  ['#/overview', 'Overview'],
  ['#/audiences', 'Audiences'],
  ['#/compose', 'Compose'],
  ['#/notifications', 'Notifications'],
];

const root = document.getElementById('app')!;
let leave: (() => void) | void;

async function signIn(key: string): Promise<Session> {
  const api = new Api(key);
  const info = await api.get<KeyInfo>('/v6/key');
  return { api, key: info };
}

function showSignIn(message = ''): void {
  const input = h('input', { type: 'password', id: 'key', autocomplete: 'off', placeholder: 'read or write key', required: true });
  const error = h('p', { class: 'error', role: 'alert', id: 'sign-in-error' }, message);
  const form = h(
    'form',
    { class: 'sign-in', id: 'sign-in' },
    h('h1', {}, 'pushd console'),
    h('label', {}, 'API key of your app', input),
    h('small', {}, 'A read key shows everything; a write key can also send. The key is kept in this tab only.'),
    error,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const session = await signIn(input.value.trim());
      sessionStorage.setItem(KEY_STORAGE, input.value.trim());
      start(session);
    } catch (err) {
      error.textContent =
        err instanceof ApiError && err.status === 401
          ? 'Unknown or revoked key.'
          : err instanceof ApiError && err.status === 403
            ? 'An sdk key cannot sign in: use a read or write key.'
            : String(err);
    }
  });
  replace(root, form);
  input.focus();
}

function start(session: Session): void {
  const main = h('main', { id: 'main' });
  const nav = h('nav', { class: 'top' }, ...NAV.map(([href, label]) => h('a', { href, 'data-nav': href }, label)));
  const signOut = h('button', { type: 'button', id: 'sign-out' }, 'Sign out');
  signOut.addEventListener('click', () => {
    sessionStorage.removeItem(KEY_STORAGE);
    window.removeEventListener('hashchange', route);
    leave?.();
    showSignIn();
  });
  replace(
    root,
    h(
      'header',
      {},
      h('strong', {}, 'pushd'),
      nav,
      h('span', { class: 'who', id: 'who' }, `${session.key.app.name} (${session.key.app.bundle_id}) · ${session.key.role} key`),
      signOut,
    ),
    main,
  );

  let current = 0;
  async function route(): Promise<void> {
    leave?.();
    leave = undefined;
    const mine = ++current;
    const hash = location.hash || '#/overview';
    for (const a of nav.querySelectorAll('a')) a.classList.toggle('active', hash.startsWith(a.getAttribute('href')!));
    const match = ROUTES.map(([re, page]) => [re.exec(hash), page] as const).find(([m]) => m);
    main.replaceChildren();
    main.setAttribute('aria-busy', 'true');
    if (!match) {
      main.append(h('p', {}, 'No such page. '), h('a', { href: '#/overview' }, 'Overview'));
    } else {
      try {
        const [m, page] = match;
        const stop = await page(
          session,
          main,
          m!.slice(1).filter((p) => p !== undefined),
        );
        if (mine !== current) return void stop?.(); // the user moved on while it loaded
        leave = stop;
      } catch (err) {
        if (mine !== current) return;
        if (err instanceof ApiError && err.status === 401) return void showSignIn('The key was revoked.');
        main.append(errorBox(err));
      }
    }
    main.removeAttribute('aria-busy');
  }
  window.addEventListener('hashchange', route);
  void route();
}

const saved = sessionStorage.getItem(KEY_STORAGE);
if (saved) signIn(saved).then(start, () => showSignIn());
else showSignIn();
