import type { Db } from '../db/database.js';
import type { TemplateReads, TemplateVariablesRepository } from '../db/repositories/template-variables.js';
import type { PushResult, PushTarget } from '../gateways/types.js';
import { fitsGateway, SURELY_FITS_BYTES } from '../domain/push-mapping.js';
import {
  customVariables,
  deviceData,
  deviceVariables,
  perDeviceData,
  type StoredAttribute,
  type TemplateData,
  type TemplateDevice,
} from '../domain/template-data.js';
import {
  compilePayload,
  renderKey,
  renderSized,
  RenderedTooLargeError,
  type CompiledPayload,
  type TemplateVariables,
} from '../domain/templates.js';

/** Content and the devices that receive it: one gateway send each. */
export interface ContentGroup {
  payload: Record<string, unknown>;
  targets: PushTarget[];
}

/** Notifications whose parsed templates a process keeps (the most recently sent). */
const KEPT_NOTIFICATIONS = 256;
/** Renders a notification keeps by what they read (a name, a locale), so a broadcast renders each value once. */
const KEPT_RENDERS = 20_000;

/** A render (the same for every platform) and its bytes as JSON, or why it failed. */
type Rendered = { payload: Record<string, unknown>; bytes: number } | { reason: 'payload_too_large' | 'template_error' };

/** What a process keeps of one notification while it sends: its templates parsed once, its data read once. */
interface Kept {
  /** by the payload's JSON: its templates parsed (null: none; an Error: one does not parse), and its number */
  compiled: Map<string, { compiled: CompiledPayload | Error | null; no: number }>;
  data?: Promise<TemplateData | null>;
  /** by the payload's number, then by what its render reads: the value itself when one string, else its JSON */
  renders: Map<number, Renders>;
}

/** One payload's renders: keyed by the one string value it reads (no key to build per device), else by renderKey. */
interface Renders {
  byValue: Map<string, Rendered>;
  byKey: Map<string, Rendered>;
  size: number;
}

/**
 * Renders a notification's templates for the devices of a batch: parsed once per notification, rendered once when
 * they read nothing that differs between devices, else per device, and a render reused for every device whose
 * variables it reads are the same. Devices whose render fails, or no longer fits their gateway, fail alone.
 */
export class TemplateRenderer {
  private readonly kept = new Map<string, Kept>();

  constructor(
    private readonly db: Db,
    private readonly variables: TemplateVariablesRepository,
  ) {}

  async render(
    n: { id: string; generation?: number; live_activity?: unknown },
    platform: string,
    groups: ContentGroup[],
  ): Promise<{ groups: ContentGroup[]; failed: PushResult[] }> {
    const kept = this.keptFor(`${n.id}:${n.generation ?? 0}`);
    const out: ContentGroup[] = [];
    const failed: PushResult[] = [];
    for (const group of groups) {
      const { compiled, no } = compiledOf(kept, group.payload);
      if (compiled === null) {
        out.push(group);
        continue;
      }
      if (compiled instanceof Error) {
        failed.push(...group.targets.map((t) => failure(t, 'template_error')));
        continue;
      }
      const readsData = compiled.roots.has('data') || compiled.roots.has('event');
      const data = readsData ? await (kept.data ??= this.variables.dataOf(this.db, n.id)) : null;
      const reads = readsOf(compiled, readsData && perDeviceData(data));
      const devices = reads
        ? await this.variables.devicesOf(
            this.db,
            group.targets.map((t) => t.deviceId),
            reads,
          )
        : null;
      const renders = rendersOf(kept, no);
      const attribute = soleAttribute(compiled, data);
      // by the render itself (one object per content): no key string is built or hashed per device
      const byRender = new Map<Rendered, ContentGroup>();
      for (const t of group.targets) {
        const row = devices?.get(t.deviceId);
        const value = attribute === null ? undefined : stringAttribute(row?.attributes, attribute);
        const rendered =
          value !== undefined
            ? renderedOf(renders, renders.byValue, value, () => renderFor(compiled, variablesOf(compiled, row, data, t.deviceId)))
            : renderedByKey(renders, compiled, variablesOf(compiled, row, data, t.deviceId));
        if ('reason' in rendered) failed.push(failure(t, rendered.reason));
        else if (rendered.bytes > SURELY_FITS_BYTES && !fitsGateway(platform, rendered.payload, !!n.live_activity))
          failed.push(failure(t, 'payload_too_large'));
        else {
          const at = byRender.get(rendered);
          if (at) at.targets.push(t);
          else byRender.set(rendered, { payload: rendered.payload, targets: [t] });
        }
      }
      for (const g of byRender.values()) out.push(g);
    }
    return { groups: out, failed };
  }

