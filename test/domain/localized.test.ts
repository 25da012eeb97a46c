import { describe, expect, it } from 'vitest';
import { LOCALIZED_MAX_ENTRIES, localeVariant, localizedPayload } from '../../src/domain/localized.js';
import { notificationRequestSchema } from '../../src/domain/notification-request.js';

const parse = (localized: unknown, payload: Record<string, unknown> = { alert: 'Hello' }) =>
  notificationRequestSchema.safeParse({ notification: { to: '*', payload, localized } });
const firstError = (localized: unknown, payload?: Record<string, unknown>) => {
  const r = parse(localized, payload);
  if (r.success) return null;
  const issue = r.error.issues[0]!;
  return `${issue.path.join('.')}: ${issue.message}`;
};

describe('localeVariant', () => {
  const localized = { fr: { alert: 'Bonjour' }, fr_CA: { alert: 'Allô' }, pt_BR: { alert: 'Olá' } };
  it('picks the locale, else its language, else none', () => {
    expect(localeVariant(localized, 'fr_CA')).toBe('fr_CA');
    expect(localeVariant(localized, 'fr_FR')).toBe('fr');
    expect(localeVariant(localized, 'pt_BR')).toBe('pt_BR');
    expect(localeVariant(localized, 'pt_PT')).toBeNull();
    expect(localeVariant(localized, 'en_US')).toBeNull();
    expect(localeVariant(localized, null)).toBeNull();
    expect(localeVariant(null, 'fr_FR')).toBeNull();
  });
});

describe('localizedPayload', () => {
  it('replaces the text, merges web key by key, and keeps everything else', () => {
    const payload = { alert: 'Hello', title: 'Hi', sound: 'a.caf', badge: 2, deep: 'x://y', web: { icon: '/i.png', url: '/en' } };
    expect(localizedPayload(payload, { alert: 'Bonjour', web: { url: '/fr', lang: 'fr' } })).toEqual({
      alert: 'Bonjour',
      title: 'Hi',
      sound: 'a.caf',
      badge: 2,
      deep: 'x://y',
      web: { icon: '/i.png', url: '/fr', lang: 'fr' },
    });
    expect(localizedPayload(payload, undefined)).toBe(payload);
  });
});

describe('the localized field of a request', () => {
  it("reads keys in the devices' locale form", () => {
    const r = parse({ FR: { alert: 'a' }, 'pt-br': { title: 'b' }, es_mx: { subtitle: 'c' } });
    expect(r.success && r.data.notification.localized).toEqual({ fr: { alert: 'a' }, pt_BR: { title: 'b' }, es_MX: { subtitle: 'c' } });
  });

  it('refuses what is not a language, an entry of other keys, an empty one, and twice the same language', () => {
    expect(firstError({ french: { alert: 'a' } })).toBe(
      'notification.localized.french: must be a language (fr) or <language>_<COUNTRY> (pt_BR)',
    );
    expect(firstError({ fr: { sound: 'a.caf' } })).toMatch(/^notification\.localized\.fr: Unrecognized key: "sound"/);
    expect(firstError({ fr: {} })).toBe('notification.localized.fr: must not be empty');
    expect(firstError({ fr: 'Bonjour' })).toBe('notification.localized.fr: must be an object of alert, title, subtitle, web');
    expect(firstError({ fr: { alert: 1 } })).toBe('notification.localized.fr.alert: must be a string');
    expect(firstError({ pt_BR: { alert: 'a' }, 'pt-BR': { alert: 'b' } })).toBe(
      'notification.localized.pt-BR: names the same language as another key (pt_BR)',
    );
    expect(firstError({})).toBe('notification.localized: must hold at least one language');
    expect(firstError([])).toMatch(/^notification\.localized: must be an object of languages/);
    const many = Object.fromEntries(
      Array.from({ length: LOCALIZED_MAX_ENTRIES + 1 }, (_, i) => [
        String.fromCharCode(97 + (Math.floor(i / 26) % 26)) + String.fromCharCode(97 + (i % 26)),
        { alert: 'x' },
      ]),
    );
    expect(firstError(many)).toBe(`notification.localized: must hold at most ${LOCALIZED_MAX_ENTRIES} languages`);
  });

  it('checks each language as the payload it makes: its size for every gateway, and the web rules', () => {
    expect(firstError({ fr: { alert: 'é'.repeat(2100) } })).toMatch(
      /^notification\.localized\.fr: is too large: it maps to an APNs payload of \d+ bytes .* and an FCM message of \d+ bytes/,
    );
    // small alone, too large with the payload's custom data, which every language carries
    expect(firstError({ fr: { alert: 'é'.repeat(800) } }, { alert: 'Hello', data: 'x'.repeat(1800) })).toMatch(
      /^notification\.localized\.fr: is too large/,
    );
    expect(firstError({ fr: { alert: 'é'.repeat(800) } }, { alert: 'Hello', data: 'x'.repeat(100) })).toBeNull();
    expect(firstError({ fr: { web: { renotify: true } } })).toBe(
      'notification.localized.fr.web.renotify: needs collapse_key (the notification tag it renotifies)',
    );
    expect(firstError({ fr: { web: { renotify: true } } }, { alert: 'Hello', collapse_key: 'k' })).toBeNull();
  });
});
