import { existsSync } from 'node:fs';
import type { BrowserContext, Locator, Page } from 'playwright-core';
import { basic, createHarness, type Harness } from '../helpers/harness.js';
import { setCredentials, startGateways, type Gateways } from '../helpers/gateways.js';
import { CHROMIUM, launchChromium } from './browser.js';

// CI installs Chromium and sets REQUIRE_CHROMIUM, so there a missing browser fails instead of skipping.
export const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.REQUIRE_CHROMIUM) throw new Error(`no Chromium at ${CHROMIUM} (apt-get install chromium)`);
if (!haveChromium) process.stdout.write(`[tests] NOTICE: no Chromium at ${CHROMIUM}: the console browser tests are skipped\n`);

export type Keys = { read: string; write: string; sdk: string };
export type ApiCall = ReturnType<typeof apiOf>;

/** The real server (with its workers) listening for the browser, the mock gateways, one app and a Chromium. */
export interface ConsoleServer {
  h: Harness;
  gw: Gateways;
  base: string;
  appId: string;
  keys: Keys;
  context: BrowserContext;
  api: ApiCall;
  close(): Promise<void>;
}

export async function startConsoleServer(env: Record<string, string> = {}): Promise<ConsoleServer> {
  const gw = await startGateways();
  // the mock APNs also serves the channel management API and the broadcast endpoint (Live Activity channels)
  const apnsChannels = { APNS_CHANNELS_ORIGIN_PRODUCTION: gw.apns.origin, APNS_BROADCAST_ORIGIN_PRODUCTION: gw.apns.origin };
  const h = await createHarness({ workers: true, env: { ...gw.env, ...apnsChannels, ...env } });
  const base = await h.server.listen({ host: '127.0.0.1', port: 0 });
  const created = await h.createApp('com.example.console');
  await setCredentials(h, created.app.id, gw);
  const browser = await launchChromium();
  return {
    h,
    gw,
    base,
    appId: created.app.id,
    keys: created.keys,
    context: browser.context,
    api: apiOf(h),
    async close() {
      await browser.close();
      await h.close();
      await gw.close();
    },
  };
}

/** The public API as a test client calls it, beside the browser. */
export function apiOf(h: Harness) {
  return async (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, key: string, body?: unknown) => {
    const res = await h.server.inject({
      method,
      url,
      headers: { authorization: basic(key) },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: res.statusCode, json: res.json() };
  };
}

/** The current page has drawn (the router marks `main` busy while a page loads). */
export const loaded = (page: Page) => page.waitForSelector('main:not([aria-busy])');

export async function signIn(page: Page, base: string, key: string): Promise<void> {
  await page.goto(`${base}/console`);
  await page.fill('#key', key);
  await page.click('#sign-in button[type=submit]');
  await page.waitForSelector('#who');
  await loaded(page);
}

/** A new page, signed in with the write key, at `hash` once drawn; what goes wrong in it from the start. */
export async function openAt(s: ConsoleServer, hash: string): Promise<{ page: Page; problems: string[] }> {
  const page = await s.context.newPage();
  const problems = problemsOf(page);
  await signIn(page, s.base, s.keys.write);
  await page.goto(`${s.base}/console/${hash}`);
  await loaded(page);
  return { page, problems };
}

/** Uncaught exceptions and console errors of a page, collected from now on. */
export function problemsOf(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console.error: ${msg.text()}`);
  });
  return problems;
}

/** Compose's filter builder: filter 1 "locale is fr_FR", filter 2 on custom integer “level”, its criterion left to the caller. */
export async function localeAndLevelFilters(page: Page): Promise<Locator> {
  await page.click('#add-filter');
  await page.fill('[data-filter="0"] [data-criterion="0"] [data-field="value"]', 'fr_FR');
  await page.click('#add-filter');
  const second = page.locator('[data-filter="1"]');
  await second.locator('[data-field="filter on"]').selectOption('custom');
  await second.locator('[data-field="custom type"]').selectOption('integer');
  await second.locator('[data-field="custom-name"]').fill('level');
  return second;
}
