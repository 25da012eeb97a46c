import type { FastifyInstance } from 'fastify';
import { ValidationError } from '../domain/errors.js';
import { fieldPath } from './errors.js';

/**
 * Objects and arrays may nest at most this deep in a body (the body itself is level 1). The deepest
 * structure the API defines (a polygon point in a filter) is 8 levels; custom payload values get the rest.
 */
export const MAX_INPUT_DEPTH = 32;

/**
 * Refuses, on every route and before its schema runs, input that no handler can store or serialise safely:
 * a string or object key holding NUL (PostgreSQL text cannot hold it) or a lone UTF-16 surrogate (not
 * Unicode; PostgreSQL's json refuses its escape), bodies nested deeper than MAX_INPUT_DEPTH (recursive
 * code such as JSON.stringify would overflow the stack), and the keys that reach an object's prototype when
 * copied (`__proto__`, and `constructor` holding `prototype`). Body, path params and query string are walked once,
 * and the answer is a 400 naming the field as the schema errors do.
 */
export function registerInputGuard(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    const problem = inputProblem(request.params, 'params') ?? inputProblem(request.query, 'querystring') ?? inputProblem(request.body, '');
    if (problem) throw new ValidationError(problem);
  });
}

/** The first problem in a parsed input as "<field path>: <what is wrong>", or null. `context` prefixes the path. */
export function inputProblem(value: unknown, context: string): string | null {
  const found = walk(value, [], 0);
  if (!found) return null;
  const where = [context, fieldPath(found.path.map((seg) => `/${seg.replace(/~/g, '~0').replace(/\//g, '~1')}`).join(''))]
    .filter(Boolean)
    .join('.');
  return where ? `${where}: ${found.message}` : found.message;
}

interface Found {
  path: string[];
  message: string;
}

/** Depth-first; `path` is the current position, extended and restored in place. Recursion is bounded by the depth limit. */
function walk(value: unknown, path: string[], depth: number): Found | null {
  if (typeof value === 'string') {
    const message = stringProblem(value);
    return message ? { path: [...path], message } : null;
  }
  if (typeof value !== 'object' || value === null) return null;
  if (depth === MAX_INPUT_DEPTH) return { path: [...path], message: `nests deeper than ${MAX_INPUT_DEPTH} levels of objects and arrays` };
  const isArray = Array.isArray(value);
  for (const key of Object.keys(value)) {
    const keyProblem = isArray ? null : (stringProblem(key) ?? prototypeKeyProblem(key, (value as Record<string, unknown>)[key]));
    if (keyProblem) return { path: [...path], message: `key ${JSON.stringify(key)} ${keyProblem}` };
    path.push(key);
    const found = walk((value as Record<string, unknown>)[key], path, depth + 1);
    path.pop();
    if (found) return found;
  }
  return null;
}

function prototypeKeyProblem(key: string, value: unknown): string | null {
  if (key === '__proto__') return 'is not allowed (it would reach the prototype of what it is copied into)';
  if (key === 'constructor' && typeof value === 'object' && value !== null && Object.hasOwn(value, 'prototype'))
    return 'is not allowed with a "prototype" key in it';
  return null;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function stringProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain a NUL character (\\u0000)';
  if (LONE_SURROGATE.test(s)) return 'must not contain a lone UTF-16 surrogate (\\ud800-\\udfff unpaired)';
  return null;
}
