import { Liquid, type Template } from 'liquidjs';
import { fastRenderer, type FastRender } from './template-fast.js';

/**
 * Templates in a payload's texts: Liquid's safe subset (no file system, no include/render/layout, unknown filters
 * refused, bounded in size, time and memory), parsed once per notification and rendered per device only when they
 * name what differs between devices. The variables a template may name are the roots below, documented in
 * docs/templates.md.
 */

/** A text longer than this is refused as a template (liquidjs's `parseLimit`). */
export const TEMPLATE_MAX_CHARS = 8_192;
/** One text's render may take this long before it fails (`renderLimit`): a loop cannot hold a worker. */
export const TEMPLATE_RENDER_MS = 500;
/** What one render may allocate, in liquidjs's units (characters of strings and items of arrays). */
export const TEMPLATE_MEMORY_LIMIT = 100_000;
/** A rendered text past this many characters could fit no gateway (4,096 bytes): the device's push is too large. */
export const RENDERED_MAX_CHARS = 4_096;

/** The device's columns a template may name (`device.locale`), as the registry stores them. */
export const DEVICE_COLUMNS = [
  'id',
  'platform',
  'locale',
  'country',
  'time_zone',
  'app_version',
  'os_name',
  'os_version',
  'sdk_version',
  'marketing_name',
  'badge',
  'tags',
] as const;
/** The device's fields: its columns and `language`, its locale's first two letters. */
export const DEVICE_VARIABLES = [...DEVICE_COLUMNS, 'language'] as const;
export const USER_VARIABLES = ['id', 'email'] as const;
export const EVENT_VARIABLES = ['name', 'date', 'properties'] as const;

/** Each root with the fields it has (null: any field, as the app names them). */
export const TEMPLATE_ROOTS: Record<TemplateRoot, readonly string[] | null> = {
  device: DEVICE_VARIABLES,
  custom: null,
  user: USER_VARIABLES,
  data: null,
  event: EVENT_VARIABLES,
};
export type TemplateRoot = 'device' | 'custom' | 'user' | 'data' | 'event';

/** What one device's render reads; a root it lacks renders empty (or as its `default` filter says). */
export interface TemplateVariables {
  device?: Record<string, unknown>;
  custom?: Record<string, unknown>;
  user?: { id: string; email: string | null } | null;
  data?: Record<string, unknown>;
  event?: { name: string; date: string; properties: Record<string, unknown> } | null;
}

const engine = new Liquid({
  strictFilters: true,
  ownPropertyOnly: true,
  parseLimit: TEMPLATE_MAX_CHARS,
  renderLimit: TEMPLATE_RENDER_MS,
  memoryLimit: TEMPLATE_MEMORY_LIMIT,
  // no file system: partials and layouts have nowhere to come from
  root: [],
  partials: [],
  layouts: [],
  relativeReference: false,
  cache: false,
});
for (const tag of ['include', 'render', 'layout']) delete engine.tags[tag];

/** Whether a text is a template at all: most are not, and are sent as they are. */
export function isTemplate(text: string): boolean {
  return text.includes('{{') || text.includes('{%');
}

/** A template that cannot be used, with where in its text: `line 1, col 5: undefined filter: nope`. */
export class TemplateError extends Error {}

function positioned(err: unknown): TemplateError {
  const raw = err instanceof Error ? err.message : String(err);
  const m = /^(.*?),? line:(\d+), col:(\d+)/s.exec(raw);
  return new TemplateError(m ? `line ${m[2]}, col ${m[3]}: ${m[1]}` : raw);
}

/** A parsed template and the variables it names (their paths, e.g. ['custom', 'first_name']). */
export interface ParsedTemplate {
  templates: Template[];
  paths: string[][];
  /** the same render without liquidjs, when the text is only text and simple outputs */
  fast: FastRender | null;
}

/** Parses one text and checks the variables it names; a TemplateError names the position of what is wrong. */
export function parseTemplate(text: string): ParsedTemplate {
  let templates: Template[];
  try {
    templates = engine.parse(text);
  } catch (err) {
    throw positioned(err);
  }
  const { globals } = engine.analyzeSync(templates, { partials: false });
  const paths: string[][] = [];
  for (const [root, uses] of Object.entries(globals)) {
    for (const use of uses) {
      // a computed segment (custom[data.key]) ends the path: its prefix is what the render reads
      const segments: string[] = [];
      for (const s of use.segments) {
        if (typeof s !== 'string' && typeof s !== 'number') break;
        segments.push(String(s));
      }
      const where = `line ${use.location.row}, col ${use.location.col}`;
      if (!(root in TEMPLATE_ROOTS))
        throw new TemplateError(`${where}: unknown variable "${root}" (known: ${Object.keys(TEMPLATE_ROOTS).join(', ')})`);
      const fields = TEMPLATE_ROOTS[root as TemplateRoot];
      if (fields && segments.length > 1 && !fields.includes(segments[1]!))
        throw new TemplateError(
          `${where}: unknown variable "${root}.${segments[1]}" (known: ${fields.map((f) => `${root}.${f}`).join(', ')})`,
        );
      paths.push(segments);
    }
  }
  return { templates, paths, fast: fastRenderer(text) };
}

/** Renders one parsed text; a TemplateError on a render error or an output no gateway could carry. */
export function renderTemplate(parsed: ParsedTemplate, variables: TemplateVariables): string {
  let out = parsed.fast?.(variables);
  if (out === undefined) {
    try {
      out = engine.renderSync(parsed.templates, variables) as string;
    } catch (err) {
      throw positioned(err);
    }
  }
  if (out.length > RENDERED_MAX_CHARS) throw new RenderedTooLargeError();
  return out;
}

