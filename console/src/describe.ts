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
