import type { Filter } from '../../src/domain/filters.js';
import {
  CUSTOM_TYPES,
  DEVICE_ATTRIBUTES,
  DISTANCE_UNITS_IN_METERS,
  NOTIFICATIONS_ALLOWED_VALUES,
  PLATFORM_VALUES,
  type AttributeKind,
} from '../../src/domain/vocabulary.js';
import { h } from './dom.js';

/**
 * The filter builder: one row per filter (device attribute, custom attribute by type, or event), each with
 * criteria edited as forms that fit the attribute's kind. Values are sent as typed where they parse, else as
 * typed text, so the API's own messages name what is wrong.
 */
type Source = 'device' | 'custom' | 'event';
type Kind = AttributeKind | 'event';

interface CriterionDraft {
  mode: string;
  v: Record<string, string>;
}

interface FilterDraft {
  source: Source;
  attribute: string;
  customType: string;
  customName: string;
  eventSource: string;
  eventName: string;
  not: boolean;
  criteria: CriterionDraft[];
}

const MODES: Record<Kind, string[]> = {
  string: ['is'],
  tags: ['is'],
  enum: ['is'],
  boolean: ['is'],
  number: ['is', 'range'],
  date: ['is', 'range'],
  event: ['happened', 'count', 'count range', 'last happened'],
  geo: ['distance', 'polygon'],
};
const CUSTOM_KINDS: Record<string, Kind> = { string: 'string', integer: 'number', float: 'number', date: 'date', boolean: 'boolean' };
const LOWER = ['gte', 'gt'];
const UPPER = ['lte', 'lt'];
const HINT: Partial<Record<Kind, string>> = {
  date: 'ISO 8601 or date math: now-7d/d, 2024-01-01||+1M/d',
  event: 'ISO 8601 or date math: now-7d/d',
};

const kindOf = (f: FilterDraft): Kind =>
  f.source === 'device'
    ? DEVICE_ATTRIBUTES[f.attribute as keyof typeof DEVICE_ATTRIBUTES]
    : f.source === 'custom'
      ? CUSTOM_KINDS[f.customType]!
      : 'event';

// the platform names the device record shows (iOS, Android, Web, Huawei): a choice, not free text
const isPlatform = (f: FilterDraft) => f.source === 'device' && f.attribute === 'platform';

const newCriterion = (kind: Kind): CriterionDraft => ({ mode: MODES[kind][0]!, v: {} });
const newFilter = (): FilterDraft => ({
  source: 'device',
  attribute: 'locale',
  customType: 'string',
  customName: '',
  eventSource: '',
  eventName: '',
  not: false,
  criteria: [newCriterion('string')],
});

/** A number where the text is one, else the text itself (the API then says "must be a number"). */
const num = (text: string | undefined): number | string => {
  const t = (text ?? '').trim();
  return t !== '' && Number.isFinite(Number(t)) ? Number(t) : t;
};

function nameOf(f: FilterDraft): string {
  if (f.source === 'device') return f.attribute;
  if (f.source === 'custom') return `custom.${f.customType}.${f.customName}`;
  return `events.${f.eventSource ? `${f.eventSource}.` : ''}${f.eventName}`;
}

function range(c: CriterionDraft, value: (t: string) => unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if ((c.v.lower ?? '') !== '') out[c.v.lowerOp ?? LOWER[0]!] = value(c.v.lower!);
  if ((c.v.upper ?? '') !== '') out[c.v.upperOp ?? UPPER[0]!] = value(c.v.upper!);
  return out;
}

function criterionOf(kind: Kind, c: CriterionDraft, platform: boolean): unknown {
  const text = (t: string) => t.trim();
  switch (c.mode) {
    case 'is':
      if (kind === 'number') return num(c.v.value);
      if (kind === 'boolean') return (c.v.value ?? 'true') === 'true';
      if (kind === 'enum') return c.v.value ?? NOTIFICATIONS_ALLOWED_VALUES[0];
      return c.v.value ?? (platform ? PLATFORM_VALUES[0] : '');
    case 'range':
      return range(c, kind === 'number' ? num : text);
    case 'happened':
      return true;
    case 'count':
      return num(c.v.value);
    case 'count range':
      return range(c, num);
    case 'last happened':
      return range(c, text);
    case 'distance':
      return { point: { latitude: num(c.v.lat), longitude: num(c.v.lon) }, distance: num(c.v.distance), unit: c.v.unit ?? 'km' };
    case 'polygon':
      return {
        polygon: (c.v.points ?? '')
          .split('\n')
          .map((line) => line.trim())
          .filter(Boolean)
          .map((line) => {
            const [lat, lon] = line.split(/[,\s]+/);
            return { latitude: num(lat), longitude: num(lon) };
          }),
      };
  }
  return null;
}

