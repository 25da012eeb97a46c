import { describe, expect, it } from 'vitest';
import {
  compilePayload,
  hasTemplates,
  parseTemplate,
  renderKey,
  renderPayload,
  renderSized,
  templateProblems,
  templatedTexts,
} from '../../src/domain/templates.js';
import { payloadSchema } from '../../src/domain/payload.js';
import { deviceData, deviceVariables } from '../../src/domain/template-data.js';

describe('templates', () => {
  it('renders each root, a missing value by its default filter, else empty', () => {
    const compiled = compilePayload({
      alert: 'Hi {{ custom.first_name | default: "there" }} ({{ device.locale }}, {{ user.id }})',
      title: '{{ data.code }}{{ custom.missing }}',
      order: { items: '{% for i in event.properties.items %}{{ i }},{% endfor %}' },
      sound: '{{ not.rendered }}',
    })!;
    const vars = { device: { locale: 'fr_FR' }, custom: {}, user: { id: 'u1', email: null }, data: { code: 42 } };
    expect(renderPayload(compiled, { ...vars, event: { name: 'cart', date: 'd', properties: { items: ['a', 'b'] } } })).toEqual({
      alert: 'Hi there (fr_FR, u1)',
      title: '42',
      order: { items: 'a,b,' },
      sound: '{{ not.rendered }}',
    });
    expect([...compiled.roots].sort()).toEqual(['custom', 'data', 'device', 'event', 'user']);
  });

  it('copies only what it renders into, and counts the rendered bytes as JSON', () => {
    const payload = { alert: { title: '{{ custom.a }}', body: 'Ünï {{ custom.b }}' }, list: ['x', '{{ custom.a }}'], data: { k: 'v' } };
    const compiled = compilePayload(structuredClone(payload))!;
    const { payload: out, bytes } = renderSized(compiled, { custom: { a: '"é"', b: 'ok' } });
    expect(out).toEqual({ alert: { title: '"é"', body: 'Ünï ok' }, list: ['x', '"é"'], data: { k: 'v' } });
    expect(bytes).toBe(Buffer.byteLength(JSON.stringify(out)));
    expect(compiled.payload).toEqual(payload);
    expect(out.data).toBe(compiled.payload.data);
    const one = compilePayload({ alert: '{{ custom.a }}' })!;
    expect(renderKey(one, { custom: { a: '["x"]' } })).not.toBe(renderKey(one, { custom: { a: ['x'] } }));
  });

  it('keys a render by the values it reads only', () => {
    const compiled = compilePayload({ alert: 'Hi {{ custom.first_name }}' })!;
    const a = renderKey(compiled, { custom: { first_name: 'Ana', age: 3 }, device: { locale: 'fr' } });
    expect(renderKey(compiled, { custom: { first_name: 'Ana', age: 9 }, device: { locale: 'de' } })).toBe(a);
    expect(renderKey(compiled, { custom: { first_name: 'Bo' } })).not.toBe(a);
    expect(compilePayload({ alert: 'no template', n: 1 })).toBeNull();
  });

  it('refuses a template that does not parse, an unknown root or field, a file tag, an unknown filter: with the position', () => {
    expect(() => parseTemplate('Hi {% if %}')).toThrow(/^line 1, col 9: invalid value expression/);
    expect(() => parseTemplate('a\n  {{ secrets.key }}')).toThrow('line 2, col 6: unknown variable "secrets"');
    expect(() => parseTemplate('{{ device.token }}')).toThrow(/line 1, col 4: unknown variable "device.token"/);
    expect(() => parseTemplate('{% include "x" %}')).toThrow(/tag "include" not found/);
    expect(() => parseTemplate('{% render "x" %}')).toThrow(/tag "render" not found/);
    expect(() => parseTemplate('{{ data.a | shell }}')).toThrow(/undefined filter: shell/);
    expect(templateProblems({ alert: 'ok', web: { url: '/x/{{ nope }}' } })).toEqual([
      { path: ['web', 'url'], message: 'line 1, col 7: unknown variable "nope" (known: device, custom, user, data, event)' },
    ]);
    const parsed = payloadSchema.safeParse({ alert: 'Hi {{ custom.a | nope }}' });
    expect(parsed.error!.issues[0]).toMatchObject({ path: ['alert'], message: expect.stringMatching(/^line 1, col 4: undefined filter/) });
  });

  it('bounds a loop by time and memory: the render fails, it does not hang', () => {
    const compiled = compilePayload({ alert: '{% for i in (1..100000000) %}xxxxxxxx{% endfor %}' })!;
    const started = Date.now();
    expect(() => renderPayload(compiled, {})).toThrow();
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("makes a device's variables as stored, and its data: the send's, its user's, then its own", () => {
    const base = { platform: 'ios', locale: 'pt_BR', country: 'BR', time_zone: null, app_version: '2.1', os_name: null, os_version: null };
    const row = { ...base, id: 'd1', sdk_version: null, marketing_name: null, badge: 3, tags: ['vip'], user_id: 'u1', user_email: 'a@b.c' };
    const attrs = [
      { name: 'first_name', is_array: false, str_value: 'Ana', num_value: null, date_value: null, bool_value: null },
      { name: 'score', is_array: false, str_value: null, num_value: 4.5, date_value: null, bool_value: null },
      { name: 'sizes', is_array: true, str_value: null, num_value: 1, date_value: null, bool_value: null },
      { name: 'sizes', is_array: true, str_value: null, num_value: 2, date_value: null, bool_value: null },
      { name: '__proto__', is_array: false, str_value: 'x', num_value: null, date_value: null, bool_value: null },
    ];
    const v = deviceVariables(row, attrs);
    expect(v.device).toMatchObject({ locale: 'pt_BR', language: 'pt', badge: 3, tags: ['vip'] });
    expect(v.custom).toMatchObject({ first_name: 'Ana', score: 4.5, sizes: [1, 2] });
    expect(Object.hasOwn(v.custom!, '__proto__')).toBe(true);
    expect(v.user).toEqual({ id: 'u1', email: 'a@b.c' });
    const stored = { data: { a: 1, b: 1, c: 1 }, data_by: { user_id: { u1: { b: 2, c: 2 } }, device_id: { d1: { c: 3 } } } };
    expect(deviceData(stored, { id: 'd1', userId: 'u1' }).data).toEqual({ a: 1, b: 2, c: 3 });
    expect(deviceData(stored, { id: 'd2', userId: 'constructor' }).data).toEqual({ a: 1, b: 1, c: 1 });
  });
});

describe('hasTemplates', () => {
  // the send skips the renderer on this answer: it must agree with the texts the renderer would find
  it.each([
    [{ title: 'Hi', body: 'plain' }, false],
    [{ title: 'Hi {{ custom.name }}' }, true],
    [{ data: { deep: ['a', { b: '{% if x %}y{% endif %}' }] } }, true],
    [{ sound: '{{ not.a.text }}', body: 'plain' }, false],
    [{ headings: { en: 'x', fr: 'Salut {{ user.id }}' } }, true],
    [{ n: 1, b: true, z: null, list: [1, 2] }, false],
  ])('%j: %s', (payload, expected) => {
    expect(hasTemplates(payload)).toBe(expected);
    expect(templatedTexts(payload).length > 0).toBe(expected);
  });
});
