import { fork, type ChildProcess } from 'node:child_process';
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
  /** paced: how late each post went out after it was due (the clients' own lag, counted in its latency) */
  late?: Float64Array;
  startedAt: number;
  endedAt: number;
}

export interface ClientsOptions {
  base: string;
  authorization: string;
  /** concurrent clients, each on a keep-alive connection of its own */
  clients: number;
  /** the HTTP client: undici's Pool (the lab's, cheaper), or node:http with a keep-alive Agent (what most backends use) */
  agent?: 'undici' | 'http';
  /** where the clients run: a thread of this process (the lab's), or a process of their own (the outside view) */
  where?: 'thread' | 'process';
}

/**
 * The benchmark's HTTP clients, on a thread or a process of their own (load-clients-core.ts). What they measure is
 * the time the service takes to answer, not time spent waiting for this process's main thread, which may also run
 * the mock gateways, keeps the benchmark's bookkeeping and collects its garbage: a backend's clients run on another
 * host. The connections stay open from one `post` to the next, as a backend's HTTP client keeps them.
 */
export class LoadClients {
  private readonly worker: Worker | null = null;
  private readonly child: ChildProcess | null = null;
  /** posts answered so far in the current `post`, counted by the clients' thread as they come */
  private readonly answeredCount = new Int32Array(new SharedArrayBuffer(4));

  constructor(options: ClientsOptions) {
    if (options.where === 'process') {
      this.child = fork(new URL('./load-clients-process.mjs', import.meta.url), [JSON.stringify(options)], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      const child = this.child;
      process.on('exit', () => child.kill('SIGKILL'));
      child.on('message', (m: { answered?: number }) => {
        if (m.answered !== undefined) Atomics.store(this.answeredCount, 0, m.answered);
      });
    } else {
      this.worker = new Worker(new URL('./load-clients-thread.mjs', import.meta.url), {
        workerData: { ...options, answered: this.answeredCount },
      });
      this.worker.unref();
    }
  }

  /** The clients' process, when they run in one (its CPU is counted apart). */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  /**
   * Posts `list` with every client: at `perSecond` when given (post i is due i / perSecond s after the start; a
   * client busy past that posts it late), else each client posts its next as soon as its last is answered.
   */
  post(list: Post[], perSecond = 0): Promise<Answers> {
    Atomics.store(this.answeredCount, 0, 0);
    // the clients' times come as epoch ms: their performance.now() counts from when they started
    const onCaller = (answers: Answers): Answers => ({
      latencies: Float64Array.from(answers.latencies),
      statuses: Uint16Array.from(answers.statuses),
      late: Float64Array.from(answers.late ?? []),
      startedAt: answers.startedAt - performance.timeOrigin,
      endedAt: answers.endedAt - performance.timeOrigin,
    });
    const channel = (this.worker ?? this.child)!;
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      const onExit = (code: number) => reject(new Error(`the load clients exited (code ${code})`));
      channel.once('error', onError);
      channel.once('exit', onExit);
      const onMessage = (m: Answers | { answers?: Answers }) => {
        const answers = this.worker ? (m as Answers) : (m as { answers?: Answers }).answers;
        if (!answers) return;
        channel.off('message', onMessage);
        channel.off('error', onError);
        channel.off('exit', onExit);
        resolve(onCaller(answers));
      };
      channel.on('message', onMessage);
      if (this.worker) this.worker.postMessage({ list, perSecond });
      else this.child!.send({ list, perSecond });
    });
  }

  /** How many posts of the current `post` have been answered. */
  answered(): number {
    return Atomics.load(this.answeredCount, 0);
  }

  async close(): Promise<void> {
    if (this.worker) await this.worker.terminate();
    if (this.child && this.child.exitCode === null) {
      const exited = new Promise((resolve) => this.child!.once('exit', resolve));
      this.child.kill('SIGTERM');
      await exited;
    }
  }
}
