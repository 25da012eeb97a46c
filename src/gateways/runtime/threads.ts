/**
 * Gateways in worker threads. Sending pushes over HTTP/2 (TLS, streams, and the garbage they leave) is
 * most of a delivery worker's CPU; in threads of their own it runs on another core than the job, queue
 * and database work of the main thread. Each app + platform + environment always goes to the same
 * thread, so its long-lived connections and limits stay in one GatewayPool.
 *
 * A thread that dies (a bug, out of memory) answers `retry` for every push it had in flight — the batch
 * is retried with backoff, so nothing is lost — and is started again.
 */
import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import type { AppPushCredentials } from '../pool.js';
import {
  answerAll,
  GATEWAY_CLOSED,
  type NotificationPush,
  type PushEnvironment,
  type PushGateway,
  type PushOutcome,
  type PushPlatform,
  type PushResult,
  type PushTarget,
} from '../types.js';
import type { Logger } from '../../platform/logger.js';
import type { FromGatewayThread, GatewayThreadData, ToGatewayThread } from './thread-protocol.js';

/** Pause before a thread that died is started again (a thread that cannot start must not spin). */
const RESPAWN_DELAY_MS = 1000;
/** Old-generation cap of a gateway thread: its live heap is a few tens of MB, and memory must stay bounded. */
const THREAD_HEAP_MB = 96;

export class GatewayThreads {
  private readonly threads: GatewayThread[];

  /**
   * `entry`: the module each thread runs (thread-main: compiled .js in production; a test passes a loader for the
   * .ts source). `closeTimeoutMs`: how long close() waits for in-flight sends before a thread is terminated.
   */
  constructor(count: number, data: GatewayThreadData, log: Logger, runtime: { entry: URL; closeTimeoutMs: number }) {
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`thread count must be a positive integer, got ${count}`);
    this.threads = Array.from({ length: count }, (_, i) => new GatewayThread(data, runtime, log.child({ gatewayThread: i })));
  }

  /** The gateway of one app, platform and environment, in the thread that owns it. */
  get(app: AppPushCredentials, platform: PushPlatform, environment: PushEnvironment): PushGateway {
    const key = `${app.id}|${platform}|${environment}`;
    const thread = this.threads[createHash('sha1').update(key).digest().readUInt32BE(0) % this.threads.length] as GatewayThread;
    return {
      send: (push, targets) => thread.send({ app, platform, environment, push }, targets),
      close: async () => undefined, // connections belong to the thread's pool, closed with the threads
    };
  }

  async close(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.close()));
  }
}

interface Pending {
  targets: PushTarget[];
  resolve: (results: PushResult[]) => void;
}

class GatewayThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private closing: Promise<void> | undefined;
  /**
   * The credentials object last posted to the thread, by app: delivery's read of them (`DeliveryStore.credentialsOf`)
   * answers the same object until the app changes, so they are posted once per change, not with every send (a new
   * thread is posted them again).
   */
  private readonly posted = new Map<string, AppPushCredentials>();

  constructor(
    private readonly data: GatewayThreadData,
    private readonly runtime: { entry: URL; closeTimeoutMs: number },
    private readonly log: Logger,
  ) {
    this.worker = this.spawn();
  }

  send(
    what: { app: AppPushCredentials; platform: PushPlatform; environment: PushEnvironment; push: NotificationPush },
    targets: PushTarget[],
  ): Promise<PushResult[]> {
    const worker = this.worker;
    if (this.closing) return Promise.resolve(answerAll(targets, GATEWAY_CLOSED));
    if (!worker) return Promise.resolve(answerAll(targets, { kind: 'retry', reason: 'gateway thread restarting' }));
    const id = ++this.nextId;
    const { app, ...send } = what;
    if (this.posted.get(app.id) !== app) {
      worker.postMessage({ type: 'credentials', app } satisfies ToGatewayThread);
      this.posted.set(app.id, app);
    }
    return new Promise((resolve) => {
      this.pending.set(id, { targets, resolve });
      const message: ToGatewayThread = {
        type: 'send',
        id,
        appId: app.id,
        ...send,
        tokens: targets.map((t) => t.token),
        ...(what.platform === 'web' && { keys: targets.map((t) => t.keys) }),
      };
      worker.postMessage(message);
    });
  }

  /** Lets in-flight sends finish, closes the thread's connections, and ends the thread. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      const worker = this.worker;
      if (!worker) return resolve();
      const timer = setTimeout(() => void worker.terminate(), this.runtime.closeTimeoutMs);
      worker.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      worker.postMessage({ type: 'close' } satisfies ToGatewayThread);
    });
    return this.closing;
  }

  private spawn(): Worker {
    this.posted.clear();
    const worker = new Worker(this.runtime.entry, { workerData: this.data, resourceLimits: { maxOldGenerationSizeMb: THREAD_HEAP_MB } });
    worker.unref(); // the main thread's own handles decide when the process ends
    worker.on('message', (message: FromGatewayThread) => {
      if (message.type !== 'sent') return;
      const pending = this.pending.get(message.id);
      if (!pending) return;
      this.pending.delete(message.id);
      pending.resolve(pending.targets.map((t, i) => ({ deviceId: t.deviceId, outcome: message.outcomes[i] as PushOutcome })));
    });
    worker.on('error', (err) => this.log.error({ err }, 'gateway thread failed'));
    worker.on('exit', (code) => {
      // Whatever was in flight gets `retry`: the delivery job backs off and sends it again.
      for (const [id, p] of this.pending) {
        this.pending.delete(id);
        p.resolve(answerAll(p.targets, { kind: 'retry', reason: 'gateway thread exited' }));
      }
      this.worker = undefined;
      if (this.closing) return;
      this.log.error({ code }, 'gateway thread exited; starting another');
      setTimeout(() => {
        if (!this.closing) this.worker = this.spawn();
      }, RESPAWN_DELAY_MS).unref();
    });
    return worker;
  }
}
