import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { Http2Origin } from '../../src/gateways/http2-client.js';
import { serverTls } from '../mocks/tls.js';

/**
 * An HTTP/2 server on a thread of its own, so it answers while this thread is blocked. It tells this thread when a
 * request arrived, then answers 200 after `answerAfterMs`.
 */
function startServer(answerAfterMs: number): Promise<{ origin: string; worker: Worker }> {
  const code = `
    const http2 = require('node:http2');
    const { parentPort, workerData } = require('node:worker_threads');
    const server = http2.createSecureServer({ key: workerData.key, cert: workerData.cert });
    server.on('stream', (stream) => {
      parentPort.postMessage('received');
      setTimeout(() => stream.respond({ ':status': 200 }, { endStream: true }), workerData.answerAfterMs);
    });
    server.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: server.address().port }));
  `;
  const worker = new Worker(code, { eval: true, workerData: { ...serverTls(), answerAfterMs } });
  return new Promise((resolve) =>
    worker.once('message', (m: { port: number }) => resolve({ origin: `https://127.0.0.1:${m.port}`, worker })),
  );
}

describe('Http2Origin', () => {
  const workers: Worker[] = [];
  afterAll(async () => {
    for (const w of workers) await w.terminate();
  });

  it('reads an answer that arrived while the process stalled before timing its request out', async () => {
    const { origin, worker } = await startServer(20);
    workers.push(worker);
    const client = new Http2Origin(origin, { sweepIntervalMs: 10 });
    try {
      const received = new Promise((r) => worker.once('message', r));
      const answer = client.request('POST', '/', {}, '{}', 100);
      await received;
      // The answer arrives during this stall, and the deadline passes: both are due when the loop resumes.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 400);
      await expect(answer).resolves.toMatchObject({ status: 200 });
    } finally {
      await client.close();
    }
  });

  it('still times out a request that got no answer', async () => {
    const { origin, worker } = await startServer(5_000);
    workers.push(worker);
    const client = new Http2Origin(origin, { sweepIntervalMs: 10 });
    try {
      const started = performance.now();
      await expect(client.request('POST', '/', {}, '{}', 100)).rejects.toThrow(/timeout after 100 ms/);
      expect(performance.now() - started).toBeLessThan(1_000);
    } finally {
      await client.close();
    }
  });
});