  private keptFor(id: string): Kept {
    let kept = this.kept.get(id);
    if (kept) {
      // most recently used last: the first is the one to forget
      this.kept.delete(id);
    } else {
      kept = { compiled: new Map(), renders: new Map() };
      if (this.kept.size >= KEPT_NOTIFICATIONS) this.kept.delete(this.kept.keys().next().value!);
    }
    this.kept.set(id, kept);
    return kept;
  }
}

function compiledOf(kept: Kept, payload: Record<string, unknown>): { compiled: CompiledPayload | Error | null; no: number } {
  const key = JSON.stringify(payload);
  let found = kept.compiled.get(key);
  if (!found) {
    let compiled: CompiledPayload | Error | null;
    try {
      compiled = compilePayload(payload);
    } catch (err) {
      // a template stored before it was checked as now: its devices fail, the rest of the notification goes
      compiled = err as Error;
    }
    found = { compiled, no: kept.compiled.size };
    kept.compiled.set(key, found);
  }
  return found;
}

function rendersOf(kept: Kept, no: number): Renders {
  let renders = kept.renders.get(no);
  if (!renders) kept.renders.set(no, (renders = { byValue: new Map(), byKey: new Map(), size: 0 }));
  return renders;
}

function renderedOf(renders: Renders, map: Map<string, Rendered>, key: string, make: () => Rendered): Rendered {
  let rendered = map.get(key);
  if (!rendered) {
    if (renders.size >= KEPT_RENDERS) {
      renders.byValue.clear();
      renders.byKey.clear();
      renders.size = 0;
    }
    rendered = make();
    map.set(key, rendered);
    renders.size++;
  }
  return rendered;
}

function renderedByKey(renders: Renders, compiled: CompiledPayload, vars: TemplateVariables): Rendered {
  return renderedOf(renders, renders.byKey, renderKey(compiled, vars), () => renderFor(compiled, vars));
}

/** The custom attribute that is all the payload reads (`custom.first_name`, the common case), or null. */
function soleAttribute(compiled: CompiledPayload, data: TemplateData | null): string | null {
  const [path, ...more] = compiled.paths;
  return !more.length && !data && path?.length === 2 && path[0] === 'custom' ? path[1]! : null;
}

/**
 * The attribute's value when it is stored once as a string (what `custom.<name>` then reads), else undefined: the
 * device's variables are built and keyed as any other's.
 */
function stringAttribute(attributes: StoredAttribute[] | undefined, name: string): string | undefined {
  let value: string | undefined;
  for (const a of attributes ?? []) {
    if (a.name !== name) continue;
    if (value !== undefined || a.is_array || a.str_value === null) return undefined;
    value = a.str_value;
  }
  return value;
}

function renderFor(compiled: CompiledPayload, vars: TemplateVariables): Rendered {
  try {
    return renderSized(compiled, vars);
  } catch (err) {
    return { reason: err instanceof RenderedTooLargeError ? 'payload_too_large' : 'template_error' };
  }
}

/**
 * What the devices' renders read of them (null: nothing differs between devices): their columns when `device.*` or
 * `user.*` is named (or the data differs by user), and only the custom attributes named, unless `custom` is read whole.
 */
function readsOf(compiled: CompiledPayload, perDeviceData: boolean): TemplateReads | null {
  const { roots, paths } = compiled;
  const custom = paths.filter((p) => p[0] === 'custom');
  const whole = custom.some((p) => p.length < 2);
  const columns = roots.has('device') || roots.has('user') || perDeviceData || whole;
  if (!columns && !custom.length) return null;
  return { columns, attributes: whole ? null : [...new Set(custom.map((p) => p[1]!))] };
}

/** One device's variables: only the roots its templates name. */
function variablesOf(
  compiled: CompiledPayload,
  row: { device?: TemplateDevice; attributes: StoredAttribute[] } | undefined,
  data: TemplateData | null,
  deviceId: string,
): TemplateVariables {
  const vars: TemplateVariables = row?.device
    ? deviceVariables(row.device, row.attributes)
    : compiled.roots.has('custom')
      ? { custom: customVariables(row?.attributes ?? []) }
      : {};
  return data ? { ...vars, ...deviceData(data, { id: deviceId, userId: row?.device?.user_id ?? null }) } : vars;
}

const failure = (t: PushTarget, reason: string): PushResult => ({ deviceId: t.deviceId, outcome: { kind: 'failed', reason } });
