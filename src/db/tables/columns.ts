import type { ColumnType } from 'kysely';

/** The column types the tables share: a time read as a Date, JSON read as its value, a counter starting at 0. */
export type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
export type Json<T = unknown> = ColumnType<T, string | T, string | T>;
export type Counter = ColumnType<number, number | undefined, number>;
