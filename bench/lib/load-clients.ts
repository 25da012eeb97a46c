import { Worker } from 'node:worker_threads';

/** One request the clients post: JSON `body` to `path`. */
export interface Post {
  path: string;
  body: unknown;
}

/**
 * What the clients saw of each post, in the order of the list: ms from sending to the whole answer, its status;
 * and when the first post went out and the last answer came, on the caller's clock (performance.now()).
 */
export interface Answers {
  latencies: Float64Array;
  statuses: Uint16Array;
  startedAt: number;
  endedAt: number;
}

export interface ClientsOptions {
  base: string;
  authorization: string;
  /** concurrent clients, each on a keep-alive connection of its own */
  clients: number;
}

/**
 * The benchmark's HTTP clients, on a thread of their own (load-clients-thread.ts). What they measure is the time
 * the service takes to answer, not time spent waiting for this process's main thread, which also runs the mock
 * gateways (every push of the run goes through them), keeps the benchmark's bookkeeping and collects its garbage:
 * a backend's clients run on another host. The connections stay open from one `post` to the next, as a backend's
 * HTTP client keeps them.
 */
export class LoadClients {
  private readonly worker: Worker;
  /** posts answered so far in the current `post`, counted by the clients' thread as they come */
  private readonly answeredCount = new Int32Array(new SharedArrayBuffer(4));

  constructor(options: ClientsOptions) {
    this.worker = new Worker(new URL('./load-clients-thread.mjs', import.meta.url), {
      workerData: { ...options, answered: this.answeredCount },
    });
    this.worker.unref();
  }

  /**
   * Posts `list` with every client: at `perSecond` when given (post i is due i / perSecond s after the start; a
   * client busy past that posts it late), else each client posts its next as soon as its last is answered.
   */
  post(list: Post[], perSecond = 0): Promise<Answers> {
    Atomics.store(this.answeredCount, 0, 0);
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      this.worker.once('error', onError);
      // the thread's times come as epoch ms: its performance.now() counts from when it started
      this.worker.once('message', (answers: Answers) => {
        this.worker.off('error', onError);
        resolve({ ...answers, startedAt: answers.startedAt - performance.timeOrigin, endedAt: answers.endedAt - performance.timeOrigin });
      });
      this.worker.postMessage({ list, perSecond });
    });
  }

  /** How many posts of the current `post` have been answered. */
  answered(): number {
    return Atomics.load(this.answeredCount, 0);
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
