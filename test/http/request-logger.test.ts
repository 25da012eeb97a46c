import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import { describe, expect, it } from 'vitest';
import { lazyRequestLogger } from '../../src/http/request-logger.js';
import { redactPaths } from '../../src/platform/logger.js';

/** A pino logger as the server's (its redaction), writing to an array, and how many children it has made. */
function capture(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const out = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  const logger = pino({ level, redact: { paths: redactPaths, censor: '[redacted]' } }, out);
  let children = 0;
  const child = logger.child;
  // children inherit this method (pino makes them with Object.create): each counts, each is a child of its own logger
  (logger as { child: unknown }).child = function (this: typeof logger, ...args: Parameters<typeof child>) {
    children++;
    return child.apply(this, args);
  };
  return { logger: logger as unknown as FastifyBaseLogger, lines, children: () => children };
}

describe('lazyRequestLogger: a request logger made when it first writes', () => {
  it('makes no child for a request that logs nothing, or only below the level', () => {
    const { logger, lines, children } = capture('info');
    const log = lazyRequestLogger(logger, { reqId: 'req-1' }, {});
    log.debug('not written');
    log.trace({ a: 1 }, 'not written either');
    expect(children()).toBe(0);
    expect(lines).toEqual([]);
    expect(log.level).toBe('info');
  });

  it('writes a line with the request id, redacted as the server redacts, through one child', () => {
    const { logger, lines, children } = capture('info');
    const log = lazyRequestLogger(logger, { reqId: 'req-2' }, {});
    log.error({ err: new Error('boom'), headers: { authorization: 'Basic c2VjcmV0' } }, 'request failed');
    log.warn('again');
    expect(children()).toBe(1);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ reqId: 'req-2', msg: 'request failed', level: 50, headers: { authorization: '[redacted]' } });
    expect((lines[0]!.err as { message: string }).message).toBe('boom');
    expect(lines[1]).toMatchObject({ reqId: 'req-2', msg: 'again', level: 40 });
    // a child of it carries both bindings
    log.child({ step: 'x' }).info('from a child');
    expect(children()).toBe(2);
    expect(lines[2]).toMatchObject({ reqId: 'req-2', step: 'x', msg: 'from a child' });
  });

  it("keeps a route's serializers, answers its level as set and its bindings as pino would", () => {
    const { logger, lines } = capture('info');
    const log = lazyRequestLogger(logger, { reqId: 'req-4' }, { serializers: { user: () => 'serialized' } }) as FastifyBaseLogger & {
      isLevelEnabled(level: string): boolean;
      bindings(): Record<string, unknown>;
    };
    expect(log.isLevelEnabled('debug')).toBe(false);
    expect(log.bindings()).toEqual({ reqId: 'req-4' });
    log.level = 'debug';
    expect(log.level).toBe('debug');
    expect(log.isLevelEnabled('debug')).toBe(true);
    log.debug({ user: { name: 'x', secret: 's' } }, 'with a route serializer');
    expect(lines).toEqual([expect.objectContaining({ reqId: 'req-4', user: 'serialized', level: 20 })]);
    expect(log.bindings()).toEqual({ reqId: 'req-4' });
  });

  it('gives a route with a log level of its own its child at once, at that level', () => {
    const { logger, lines, children } = capture('info');
    const log = lazyRequestLogger(logger, { reqId: 'req-3' }, { level: 'debug' });
    expect(children()).toBe(1);
    log.debug('written at the route level');
    expect(lines).toEqual([expect.objectContaining({ reqId: 'req-3', msg: 'written at the route level', level: 20 })]);
  });
});