export class FilterBuilder {
  readonly element = h('div', { class: 'builder', id: 'filter-builder' });
  private drafts: FilterDraft[] = [];
  private readonly errors = new Map<number, HTMLElement>();

  constructor(private readonly onChange: () => void) {
    this.render();
  }

  filters(): Filter[] {
    return this.drafts.map((f) => {
      const kind = kindOf(f);
      return {
        name: nameOf(f),
        criteria: f.criteria.map((c) => criterionOf(kind, c, isPlatform(f))),
        ...(f.not && { not_filter: true }),
      } as Filter;
    });
  }

  /** Shows an API message under the filter it names (`filters[2]...`, `notification.to[2]...`); false when it names none. */
  showError(path: string, message: string): boolean {
    const m = /^(?:filters|notification\.to)\[(\d+)\](.*)$/.exec(path);
    const slot = m ? this.errors.get(Number(m[1])) : undefined;
    if (!slot) return false;
    slot.textContent = `${[`Filter ${Number(m![1]) + 1}`, ...placeInWords(m![2]!)].join(', ')}: ${message}`;
    return true;
  }

  clearErrors(): void {
    for (const slot of this.errors.values()) slot.textContent = '';
  }

  private changed(structure: boolean): void {
    if (structure) this.render();
    this.onChange();
  }

  private render(): void {
    this.errors.clear();
    this.element.replaceChildren(
      ...this.drafts.map((f, i) => this.filterRow(f, i)),
      h(
        'button',
        { type: 'button', id: 'add-filter', onclick: () => (this.drafts.push(newFilter()), this.changed(true)) },
        '+ filter (AND)',
      ),
    );
  }

  private filterRow(f: FilterDraft, index: number): HTMLElement {
    const kind = kindOf(f);
    const platform = isPlatform(f);
    const set = (key: keyof FilterDraft, structure: boolean) => (e: Event) => {
      const t = e.target as HTMLInputElement;
      (f as unknown as Record<string, unknown>)[key] = t.type === 'checkbox' ? t.checked : t.value;
      if (structure && (kindOf(f) !== kind || isPlatform(f) !== platform)) f.criteria = [newCriterion(kindOf(f))];
      this.changed(structure);
    };
    const error = h('div', { class: 'field-error', 'data-error': `notification.to[${index}]` });
    this.errors.set(index, error);
    const subject =
      f.source === 'device'
        ? [select(Object.keys(DEVICE_ATTRIBUTES), f.attribute, set('attribute', true), 'attribute')]
        : f.source === 'custom'
          ? [
              select([...CUSTOM_TYPES], f.customType, set('customType', true), 'custom type'),
              input(f.customName, set('customName', false), 'attribute name', 'custom-name'),
            ]
          : [
              input(f.eventSource, set('eventSource', false), 'source (empty: SDK events)', 'event-source'),
              input(f.eventName, set('eventName', false), 'event name', 'event-name'),
            ];
    return h(
      'fieldset',
      { class: 'filter', 'data-filter': index },
      h(
        'div',
        { class: 'row' },
        select(['device', 'custom', 'event'], f.source, set('source', true), 'filter on'),
        ...subject,
        h(
          'label',
          { class: 'inline' },
          h('input', { type: 'checkbox', checked: f.not, onchange: set('not', false), 'data-field': 'not' }),
          ' not',
        ),
        h(
          'button',
          {
            type: 'button',
            class: 'remove',
            title: 'remove this filter',
            onclick: () => (this.drafts.splice(index, 1), this.changed(true)),
          },
          '×',
        ),
      ),
      ...f.criteria.map((c, j) => this.criterionRow(f, kind, c, j)),
      h(
        'button',
        { type: 'button', class: 'add-criterion', onclick: () => (f.criteria.push(newCriterion(kind)), this.changed(true)) },
        '+ or',
      ),
      error,
    );
  }

