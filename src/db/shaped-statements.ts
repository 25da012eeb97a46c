import { CompiledQuery } from 'kysely';
import type { Db } from './database.js';

/** A query builder, or a `sql` template compiled for `db`. */
type Buildable<R> = { compile(db: Db): CompiledQuery<R> };

/** A value a statement is built with in place of a request's: its place among the request's values. */
class Slot {
  constructor(readonly index: number) {}
}

/**
 * Collects a request's values in the order its statement's `bind` gives them; while its shape is being built, it
 * answers a placeholder (Slot) for each, else the value itself, which nothing then reads.
 */
export class Binder {
  readonly values: unknown[] = [];

  constructor(private readonly building: boolean) {}

  /** `value`, collected (an undefined one is not: a column left out is part of the shape). */
  slot<T>(value: T): T {
    if (value === undefined) return value;
    this.values.push(value);
    return this.building ? (new Slot(this.values.length - 1) as T) : value;
  }

  /** `row`'s values, collected in the order of its keys. */
  slots<T extends Record<string, unknown>>(row: T): T {
    if (!this.building) {
      for (const key in row) if (row[key] !== undefined) this.values.push(row[key]);
      return row;
    }
    return Object.fromEntries(Object.entries(row).map(([key, value]) => [key, this.slot(value)])) as T;
  }
}

interface Shape {
  sql: string;
  /** for each parameter of `sql`, the request value it takes */
  order: number[];
}

/**
 * Statements compiled once for each shape (the columns they write or compare) and bound to each request's values
 * after: Kysely builds and compiles a statement anew on each call, which took about 0.1 ms of CPU for a
 * registration's read and as much for its insert. The same text each time also lets `StatementNames` find its
 * prepared statement without hashing a new string.
 */
export class ShapedStatements {
  private readonly shapes = new Map<string, Shape>();

  constructor(private readonly maxShapes = 500) {}

  /**
   * The statement `build` makes of the placeholders `bind` collects, compiled the first time `key` (which must name
   * everything but the values that changes its text) is asked for, and bound to this request's values.
   */
  query<P, R>(db: Db, key: string, bind: (binder: Binder) => P, build: (placeholders: P) => Buildable<R>): CompiledQuery<R> {
    let shape = this.shapes.get(key);
    const binder = new Binder(!shape);
    const placeholders = bind(binder);
    if (!shape) {
      shape = compile(db, build(placeholders));
      if (this.shapes.size < this.maxShapes) this.shapes.set(key, shape);
    }
    return CompiledQuery.raw(
      shape.sql,
      shape.order.map((i) => binder.values[i]),
    ) as CompiledQuery<R>;
  }
}

function compile(db: Db, buildable: Buildable<unknown>): Shape {
  const { sql, parameters } = buildable.compile(db);
  const order = parameters.map((p) => {
    // a value not collected by the Binder would be kept for every later request of the shape
    if (!(p instanceof Slot)) throw new Error('a shaped statement has a parameter its Binder did not collect');
    return p.index;
  });
  return { sql, order };
}
