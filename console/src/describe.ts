import type { Filter } from '../../src/domain/filters.js';

/** A filter in words, as the audience pages show it: "locale is fr_FR or de_DE", "NOT tags is vip". */
export function describeFilter(f: Filter): string {
  const subject = subjectOf(f.name);
  const criteria = f.criteria.map((c) => describeCriterion(f.name, c)).join(' or ');
  return `${f.not_filter ? 'NOT ' : ''}${subject} ${criteria}`;
}

function subjectOf(name: string): string {
  const custom = /^custom\.(\w+)\.(.+)$/.exec(name);
  if (custom) return `custom ${custom[1]} “${custom[2]}”`;
  if (name.startsWith('events.')) return `event “${name.slice('events.'.length)}”`;
  return name;
}

const RANGE_WORDS: Record<string, string> = { gt: '>', gte: '≥', lt: '<', lte: '≤' };

function describeCriterion(name: string, c: unknown): string {
  const event = name.startsWith('events.');
  if (c === true && event) return 'happened at least once';
  if (typeof c === 'number' && event) return `happened ${c} time${c === 1 ? '' : 's'}`;
  if (typeof c !== 'object' || c === null) return `is ${typeof c === 'string' ? c : JSON.stringify(c)}`;
  const o = c as Record<string, unknown>;
  if ('polygon' in o) {
    const points = o.polygon as { latitude: number; longitude: number }[];
    return `inside the polygon ${points.map((p) => `(${p.latitude}, ${p.longitude})`).join(' ')}`;
  }
  if ('distance' in o) {
    const p = o.point as { latitude: number; longitude: number };
    return `within ${o.distance} ${o.unit} of (${p.latitude}, ${p.longitude})`;
  }
  const bounds = Object.entries(o).map(([k, v]) => `${RANGE_WORDS[k] ?? k} ${typeof v === 'string' ? v : String(v)}`);
  if (event) {
    const numeric = Object.values(o).every((v) => typeof v === 'number');
    return numeric ? `happened ${bounds.join(' and ')} times` : `last happened ${bounds.join(' and ')}`;
  }
  return bounds.join(' and ');
}

/**
 * A notification's target in words, from any `notification.to` the API records: "*", `{audience}`, a filter list,
 * or a transactional send's `{field, value}` (with its extra filters). Unknown shapes are shown as their JSON.
 */
export function describeTarget(to: unknown, extraFilters?: unknown): { summary: string; filters: string[] } {
  const words = (filters: unknown) => (Array.isArray(filters) ? filters.map(describeAny) : []);
  if (to === '*') return { summary: 'all devices', filters: [] };
  if (Array.isArray(to)) {
    const filters = words(to);
    return { summary: filters.join(' and '), filters };
  }
  if (isObject(to) && typeof to.audience === 'string') return { summary: 'a stored audience', filters: [] };
  if (isObject(to) && (to.field === 'device_id' || to.field === 'user_id')) {
    const named = `${to.field === 'device_id' ? 'device' : 'user'} ${String(to.value)}`;
    const filters = words(extraFilters);
    return { summary: [named, ...filters].join(' and '), filters };
  }
  return { summary: JSON.stringify(to) ?? 'unknown', filters: [] };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** A filter in words where it has the shape of one, else its JSON. */
function describeAny(f: unknown): string {
  return isObject(f) && typeof f.name === 'string' && Array.isArray(f.criteria)
    ? describeFilter(f as unknown as Filter)
    : JSON.stringify(f);
}