/** A render longer than any gateway accepts: the device fails with `payload_too_large`. */
export class RenderedTooLargeError extends TemplateError {
  constructor() {
    super(`renders longer than ${RENDERED_MAX_CHARS} characters`);
  }
}

/** Payload keys whose value is a setting, never a text: they are sent as written. */
const NOT_TEXT = new Set(['sound', 'category', '_channel_id', 'collapse_key', 'interruption_level', 'dir', 'lang']);

/** Each templated text of a JSON value (a payload, a `localized` object): its path and text. */
export function templatedTexts(value: unknown, path: (string | number)[] = []): { path: (string | number)[]; text: string }[] {
  if (typeof value === 'string') return isTemplate(value) ? [{ path, text: value }] : [];
  if (Array.isArray(value)) return value.flatMap((v, i) => templatedTexts(v, [...path, i]));
  if (typeof value === 'object' && value !== null)
    return Object.entries(value).flatMap(([k, v]) => (NOT_TEXT.has(k) ? [] : templatedTexts(v, [...path, k])));
  return [];
}

/** Whether a JSON value has a templated text: what a send checks before it renders (most payloads have none). */
export function hasTemplates(value: unknown): boolean {
  if (typeof value === 'string') return isTemplate(value);
  if (Array.isArray(value)) return value.some(hasTemplates);
  if (typeof value === 'object' && value !== null)
    for (const [k, v] of Object.entries(value)) if (!NOT_TEXT.has(k) && hasTemplates(v)) return true;
  return false;
}

/** The problems of each templated text of a value, at its path: what a request's validation reports. */
export function templateProblems(value: unknown): { path: (string | number)[]; message: string }[] {
  const problems = [];
  for (const { path, text } of templatedTexts(value)) {
    try {
      parseTemplate(text);
    } catch (err) {
      problems.push({ path, message: (err as Error).message });
    }
  }
  return problems;
}

/** A payload parsed once for a notification: its templated texts and every variable path they name. */
export interface CompiledPayload {
  payload: Record<string, unknown>;
  slots: { path: (string | number)[]; text: string; parsed: ParsedTemplate }[];
  /** the payload's bytes as JSON less its templated texts', counted at the first render */
  bytesWithoutTexts?: number;
  /** the variable paths the texts name, each once */
  paths: string[][];
  /** the roots they name: a render needs a device's variables only when one of these differs between devices */
  roots: Set<TemplateRoot>;
}

/** The payload's templates parsed, or null when it has none (it is sent as it is). */
export function compilePayload(payload: Record<string, unknown>): CompiledPayload | null {
  const texts = templatedTexts(payload);
  if (!texts.length) return null;
  const slots = texts.map(({ path, text }) => ({ path, text, parsed: parseTemplate(text) }));
  const unique = new Map(slots.flatMap((s) => s.parsed.paths).map((p) => [p.join('\u0000'), p]));
  const paths = [...unique.values()];
  return { payload, slots, paths, roots: new Set(paths.map((p) => p[0] as TemplateRoot)) };
}

/** What the render of `compiled` reads of these variables, as a key: two devices of one key get the same payload. */
export function renderKey(compiled: CompiledPayload, variables: TemplateVariables): string {
  if (compiled.paths.length === 1) {
    // the common case (one name read): the value itself, marked apart from the JSON of the general case
    const value = valueAt(variables, compiled.paths[0]!);
    if (typeof value === 'string') return `s${value}`;
  }
  return JSON.stringify(compiled.paths.map((p) => valueAt(variables, p)));
}

function valueAt(value: unknown, path: string[]): unknown {
  let at = value;
  for (const segment of path) {
    if (typeof at !== 'object' || at === null || !Object.hasOwn(at, segment)) return null;
    at = (at as Record<string, unknown>)[segment];
  }
  return at ?? null;
}

/**
 * The payload with each templated text rendered, and its size as JSON; a TemplateError when one cannot be (the
 * device fails alone). Only the objects on a templated text's path are copied: the rest is the payload's own.
 */
export function renderPayload(compiled: CompiledPayload, variables: TemplateVariables): Record<string, unknown> {
  return renderSized(compiled, variables).payload;
}

/** renderPayload and the rendered payload's bytes as JSON, counted from the texts alone. */
export function renderSized(compiled: CompiledPayload, variables: TemplateVariables): { payload: Record<string, unknown>; bytes: number } {
  compiled.bytesWithoutTexts ??= jsonBytes(compiled.payload) - compiled.slots.reduce((sum, s) => sum + jsonBytes(s.text), 0);
  const out = { ...compiled.payload };
  const copied = new Set<unknown>([out]);
  let bytes = compiled.bytesWithoutTexts;
  for (const { path, parsed } of compiled.slots) {
    let at: Record<string | number, unknown> = out;
    for (const segment of path.slice(0, -1)) {
      let next = at[segment] as Record<string | number, unknown>;
      if (!copied.has(next)) {
        next = Array.isArray(next) ? ([...next] as unknown as Record<number, unknown>) : { ...next };
        copied.add(next);
        at[segment] = next;
      }
      at = next;
    }
    const text = renderTemplate(parsed, variables);
    bytes += jsonBytes(text);
    at[path[path.length - 1]!] = text;
  }
  return { payload: out, bytes };
}

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');
