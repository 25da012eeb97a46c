/**
 * The common template (text and outputs of a variable through `default`, `upcase`, `downcase`, `capitalize`) as a
 * small function: what a broadcast renders per device, at a fraction of liquidjs's cost. It renders what liquidjs
 * would, byte for byte (test/domain/template-fast.test.ts compares them), and answers undefined for any value it
 * does not handle the same way for certain, which liquidjs then renders.
 */

/** Renders with the variables, or undefined: liquidjs must render this one. */
export type FastRender = (variables: object) => string | undefined;

type Filter = { name: 'upcase' | 'downcase' | 'capitalize' } | { name: 'default'; value: string };

const ROOTS = new Set(['device', 'custom', 'user', 'data', 'event']);
/** Segments liquidjs reads specially (an array's size, a string's first character): liquidjs renders them. */
const SPECIAL = new Set(['size', 'first', 'last']);
const OUTPUT = /\{\{(.*?)\}\}/gs;
const PATH = /^\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*(.*)$/s;
const FILTER = /^\|\s*(?:(upcase|downcase|capitalize)|default\s*:\s*(?:"([^"\\{}]*)"|'([^'\\{}]*)'))\s*/;
/** A value longer than this goes to liquidjs, whose memory limit and errors then apply as they always did. */
const LONGEST_VALUE = 4_096;

/** The text's fast renderer, or null when it has anything else (a tag, another filter, an index, a literal). */
export function fastRenderer(text: string): FastRender | null {
  if (text.includes('{%')) return null;
  const texts: string[] = [];
  const outputs: { path: string[]; filters: Filter[] }[] = [];
  let last = 0;
  for (const m of text.matchAll(OUTPUT)) {
    const output = parseOutput(m[1]!);
    if (!output) return null;
    texts.push(text.slice(last, m.index));
    outputs.push(output);
    last = m.index + m[0].length;
  }
  texts.push(text.slice(last));
  if (texts.some((t) => t.includes('{{'))) return null;
  return (variables) => {
    let out = texts[0]!;
    for (let i = 0; i < outputs.length; i++) {
      const value = evaluate(variables, outputs[i]!.path, outputs[i]!.filters);
      if (value === undefined) return undefined;
      out += value + texts[i + 1]!;
    }
    return out;
  };
}

function parseOutput(inner: string): { path: string[]; filters: Filter[] } | null {
  const m = PATH.exec(inner);
  if (!m) return null;
  const path = m[1]!.split('.');
  if (!ROOTS.has(path[0]!) || path.some((s) => SPECIAL.has(s))) return null;
  const filters: Filter[] = [];
  let rest = m[2]!;
  while (rest) {
    const f = FILTER.exec(rest);
    if (!f) return null;
    filters.push(f[1] ? { name: f[1] as 'upcase' } : { name: 'default', value: f[2] ?? f[3]! });
    rest = rest.slice(f[0].length);
  }
  return { path, filters };
}

type Scalar = string | number | boolean | null;

/** The output's text, or undefined when liquidjs must render it (an object, an array, a long string). */
function evaluate(variables: object, path: string[], filters: Filter[]): string | undefined {
  let at: unknown = variables;
  for (const segment of path) {
    if (at === null || at === undefined) break;
    // liquidjs reads a string's or an array's properties its own way
    if (typeof at !== 'object' || Array.isArray(at)) return undefined;
    at = Object.hasOwn(at, segment) ? (at as Record<string, unknown>)[segment] : undefined;
  }
  if (at === undefined) at = null;
  if (typeof at === 'object' && at !== null) return undefined;
  if (typeof at === 'string' && at.length > LONGEST_VALUE) return undefined;
  let value = at as Scalar;
  for (const f of filters) {
    if (f.name === 'default') {
      if (typeof value === 'string' ? value.length === 0 : value === null || value === false) value = f.value;
    } else {
      const s = text(value);
      value =
        f.name === 'upcase'
          ? s.toUpperCase()
          : f.name === 'downcase'
            ? s.toLowerCase()
            : s.charAt(0).toUpperCase() + s.slice(1).toLowerCase();
    }
  }
  return text(value);
}

/** What liquidjs writes of a value. */
const text = (value: Scalar): string => (value === null ? '' : typeof value === 'string' ? value : String(value));
