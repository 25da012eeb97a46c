import { describe, expect, it } from 'vitest';
import { parseTemplate, renderTemplate, type TemplateVariables } from '../../src/domain/templates.js';

/** The render as liquidjs makes it (the fast path left out), or the error it fails with. */
function viaLiquid(text: string, variables: TemplateVariables): string {
  try {
    return renderTemplate({ ...parseTemplate(text), fast: null }, variables);
  } catch (err) {
    return `error: ${(err as Error).constructor.name} ${(err as Error).message}`;
  }
}

function viaFast(text: string, variables: TemplateVariables): string {
  const parsed = parseTemplate(text);
  expect(parsed.fast, text).not.toBeNull();
  try {
    return renderTemplate(parsed, variables);
  } catch (err) {
    return `error: ${(err as Error).constructor.name} ${(err as Error).message}`;
  }
}

const FAST = [
  'Hi {{ custom.v | default: "there" }}',
  '{{custom.v}}',
  "{{ custom.v | default: 'x y' | upcase }}",
  '{{ custom.v | upcase | default: "Y" }}',
  '{{ custom.v | capitalize }}!',
  '{{ custom.v | downcase }}{{ custom.v }}',
  'a {{ custom.v }} b {{ device.locale | default: "en" }} }} c',
  '{{ custom.v.w | default: "z" }}',
  '{{ data.v | default: "" }}/{{ user.id }}',
  '\n  {{ custom.v |default:"<b>&amp;</b>"|capitalize }}\n',
  '{{ event.properties.v | default: "ünïcødé ✓" }}',
];

const VALUES: unknown[] = [
  undefined,
  null,
  '',
  ' ',
  false,
  true,
  0,
  -0,
  1.5,
  -3,
  1e21,
  2 ** 70,
  'Ana',
  'éLOÏSE dUPONT',
  'ß straße',
  'ǆemal',
  'İstanbul',
  '<b>"quoted" & \'single\'</b>',
  '{{ custom.v }}',
  'emoji 😀 text',
  ['a', 'b'],
  [],
  { w: 'nested' },
  {},
  'x'.repeat(5_000),
];

/** Each value at every place the templates read it, and roots missing or of another type. */
function variableSets(): TemplateVariables[] {
  const sets: TemplateVariables[] = [{}, { custom: {} }, { custom: 'abc' as never }, { custom: null as never }, { custom: ['v'] as never }];
  for (const v of VALUES) {
    sets.push({ custom: { v } }, { custom: { v: { w: v } } }, { data: { v }, user: { id: String(v), email: null } });
    sets.push({ device: { locale: v }, custom: { v, other: 1 } });
    sets.push({ event: { name: 'e', date: 'd', properties: { v } as Record<string, unknown> } });
  }
  return sets;
}

describe('the fast path of simple templates', () => {
  it('renders byte for byte what liquidjs renders, whatever the values (missing, nil, empty, false, numbers, markup)', () => {
    let compared = 0;
    for (const text of FAST)
      for (const variables of variableSets()) {
        expect(viaFast(text, variables), `${text} with ${JSON.stringify(variables)?.slice(0, 200)}`).toBe(viaLiquid(text, variables));
        compared++;
      }
    expect(compared).toBeGreaterThan(1_000);
  });

  it('leaves to liquidjs what it does not handle: tags, other filters, literals, indexes, whitespace control, escapes', () => {
    for (const text of [
      '{% if custom.v %}x{% endif %}',
      '{{ custom.v | default: "a\\"b" }}',
      '{{ custom.v | default: 3 }}',
      '{{ custom.v.size }}',
      '{{ custom.v.first | default: "x" }}',
      '{{- custom.v -}}',
      '{{ custom["v"] }}',
      '{{ custom.v | append: "x" }}',
      '{{ custom.v | default: "x", allow_false: true }}',
      '{{ "literal" }}',
    ])
      expect(parseTemplate(text).fast, text).toBeNull();
  });
});
