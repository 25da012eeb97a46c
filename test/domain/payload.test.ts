import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { payloadSchema, reservedKeyProblem } from '../../src/domain/payload.js';

const TYPED = new Set([
  'alert',
  'title',
  'subtitle',
  'sound',
  'category',
  '_channel_id',
  'collapse_key',
  'badge',
  'content_available',
  'mutable_content',
  'interruption_level',
  'relevance_score',
  'web',
]);

describe('reserved payload keys', () => {
  it.each(['available', 'from', 'gcm', 'notification', 'message_type', 'aps', '_nid'])('%s is reserved', (key) => {
    expect(reservedKeyProblem(key)).toBe('is a reserved key and cannot be set');
  });

  it.each(['google.', 'google.sent_time', 'gcm.', 'gcm.n.e', 'gcm.notification.body'])('%s has a reserved prefix', (key) => {
    expect(reservedKeyProblem(key)).toMatch(/^is reserved \(keys beginning google\. or gcm\./);
  });

  it.each(['googleplay', 'gcm_id', 'google', 'nid', '_nid2', 'From', 'fromage', 'apsx', 'my.google.key'])(
    '%s is an ordinary custom key',
    (key) => {
      expect(reservedKeyProblem(key)).toBeNull();
    },
  );

  it('a payload naming a reserved key is refused with that key as the path', () => {
    const r = payloadSchema.safeParse({ alert: 'x', _nid: 'abc' });
    expect(r.success).toBe(false);
    expect(r.error!.issues.map((i) => i.path)).toEqual([['_nid']]);
  });
});

describe('custom keys', () => {
  const customKey = fc
    .string({ minLength: 1, maxLength: 20 })
    .filter((k) => !TYPED.has(k) && reservedKeyProblem(k) === null && k !== '__proto__');

  it('pass through untouched (any key, any JSON value)', () => {
    // a string with {{ or {% is a template (test/domain/templates.test.ts), checked rather than passed through
    const notTemplate = fc.jsonValue().filter((v) => !/\{\{|\{%/.test(JSON.stringify(v)));
    fc.assert(
      fc.property(fc.dictionary(customKey, notTemplate, { minKeys: 1, maxKeys: 8 }), (custom) => {
        const input = { alert: 'x', ...custom };
        const r = payloadSchema.safeParse(input);
        expect(r.success).toBe(true);
        expect(r.data).toStrictEqual(input);
      }),
    );
  });
});

describe('relevance_score', () => {
  it('accepts every value with at most two decimals from 0 to 1', () => {
    for (let k = 0; k <= 100; k++) {
      const v = JSON.parse(k === 100 ? '1' : `0.${String(k).padStart(2, '0')}`) as number;
      expect(payloadSchema.safeParse({ relevance_score: v }).success, String(v)).toBe(true);
    }
  });

  it('refuses any value in [0, 1] with a third decimal', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 999 }), fc.integer({ min: 1, max: 9 }), (hundredths, extra) => {
        const text = `0.${String(hundredths).padStart(3, '0').slice(0, 2)}${extra}`;
        const r = payloadSchema.safeParse({ relevance_score: JSON.parse(text) });
        expect(r.success, text).toBe(false);
        expect(r.error!.issues[0]!.message).toBe('may have at most two decimal places');
      }),
    );
  });

  it.each([1e-12, 1e-300, Number.MIN_VALUE])('refuses the tiny value %d', (v) => {
    expect(payloadSchema.safeParse({ relevance_score: v }).success).toBe(false);
  });
});

describe('typed keys', () => {
  it('collapse_key may be 64 characters, not 65', () => {
    expect(payloadSchema.safeParse({ collapse_key: 'a'.repeat(64) }).success).toBe(true);
    expect(payloadSchema.safeParse({ collapse_key: 'a'.repeat(65) }).success).toBe(false);
  });

  it('badge is an integer >= 0', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2147483647 }), (n) => {
        expect(payloadSchema.safeParse({ badge: n }).success).toBe(true);
      }),
    );
    fc.assert(
      fc.property(fc.integer({ max: -1 }), (n) => {
        expect(payloadSchema.safeParse({ badge: n }).success).toBe(false);
      }),
    );
  });

  it('an empty payload is refused', () => {
    const r = payloadSchema.safeParse({});
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]!.message).toBe('must not be empty');
  });
});

describe('the web object (browser-only fields)', () => {
  const issue = (payload: unknown) => {
    const r = payloadSchema.safeParse(payload);
    return r.success ? null : `${r.error.issues[0]!.path.join('.')}: ${r.error.issues[0]!.message}`;
  };

  it('accepts what showNotification takes and the page a click opens', () => {
    expect(
      issue({
        alert: 'a',
        collapse_key: 't',
        web: {
          icon: '/i.png',
          image: 'https://cdn.example.com/a.png',
          badge: '/b.png',
          url: 'https://shop.example.com/o/1',
          actions: [{ action: 'open', title: 'Open', icon: '/o.png', url: '/o' }],
          require_interaction: true,
          silent: false,
          renotify: true,
          dir: 'auto',
          lang: 'en-US',
        },
      }),
    ).toBeNull();
  });

  it('refuses unknown fields, links that are not http(s) or a path, bad actions, and renotify without a tag', () => {
    expect(issue({ web: { sound: 'x' } })).toMatch(/^web: /);
    expect(issue({ web: { url: 'javascript:alert(1)' } })).toBe('web.url: must be an http(s) URL or a path beginning with /');
    // a template's tags may hold spaces; what is written around them is still an address
    expect(issue({ alert: 'a', web: { url: '/u/{{ user.id }}?l={% if device.language %}{{ device.language }}{% endif %}' } })).toBeNull();
    expect(issue({ web: { url: '{{ data.scheme }}:alert(1)' } })).toBe('web.url: must be an http(s) URL or a path beginning with /');
    expect(issue({ web: { icon: 'data:image/png;base64,AAAA' } })).toMatch(/^web\.icon: /);
    expect(issue({ web: { actions: [{ title: 'no action' }] } })).toMatch(/^web\.actions\.0\.action: /);
    expect(issue({ web: { actions: Array.from({ length: 5 }, (_, i) => ({ action: `a${i}`, title: 't' })) } })).toBe(
      'web.actions: at most 4 actions',
    );
    expect(issue({ web: { dir: 'up' } })).toBe('web.dir: must be auto, ltr or rtl');
    expect(issue({ alert: 'a', web: { renotify: true } })).toBe('web.renotify: needs collapse_key (the notification tag it renotifies)');
    expect(issue({ web: 'x' })).toMatch(/^web: must be an object/);
  });
});
