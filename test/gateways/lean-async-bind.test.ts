import { AsyncLocalStorage, AsyncResource, executionAsyncId } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import '../../src/gateways/lean-async-bind.js';

describe('AsyncResource#bind, as the HTTP/2 gateways run it', () => {
  it('runs the bound function in the async context the resource was made in, not the caller’s', async () => {
    const store = new AsyncLocalStorage<string>();
    const resource = store.run('made here', () => new AsyncResource('test'));
    const bound = resource.bind(() => [store.getStore(), executionAsyncId()] as const);
    const [seen, asyncId] = await store.run(
      'called from here',
      () => new Promise<readonly [string | undefined, number]>((r) => setImmediate(() => r(bound()))),
    );
    expect(seen).toBe('made here');
    expect(asyncId).toBe(resource.asyncId());
  });

  it('passes arguments, `this` and the result through, keeps `length`, and binds `thisArg` when given', () => {
    const resource = new AsyncResource('test');
    function add(this: { base: number } | undefined, a: number, b: number) {
      return (this?.base ?? 0) + a + b;
    }
    const bound = resource.bind(add);
    expect(bound.length).toBe(2);
    expect(bound.call({ base: 10 }, 1, 2)).toBe(13);
    // Node's own callers pass thisArg, which @types/node leaves out
    const withThis = Reflect.apply(resource.bind, resource, [add, { base: 100 }]) as (a: number, b: number) => number;
    expect(withThis.length).toBe(2);
    expect(withThis(1, 2)).toBe(103);
  });

  it('adds no deprecated `asyncResource` accessor to the bound function', () => {
    const bound = new AsyncResource('test').bind(() => undefined);
    expect(Object.getOwnPropertyDescriptor(bound, 'asyncResource')).toBeUndefined();
  });

  it('refuses what is not a function', () => {
    expect(() => new AsyncResource('test').bind(42 as unknown as () => void)).toThrow(TypeError);
  });
});
