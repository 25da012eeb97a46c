import { parentPort, workerData } from 'node:worker_threads';
import { Pool } from 'undici';
import type { Answers, ClientsOptions, Post } from './load-clients.js';

/** The clients' thread of LoadClients: it posts each list it is sent and answers with what the clients saw. */
const { base, authorization, clients, answered } = workerData as ClientsOptions & { answered: Int32Array };

/** undici's client costs about half of node:http's CPU a request, which it takes from the service's 2 cores */
const pool = new Pool(base, { connections: clients, pipelining: 1 });

async function postOne({ path, body }: Post): Promise<number> {
  const answer = await pool.request({
    path,
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await answer.body.dump();
  return answer.statusCode;
}

async function postAll(list: Post[], perSecond: number): Promise<Answers> {
  const latencies = new Float64Array(list.length);
  const statuses = new Uint16Array(list.length);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < list.length) {
        const i = next++;
        const due = perSecond > 0 ? t0 + (i * 1000) / perSecond - performance.now() : 0;
        if (due > 0) await new Promise((r) => setTimeout(r, due));
        const start = performance.now();
        statuses[i] = await postOne(list[i]!);
        latencies[i] = performance.now() - start;
        Atomics.add(answered, 0, 1);
      }
    }),
  );
  return { latencies, statuses, startedAt: performance.timeOrigin + t0, endedAt: performance.timeOrigin + performance.now() };
}

parentPort!.on('message', ({ list, perSecond }: { list: Post[]; perSecond: number }) => {
  void postAll(list, perSecond).then((answers) =>
    parentPort!.postMessage(answers, [answers.latencies.buffer as ArrayBuffer, answers.statuses.buffer as ArrayBuffer]),
  );
});