  private criterionRow(f: FilterDraft, kind: Kind, c: CriterionDraft, j: number): HTMLElement {
    const value = (key: string, placeholder: string, field = key) =>
      input(c.v[key] ?? '', (e) => ((c.v[key] = (e.target as HTMLInputElement).value), this.changed(false)), placeholder, field);
    const choose = (key: string, options: string[], fallback: string) =>
      select(options, c.v[key] ?? fallback, (e) => ((c.v[key] = (e.target as HTMLSelectElement).value), this.changed(false)), key);
    const bounds = (hint: string) => [
      choose('lowerOp', LOWER, LOWER[0]!),
      value('lower', hint),
      choose('upperOp', UPPER, UPPER[0]!),
      value('upper', hint),
    ];
    let editor: (HTMLElement | string)[];
    switch (c.mode) {
      case 'is':
        editor =
          kind === 'boolean'
            ? [choose('value', ['true', 'false'], 'true')]
            : kind === 'enum'
              ? [choose('value', [...NOTIFICATIONS_ALLOWED_VALUES], NOTIFICATIONS_ALLOWED_VALUES[0])]
              : isPlatform(f)
                ? [choose('value', [...PLATFORM_VALUES], PLATFORM_VALUES[0])]
                : [value('value', HINT[kind] ?? 'value')];
        break;
      case 'range':
        editor = bounds(HINT[kind] ?? 'number');
        break;
      case 'count':
        editor = [value('value', 'times (integer)'), ' times'];
        break;
      case 'count range':
        editor = [...bounds('times'), ' times'];
        break;
      case 'last happened':
        editor = bounds(HINT.event!);
        break;
      case 'distance':
        editor = [
          value('lat', 'latitude'),
          value('lon', 'longitude'),
          'within',
          value('distance', 'distance'),
          choose('unit', Object.keys(DISTANCE_UNITS_IN_METERS), 'km'),
        ];
        break;
      case 'polygon':
        editor = [
          h('textarea', {
            rows: 4,
            placeholder: 'one point a line: latitude, longitude (at least 3)',
            'data-field': 'points',
            value: c.v.points ?? '',
            oninput: (e: Event) => ((c.v.points = (e.target as HTMLTextAreaElement).value), this.changed(false)),
          }),
        ];
        break;
      default:
        editor = [];
    }
    const modes = MODES[kind];
    return h(
      'div',
      { class: 'row criterion', 'data-criterion': j },
      j > 0 ? h('span', { class: 'or' }, 'or') : h('span', { class: 'or' }, ''),
      modes.length > 1 &&
        select(modes, c.mode, (e) => ((c.mode = (e.target as HTMLSelectElement).value), (c.v = {}), this.changed(true)), 'mode'),
      ...editor,
      f.criteria.length > 1 &&
        h('button', { type: 'button', class: 'remove', onclick: () => (f.criteria.splice(j, 1), this.changed(true)) }, '×'),
    );
  }
}

function select(options: string[], value: string, onchange: (e: Event) => void, field: string): HTMLSelectElement {
  return h(
    'select',
    { onchange, 'data-field': field, 'aria-label': field },
    ...options.map((o) => h('option', { value: o, selected: o === value }, o)),
  );
}

function input(value: string, oninput: (e: Event) => void, placeholder: string, field: string): HTMLInputElement {
  return h('input', { value, oninput, placeholder, 'data-field': field, 'aria-label': placeholder });
}

const KEY_WORDS: Record<string, string> = {
  name: 'attribute',
  gt: 'bound >',
  gte: 'bound ≥',
  lt: 'bound <',
  lte: 'bound ≤',
  polygon: 'polygon',
  point: 'point',
  latitude: 'latitude',
  longitude: 'longitude',
  distance: 'distance',
  unit: 'unit',
};

/** The rest of a filter's path in the form's words: `.criteria[0].polygon[2].latitude` -> value 1, polygon point 3, latitude. */
function placeInWords(rest: string): string[] {
  const words: string[] = [];
  for (const [, key, index] of rest.matchAll(/\.([^.[]+)|\[(\d+)\]/g)) {
    const last = words.length - 1;
    if (key === 'criteria') words.push('values');
    else if (key !== undefined) words.push(KEY_WORDS[key] ?? key);
    else if (words[last] === 'values') words[last] = `value ${Number(index) + 1}`;
    else if (words[last] === 'polygon') words[last] = `polygon point ${Number(index) + 1}`;
    else words.push(`item ${Number(index) + 1}`);
  }
  return words;
}
