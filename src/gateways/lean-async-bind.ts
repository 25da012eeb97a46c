/**
 * Every HTTP/2 request Node makes binds a callback with `AsyncResource#bind`. On Node 20 that bind also attaches
 * a deprecated `asyncResource` accessor to the bound function, built with `util.deprecate`, whose wrappers get
 * their prototype changed: several objects with hidden classes of their own for every push (nodejs/node#58218).
 * Node 24 stopped changing the prototype and Node 25 dropped the accessor (DEP0172, end-of-life). Where the
 * running Node still attaches it, bind is replaced here by what current Node does: the same async scope, `this`
 * and `length`, without the accessor nothing in this process reads.
 *
 * Imported for its effect by the modules that open HTTP/2 streams; it runs once per thread (each has its own
 * AsyncResource).
 */
import { AsyncResource } from 'node:async_hooks';

type AnyFunction = (...args: unknown[]) => unknown;

function leanBind(this: AsyncResource, fn: AnyFunction, thisArg?: unknown): AnyFunction {
  if (typeof fn !== 'function') throw new TypeError('The "fn" argument must be of type function');
  const bound = thisArg === undefined ? runsIn(this, fn) : this.runInAsyncScope.bind(this, fn, thisArg);
  Object.defineProperty(bound, 'length', { configurable: true, enumerable: false, value: fn.length, writable: false });
  return bound;
}

/** `fn` called with the caller's `this`, in `resource`'s async scope. */
function runsIn(resource: AsyncResource, fn: AnyFunction): AnyFunction {
  return function (this: unknown, ...args: unknown[]) {
    return resource.runInAsyncScope(fn, this, ...args);
  };
}

const probe = new AsyncResource('pushd.probe').bind(() => undefined);
if (Object.getOwnPropertyDescriptor(probe, 'asyncResource')) {
  AsyncResource.prototype.bind = leanBind as unknown as typeof AsyncResource.prototype.bind;
}
