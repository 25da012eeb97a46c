import { sql, type RawBuilder, type SqlBool } from 'kysely';
import { resolveDate } from '../domain/date-math.js';
import {
  isRange,
  parseFilterName,
  type Criterion,
  type DeviceAttribute,
  type Filter,
  type FilterTarget,
  type RangeCriterion,
} from '../domain/filters.js';
import { isUuid } from './repositories/audiences.js';

/**
 * Compiles an audience's filters to one SQL predicate over `devices AS d`. Criteria of one filter are
 * OR'ed, filters AND'ed; a negated filter also matches devices lacking the attribute (NULL -> false -> NOT).
 * Date math resolves against `now`, the time the query runs.
 */
export interface CompileContext {
  now: Date;
}

type Predicate = RawBuilder<SqlBool>;
const TRUE: Predicate = sql<SqlBool>`true`;
const FALSE: Predicate = sql<SqlBool>`false`;

export function compileFilters(filters: Filter[] | null, ctx: CompileContext): Predicate {
  if (!filters || filters.length === 0) return TRUE;
  return and(filters.map((f) => compileFilter(f, ctx)));
}

function compileFilter(filter: Filter, ctx: CompileContext): Predicate {
  const target = parseFilterName(filter.name);
  if (!target) throw new Error(`unknown filter name ${filter.name}`); // validated at the API; stored specs are valid
  const matches = sql<SqlBool>`coalesce(${compileCriteria(target, filter.criteria, ctx)}, false)`;
  return filter.not_filter ? sql<SqlBool>`not ${matches}` : matches;
}

function compileCriteria(target: FilterTarget, criteria: Criterion[], ctx: CompileContext): Predicate {
  if (target.type === 'device') return compileDeviceAttribute(target.attribute, criteria, ctx);
  throw new Error(`filter kind ${target.type} is not supported yet`);
}

const STRING_COLUMNS: Partial<Record<DeviceAttribute, string>> = {
  locale: 'locale',
  time_zone: 'time_zone',
  os_name: 'os_name',
  os_version: 'os_version',
  app_version: 'app_version',
  sdk_version: 'sdk_version',
  country: 'country',
  marketing_name: 'marketing_name',
  user_id: 'user_id',
  user_email: 'user_email',
  notifications_allowed: 'notifications_allowed',
};

function compileDeviceAttribute(attribute: DeviceAttribute, criteria: Criterion[], ctx: CompileContext): Predicate {
  const stringColumn = STRING_COLUMNS[attribute];
  if (stringColumn) return anyOf(sql.ref(`d.${stringColumn}`), criteria as string[], 'text');
  switch (attribute) {
    case 'device_id': {
      const ids = (criteria as string[]).filter(isUuid).map((s) => s.toLowerCase());
      return ids.length ? sql<SqlBool>`d.id = any(${ids}::uuid[])` : FALSE;
    }
    case 'tags':
      return sql<SqlBool>`d.tags && ${criteria as string[]}::text[]`;
    case 'development':
      return anyOf(sql.ref('d.development'), criteria as boolean[], 'boolean');
    case 'badge':
      return numberCriteria(sql.ref('d.badge'), criteria);
    case 'created_at':
    case 'registered_at':
      return dateCriteria(sql.ref(`d.${attribute}`), criteria, ctx);
    default:
      throw new Error(`device attribute ${attribute} is not supported yet`);
  }
}

export function anyOf(column: RawBuilder<unknown> | ReturnType<typeof sql.ref>, values: unknown[], pgType: string): Predicate {
  return sql<SqlBool>`${column} = any(${values}::${sql.raw(pgType)}[])`;
}

/** Numbers exact or in ranges; used for badge and numeric custom attributes. */
export function numberCriteria(column: RawBuilder<unknown> | ReturnType<typeof sql.ref>, criteria: Criterion[]): Predicate {
  const exact = criteria.filter((c): c is number => typeof c === 'number');
  const parts: Predicate[] = criteria.filter(isRange).map((r) => range(column, r, (v) => sql`${v}::double precision`));
  if (exact.length) parts.push(anyOf(column, exact, 'double precision'));
  return or(parts);
}

/** ISO dates exact, or ranges whose bounds are ISO dates or date math resolved at query time. */
export function dateCriteria(column: RawBuilder<unknown> | ReturnType<typeof sql.ref>, criteria: Criterion[], ctx: CompileContext): Predicate {
  const toTs = (v: number | string) => sql`${resolveDate(String(v), ctx.now).toISOString()}::timestamptz`;
  const exact = criteria.filter((c): c is string => typeof c === 'string').map((s) => resolveDate(s, ctx.now).toISOString());
  const parts: Predicate[] = criteria.filter(isRange).map((r) => range(column, r, toTs));
  if (exact.length) parts.push(anyOf(column, exact, 'timestamptz'));
  return or(parts);
}

export function range(
  column: RawBuilder<unknown> | ReturnType<typeof sql.ref>,
  r: RangeCriterion,
  value: (v: number | string) => RawBuilder<unknown>,
): Predicate {
  const parts: Predicate[] = [];
  if (r.gt !== undefined) parts.push(sql<SqlBool>`${column} > ${value(r.gt)}`);
  if (r.gte !== undefined) parts.push(sql<SqlBool>`${column} >= ${value(r.gte)}`);
  if (r.lt !== undefined) parts.push(sql<SqlBool>`${column} < ${value(r.lt)}`);
  if (r.lte !== undefined) parts.push(sql<SqlBool>`${column} <= ${value(r.lte)}`);
  return and(parts);
}

export function and(parts: Predicate[]): Predicate {
  if (parts.length === 0) return TRUE;
  return parts.length === 1 ? parts[0]! : sql<SqlBool>`(${sql.join(parts, sql` and `)})`;
}

export function or(parts: Predicate[]): Predicate {
  if (parts.length === 0) return FALSE;
  return parts.length === 1 ? parts[0]! : sql<SqlBool>`(${sql.join(parts, sql` or `)})`;
}
