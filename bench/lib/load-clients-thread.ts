import { parentPort, workerData } from 'node:worker_threads';
import type { ClientsOptions, Post } from './load-clients.js';
import { clientsPosting } from './load-clients-core.js';

/** The clients' thread of LoadClients: it posts each list it is sent and answers with what the clients saw. */
const { answered, ...options } = workerData as ClientsOptions & { answered: Int32Array };
const clients = clientsPosting(options, () => Atomics.add(answered, 0, 1));

parentPort!.on('message', ({ list, perSecond }: { list: Post[]; perSecond: number }) => {
  void clients
    .postAll(list, perSecond)
    .then((answers) =>
      parentPort!.postMessage(answers, [
        answers.latencies.buffer as ArrayBuffer,
        answers.statuses.buffer as ArrayBuffer,
        answers.late!.buffer as ArrayBuffer,
      ]),
    );
});
