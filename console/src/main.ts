import { Api, ApiError, type KeyInfo } from './api.js';
import { audiencePage, audiencesPage } from './audiences.js';
import { composePage } from './compose.js';
import { h, replace } from './dom.js';
import { liveActivityComposePage, liveActivityPage } from './live-activities.js';
import { notificationPage, notificationsPage } from './notifications.js';
import { overviewPage } from './overview.js';
import { settingsPage } from './settings.js';
import { journeyPage, journeysPage } from './journeys.js';
import { webhooksPage } from './webhooks.js';
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
  [/^#\/live-activities$/, liveActivityComposePage],
  [/^#\/live-activities\/([\w-]+)$/, liveActivityPage],
  [/^#\/journeys$/, journeysPage],
  [/^#\/journeys\/([\w-]+)$/, journeyPage],
  [/^#\/webhooks$/, webhooksPage],
  [/^#\/settings$/, settingsPage],
];

const NAV: [string, string][] = [
  ['#/overview', 'Overview'],
  ['#/audiences', 'Audiences'],
  ['#/compose', 'Compose'],
  ['#/notifications', 'Notifications'],
  ['#/live-activities', 'Live Activities'],
  ['#/journeys', 'Journeys'],
  ['#/webhooks', 'Webhooks'],
  ['#/settings', 'Settings'],
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
  const submit = form.querySelector('button')!;
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    // one sign-in at a time: a second submit would start a second session beside the first
    if (submit.disabled) return;
    submit.disabled = true;
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
    } finally {
      submit.disabled = false;
    }
  });
  replace(root, form);
  input.focus();
}

function start(session: Session): void {
  const main = h('main', { id: 'main' });
  const nav = h('nav', { class: 'top' }, ...NAV.map(([href, label]) => h('a', { href, 'data-nav': href }, label)));
  const signOut = h('button', { type: 'button', id: 'sign-out' }, 'Sign out');
  let current = 0; // the render under way; an older one that finishes draws nothing
  // back to the sign-in form: no route of this session draws again
  const end = (message?: string) => {
    window.removeEventListener('hashchange', route);
    current++;
    leave?.();
    leave = undefined;
    showSignIn(message);
  };
  signOut.addEventListener('click', () => {
    sessionStorage.removeItem(KEY_STORAGE);
    end();
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

  async function route(): Promise<void> {
    leave?.();
    leave = undefined;
    const mine = ++current;
    const hash = location.hash || '#/overview';
    for (const a of nav.querySelectorAll('a')) a.classList.toggle('active', hash.startsWith(a.getAttribute('href')!));
    const match = ROUTES.map(([re, page]) => [re.exec(hash), page] as const).find(([m]) => m);
    // Each render draws into a view of its own, the only one shown: a render overtaken while it awaited the API
    // draws into a view already taken out, never beside the current page.
    const view = h('div', { class: 'view' });
    main.replaceChildren(view);
    main.setAttribute('aria-busy', 'true');
    if (!match) {
      view.append(h('p', {}, 'No such page. '), h('a', { href: '#/overview' }, 'Overview'));
    } else {
      try {
        const [m, page] = match;
        const stop = await page(
          session,
          view,
          m!.slice(1).filter((p) => p !== undefined),
        );
        if (mine !== current) return void stop?.(); // the user moved on while it loaded
        leave = stop;
      } catch (err) {
        if (mine !== current) return;
        if (err instanceof ApiError && err.status === 401) return void end('The key was revoked.');
        view.append(errorBox(err));
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
